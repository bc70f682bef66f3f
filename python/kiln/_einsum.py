"""kiln.einsum: Einstein summation as views, sums and matmuls (PyTorch's torch.einsum).

    einsum("bij,bjk->bik", a, b)      # explicit output
    einsum("ij,jk", a, b)             # implicit output: labels seen once, in alphabetical order
    einsum("...ij,...jk", a, b)       # `...` stands for broadcast leading dimensions
    einsum("ii->i", a)                # a label repeated on one operand takes the diagonal

How it runs, as PyTorch's does without opt_einsum: each operand first takes the diagonals of its
repeated labels (a view) and sums the labels no one else needs; then operands are contracted
pairwise from left to right. One contraction permutes both operands to (batch, free, summed) and
(batch, summed, free), flattens each group and calls matmul (mm without batch labels, bmm with),
so a matmul-like equation is one matmul. The result is finally permuted to the output's order. A
single operand with nothing to sum gives a view, as in PyTorch. Size-1 dimensions broadcast.
"""

import math

from kiln import _C

_ELLIPSIS = "..."


def _label_ok(c):
    return ("a" <= c <= "z") or ("A" <= c <= "Z")


def _parse_term(term, start, index):
    """Labels of one operand's subscripts ('...' kept as one item); `start` is its offset in the
    equation, for error messages."""
    labels, i = [], 0
    while i < len(term):
        c = term[i]
        if c == ".":
            if term[i:i + 3] != _ELLIPSIS or _ELLIPSIS in labels:
                raise RuntimeError(f"einsum(): found '.' for operand {index} that is not part of any ellipsis")
            labels.append(_ELLIPSIS)
            i += 3
            continue
        if not _label_ok(c):
            raise RuntimeError(f"einsum(): invalid subscript given at index {start + i} in the equation string, "
                               f"subscripts must be in [a-zA-Z]")
        labels.append(c)
        i += 1
    return labels


def _parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    inputs, pos = [], 0
    for i, (term, op) in enumerate(zip(terms, operands)):
        labels = _parse_term(term, pos, i)
        pos += len(term) + 1
        named = len(labels) - (1 if _ELLIPSIS in labels else 0)
        if _ELLIPSIS not in labels and named != op.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) does not match the "
                               f"number of dimensions ({op.ndim}) for operand {i} and no ellipsis was given")
        if _ELLIPSIS in labels and named > op.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({named}) is more than the "
                               f"number of dimensions ({op.ndim}) for operand {i}")
        inputs.append(labels)
    if arrow:
        output = _parse_term(rhs, len(lhs) + 2, 0)
        seen = set()
        for c in output:
            if c in seen:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the output")
            seen.add(c)
            if c != _ELLIPSIS and not any(c in labels for labels in inputs):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation for any input "
                                   f"operand")
    else:
        counts = {}
        for labels in inputs:
            for c in labels:
                counts[c] = counts.get(c, 0) + 1
        output = ([_ELLIPSIS] if _ELLIPSIS in counts else []) + \
            sorted(c for c, n in counts.items() if n == 1 and c != _ELLIPSIS)
    return inputs, output


def _expand_ellipsis(labels, ndim, width):
    """Labels with '...' replaced by one label per broadcast dim, right-aligned: ('...', k)."""
    if _ELLIPSIS not in labels:
        return list(labels)
    i = labels.index(_ELLIPSIS)
    n = ndim - (len(labels) - 1)
    return labels[:i] + [(_ELLIPSIS, width - n + k) for k in range(n)] + labels[i + 1:]


def _take_diagonals(x, labels, index):
    """Repeated labels of one operand -> their diagonal (a view; it moves to the last dim)."""
    while True:
        dup = next((c for i, c in enumerate(labels) if c in labels[:i]), None)
        if dup is None:
            return x, labels
        i = labels.index(dup)
        j = labels.index(dup, i + 1)
        if x.shape[i] != x.shape[j]:
            raise RuntimeError(f"einsum(): subscript {dup} is repeated for operand {index} but the sizes don't "
                               f"match, {x.shape[j]} != {x.shape[i]}")
        x = x.diagonal(0, i, j)
        labels = [c for k, c in enumerate(labels) if k not in (i, j)] + [dup]


def _sum_labels(x, labels, drop):
    dims = [i for i, c in enumerate(labels) if c in drop]
    if not dims:
        return x, labels
    return x.sum(dims), [c for c in labels if c not in drop]


