"""Inputs that share memory (AOTAutograd, kiln._functorch.aot_autograd): the compiled-code cache
key's record of which arguments alias, a tensor passed twice traced as one input, and inputs that
share a storage and are mutated traced as one synthetic base (Note [Synthetic bases])."""

import kiln
from kiln import _C
from kiln._functorch._aot_autograd.output_analysis import _extent, _fakes, _layout, _restore_layouts
from kiln._subclasses.creation_meta import as_multi_output_view, multi_output_origin


def _layout_key(leaves):
    key = _C._aot.layout_key(leaves)  # C++: runs on every call of a compiled function
    if key is not None:
        return key
    key = [_C.is_grad_enabled()]  # symbolic sizes (a compiled function called inside a trace)
    for x in leaves:
        if isinstance(x, kiln.Tensor):
            key.append((tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype, x.device, x.requires_grad))
        else:
            key.append((type(x), x))
    aliases = _aliasing(leaves)
    if aliases:
        key.append(aliases)
    return tuple(key)


def _aliasing(leaves):
    """Which arguments share a storage (Note [Aliased arguments] in python_aot_runtime.cc):
    (later, earliest, same tensor) triples, as the C++ key has them."""
    first, out = {}, []
    for i, x in enumerate(leaves):
        if isinstance(x, kiln.Tensor):
            j = first.setdefault(x._storage_id(), i)
            if j != i:
                out.append((i, j, x is leaves[j]))
    return tuple(out)


def _deduplicated(create, flat_fn, leaves, config):
    """create(flat_fn, leaves, config) for arguments without repeats: a tensor passed more than
    once (tied weights reached through two module paths) is traced as one input, so its gradient
    is the sum over its uses once, not once per position (which the engine would add up again)."""
    firsts, seen = [], {}
    for i, x in enumerate(leaves):
        firsts.append(seen.setdefault(id(x), i) if isinstance(x, kiln.Tensor) else i)
    keep = sorted(set(firsts))
    if len(keep) == len(leaves):
        return _with_synthetic_bases(create, flat_fn, leaves, config)
    position = {i: k for k, i in enumerate(keep)}
    where = [position[f] for f in firsts]

    def unique_fn(*unique):
        return flat_fn(*[unique[w] for w in where])

    inner = _with_synthetic_bases(create, unique_fn, [leaves[i] for i in keep], config)
    return lambda args: inner([args[i] for i in keep])


def _overlaps_itself(t):
    """Whether two elements of t share a memory location (an expanded dim); an empty tensor has
    no element to share."""
    return t.numel() > 0 and any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride()))


