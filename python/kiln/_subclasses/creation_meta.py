"""Autograd's multi-output view mark, read off a real tensor and given to its stand-ins.

Note [Multi-output views of stand-ins]
`p = v.split(1, -1)[-1]` is one of several views split returned; with autograd on, eager refuses
an in-place change of p or of any view of p ("Output 4 of Split is a view and is being modified
inplace ...", CheckInplace in autograd/derivatives.cc), and once v changed in place, any use of p
("... its base or another view of its base has been modified inplace", RefreshViewGradFn). C++
keeps this as the view's `multi_output_view_` mark (PyTorch's CreationMeta::MULTI_OUTPUT_NODE),
which kiln does not expose to Python. PyTorch's fakes copy it (meta_utils sets the creation meta
of a fake view), so its traces raise where eager does. kiln's stand-ins for a real input (a fake,
or a member rebuilt from a synthetic base) were plain strided views: a program given p, which
wrote `p[:1] = 0` or `v.mul_(2)` then read p, traced and ran compiled where eager raises (fuzz seed
181, program 28371: p and v reached a resumed frame as two inputs sharing memory).

Here the mark is read from the real tensor's autograd history (the view nodes from its grad_fn
down to its base's: one made by an op returning a list of views, `-> Tensor(a)[]`) and given to a
stand-in by making it that op's output of the same number, over the same elements (the earlier
outputs empty). The stand-in's own error then names that op (`Output 4 of Split`) even when the
real tensor is a further view of the piece (eager: `Output 0 of Slice`); a Dynamo frame runs the op
that raised eagerly, and an AOT graph from Dynamo runs as written when its trace raises, so the user
sees eager's message there.
"""

import functools
import re

import kiln


def multi_output_origin(t):
    """(op, output number) of the op returning several views that `t`, a view whose in-place
    changes autograd refuses, comes from (t's own op for a piece, an earlier one for a view of a
    piece); None for any other tensor, and for a stale piece (its base changed since), whose
    grad_fn raises eager's error: the real tensor raises it at its first use when compiled code
    runs, as before (raised while Dynamo wrapped the input, it read as kiln's compiler failing)."""
    base = t._base
    if base is None:
        return None
    try:
        node, number = t.grad_fn, t.output_nr
    except RuntimeError:
        return None
    stop = base.grad_fn
    # a view's history is view nodes down to its base's grad_fn (or the base's AccumulateGrad)
    while node is not None and node is not stop:
        op = _multi_view_op(node.name())
        if op is not None:
            return op, number
        edges = node.next_functions
        if len(edges) != 1:
            return None
        node, number = edges[0]
    return None


def as_multi_output_view(view, origin):
    """`view` (requiring grad, made with autograd on) remade as output `number` of origin's op over
    the same elements, so that autograd marks it as it marks the tensor `origin` was read from."""
    remake, number = origin
    return remake(view, number)


def _piece_of_split(op):
    """Output `number` of a split-like op (a list of sizes) that is `view`: the earlier pieces empty."""
    def remake(view, number):
        flat = view.unsqueeze(0) if view.dim() == 0 else view
        piece = op(flat, [0] * number + [flat.shape[0]], 0)[number]
        return piece.squeeze(0) if view.dim() == 0 else piece
    return remake


def _piece_of_unbind(view, number):
    """Output `number` of unbind over `view` repeated number + 1 times (stride 0): `view`'s elements."""
    return kiln.ops.aten.unbind.int(view.unsqueeze(0).expand(number + 1, *view.shape), 0)[number]


@functools.lru_cache(maxsize=None)
def _multi_view_op(node_name):
    """remake(view, number), making `view` output `number` of the op a node named `node_name`
    records, when that op returns a list of views (SplitBackward0: through split.sizes;
    UnbindBackward0: through unbind.int); else None. Node names are the op's
    name in CamelCase with `Backward0` (Note [Backward node names] in autograd/node_names.h)."""
    match = re.fullmatch(r"([A-Za-z0-9]+?)Backward\d*", node_name)
    if match is None:
        return None
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", match.group(1)).lower()
    packet = getattr(kiln.ops.aten, name, None)
    if packet is None:
        return None
    for overload in packet.overloads():
        op = getattr(packet, overload)
        schema = str(op._schema)
        if schema.endswith("-> Tensor(a)[]") and re.search(r"\(Tensor\(a -> \*\) self, SymInt\[\] ", schema):
            return _piece_of_split(op)
        if schema.startswith("aten::unbind.int("):
            return _piece_of_unbind
    return None