def _contract(a, la, b, lb, keep):
    """a (labels la) times b (labels lb), summed over the shared labels not in `keep`."""
    size = {}
    for x, labels in ((a, la), (b, lb)):
        for c, s in zip(labels, x.shape):
            size[c] = s if c not in size or size[c] == 1 else size[c]
    summed = [c for c in la if c in lb and c not in keep]
    batch = [c for c in la if c in lb and c in keep]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]
    # a summed label of size 1 on one side only: sum the other side's first (keeps the size 1)
    for c in summed:
        sa, sb = a.shape[la.index(c)], b.shape[lb.index(c)]
        if sa == 1 and sb != 1:
            b = b.sum(lb.index(c), keepdim=True)
        elif sb == 1 and sa != 1:
            a = a.sum(la.index(c), keepdim=True)
    a = a.permute([la.index(c) for c in batch + left + summed])
    b = b.permute([lb.index(c) for c in batch + summed + right])
    bsize = [size[c] for c in batch]
    a = a.expand(bsize + list(a.shape[len(batch):]))
    b = b.expand(bsize + list(b.shape[len(batch):]))
    nb = math.prod(bsize)
    nl = math.prod(size[c] for c in left)
    nr = math.prod(size[c] for c in right)
    nk = math.prod(a.shape[len(batch) + len(left):])
    if a.dtype == _C.bool and nb * nl * nr and nk:  # PyTorch has no bool bmm kernel (empty cases skip it)
        raise NotImplementedError("\"bmm\" not implemented for 'Bool'")
    if batch:
        out = a.reshape(nb, nl, nk).matmul(b.reshape(nb, nk, nr))
    else:
        out = a.reshape(nl, nk).matmul(b.reshape(nk, nr))
    return out.reshape(bsize + [size[c] for c in left] + [size[c] for c in right]), batch + left + right


def einsum(*args):
    """Sums the product of the operands over the labels the output omits (see the module docstring)."""
    import kiln

    if len(args) < 2 or not isinstance(args[0], str):
        if len(args) >= 2 and isinstance(args[0], kiln.Tensor):
            raise NotImplementedError("einsum(): the sublist format (einsum(op, [0, 1], ...)) is not supported "
                                      "by kiln; pass an equation string")
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least one "
                         "operand and its subscripts list")
    equation, operands = args[0], args[1:]
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, op in enumerate(operands):
        if not isinstance(op, kiln.Tensor):
            raise TypeError(f"einsum(): argument 'operands' must be tuple of Tensors, not {type(op).__name__}")
        if op.dtype != operands[0].dtype:
            from kiln._composites import _type_name

            raise RuntimeError(f"expected scalar type {_type_name(operands[0].dtype)} but found "
                               f"{_type_name(op.dtype)}")
    inputs, output = _parse(equation, operands)
    width = max([op.ndim - (len(ls) - 1) for op, ls in zip(operands, inputs) if _ELLIPSIS in ls] + [0])
    output = _expand_ellipsis(output, width + len(output) - 1, width) if _ELLIPSIS in output else output
    labels = [_expand_ellipsis(ls, op.ndim, width) for op, ls in zip(operands, inputs)]
    # every label's size, checking that sizes agree or broadcast (size 1)
    sizes = {}
    for i, (op, ls) in enumerate(zip(operands, labels)):
        seen = {}
        for c, s in zip(ls, op.shape):
            if c in seen:
                continue
            seen[c] = s
            if c in sizes and s != sizes[c] and s != 1 and sizes[c] != 1:
                name = c if isinstance(c, str) else "..."
                raise RuntimeError(f"einsum(): subscript {name} has size {s} for operand {i} which does not "
                                   f"broadcast with previously seen size {sizes[c]}")
            sizes[c] = s if c not in sizes or sizes[c] == 1 else sizes[c]
    xs = []
    for i, (op, ls) in enumerate(zip(operands, labels)):
        xs.append(_take_diagonals(op, ls, i))
    # contract left to right; a label is summed once no later operand and not the output needs it
    x, lx = xs[0]
    for k in range(len(xs)):
        if k > 0:
            y, ly = xs[k]
            later = {c for _, ls in xs[k + 1:] for c in ls} | set(output)
            y, ly = _sum_labels(y, ly, {c for c in ly if c not in later and c not in lx})
            x, lx = _contract(x, lx, y, ly, later)
        later = {c for _, ls in xs[k + 1:] for c in ls} | set(output)
        x, lx = _sum_labels(x, lx, {c for c in lx if c not in later})
    # broadcast dims (size-1 on every operand that has them) and the output's order
    x = x.permute([lx.index(c) for c in output])  # a view even when the order is unchanged
    target = [sizes[c] for c in output]
    if list(x.shape) != target:
        x = x.expand(target)
    return x