def _with_synthetic_bases(create, flat_fn, leaves, config):
    """Note [Synthetic bases]: functionalization treats every input as its own memory. That is
    wrong for an input the program mutates when its memory is shared: with another input (`a`
    and `a.t()`) or within itself (`base.expand(5, 2)`, whose rows are one row). Such a group
    of inputs is traced as one dense 1-d base over their storage (from its first element to the
    last they reach), each member rebuilt
    inside the program as an as_strided view of it; the mutation then lands on the base, which
    is copied back, and every member reads it, as eager's shared memory does (PyTorch's AOT
    does the same). When members require grad, the base is cut from the tensor they all view
    (their `_base`), so the copy-back joins its history as eager's in-place op through a view
    does and each member's gradient reaches it; members with no common base are refused."""
    groups = {}
    for i, x in enumerate(leaves):
        if isinstance(x, kiln.Tensor):
            groups.setdefault(x._storage_id(), []).append(i)
    # empty inputs share memory too: one changed in place bumps the version the others' saved
    # values are checked by (`x1.mT.abs()` then `x2.neg_()` of an empty x2 aliasing x1 raises in
    # eager's backward: fuzz seed 291, program 1051)
    suspects = [g for g in groups.values() if len(g) > 1 or leaves[g[0]].numel() > 0 and _overlaps_itself(leaves[g[0]])]
    if not suspects:
        return create(flat_fn, leaves, config)
    mode, fakes = _fakes(leaves)
    versions = [f._version if isinstance(f, kiln.Tensor) else None for f in fakes]
    layouts = [_layout(f) if isinstance(f, kiln.Tensor) else None for f in fakes]
    with mode:
        flat_fn(*fakes)
    mutated = {i for i, (f, v) in enumerate(zip(fakes, versions)) if v is not None and f._version != v}
    relaid = _restore_layouts(mode, fakes, layouts)  # `x.t_()` on a member: replayed below
    bases = [g for g in suspects if mutated.intersection(g)]
    if not bases:
        return create(flat_fn, leaves, config)
    for g in bases:
        _differentiable_root(leaves, g)  # refuses here, at compile time, when there is none
    members = {i: k for k, g in enumerate(bases) for i in g}
    # Each base spans its storage from element 0, so that its trace input starts where its
    # storage does: a base starting at its members' first element (x[1:] and x[1:].t()) was a
    # fake whose storage was too short for that offset ("setStorage ... out of bounds").
    spans = [(0, max((_extent(leaves[i]) or (0, -1))[1] for i in g)) for g in bases]
    rest = [i for i in range(len(leaves)) if i not in members]
    layouts = {i: (tuple(leaves[i].shape), tuple(leaves[i].stride()), leaves[i].storage_offset() - spans[members[i]][0])
               for i in members}
    # a member that is a split piece is rebuilt as one, so the trace raises where eager does:
    # `base.mul_(2)` then any use of the piece (Note [Multi-output views of stand-ins])
    origins = {i: multi_output_origin(leaves[i]) for i in members}

    def split(args):  # real leaves -> the other leaves, then one dense base per group
        out = [args[i] for i in rest]
        for g, (lo, hi) in zip(bases, spans):
            out.append(_differentiable_root(args, g).as_strided((hi - lo + 1,), (1,), lo))
        return out

    def based_fn(*args):
        values = [None] * len(leaves)
        for i, a in zip(rest, args):
            values[i] = a
        base_args = args[len(rest):]
        for i, k in members.items():
            size, stride, offset = layouts[i]
            values[i] = base_args[k].as_strided(size, stride, base_args[k].storage_offset() + offset)
            if origins[i] is not None:
                values[i] = as_multi_output_view(values[i], origins[i])
        return flat_fn(*values)

    inner = create(based_fn, split(leaves), config)
    relaid = {i: layout for i, layout in relaid.items() if i in members}  # the others: inner's own

    def run(args):
        def relay():  # a member is rebuilt inside: its new layout is not the inner function's
            for i, layout in relaid.items():  # business (Note [Input metadata mutations] in runtime.py)
                args[i].as_strided_(*layout)

        if _C.is_grad_enabled():
            for i in members:  # eager's error for a split piece used after its base changed
                if args[i].requires_grad:
                    args[i].grad_fn  # noqa: B018 - reading it raises that error, as eager's first use does
        # inside the inner epilogue, before the backward's versions are read: the relaying bumps
        # the version counter every member shares with the base (Note [Versions after the epilogue] in runtime.py)
        return inner(split(args), epilogue=relay if relaid else None)
    return run


def _differentiable_root(args, group):
    """The tensor a synthetic base is cut from: any member when none requires grad; else the one
    tensor every member views or is (Tensor._base), whose history reaches them all."""
    if not any(args[i].requires_grad for i in group):
        return args[group[0]]
    roots = [args[i] if args[i]._base is None else args[i]._base for i in group]
    if any(r is not roots[0] for r in roots):
        raise NotImplementedError(
            f"aot_function: inputs {list(group)} share memory, are mutated in place, and require grad, but are "
            "not views of one tensor; kiln's compiled functions support that only for views of one tensor "
            "(clone them first)")
    return roots[0]
