"""Graph rewrites Inductor applies to an FX graph before lowering it.

Note [Transposed gradients]: a linear layer's weight gradient reaches the backward graph's output
as a transpose of a product, t(mm(x^T, dy)), so Inductor returned a transposed view and autograd's
AccumulateGrad had to copy it into the weight's contiguous layout on every step. The product of
the transposed operands, mm(dy^T, x), is the same matrix laid out contiguously, and transposing
an operand is free (a BLAS flag). Applied to the backward graph's outputs, whose layout nobody
but AccumulateGrad sees; a forward graph's outputs keep eager's strides.
"""

import kiln

aten = kiln.ops.aten


def _is_2d_transpose(node):
    if node.op != "call_function":
        return False
    val = node.meta.get("val")
    if not isinstance(val, kiln.Tensor) or val.dim() != 2:
        return False
    if node.target is aten.t.default:
        return True
    if node.target is aten.transpose.int:
        return sorted(d % 2 for d in node.args[1:3]) == [0, 1]
    if node.target is aten.permute.default:
        return [d % 2 for d in node.args[1]] == [1, 0]
    return False


def contiguous_transposed_products(gm, **_):
    """Rewrites each output t(mm(a, b)) whose product has no other user into mm(t(b), t(a))
    (Note [Transposed gradients]). Returns the number of outputs rewritten."""
    graph = gm.graph
    output = next(n for n in graph.nodes if n.op == "output")
    outs = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    rewritten = 0
    for node in outs:
        if not hasattr(node, "op") or not _is_2d_transpose(node):
            continue
        product = node.args[0]
        if product.op != "call_function" or product.target is not aten.mm.default or len(product.users) != 1:
            continue
        a, b = product.args
        with graph.inserting_before(node):
            bt = graph.call_function(aten.t.default, (b,))
            at = graph.call_function(aten.t.default, (a,))
            mm = graph.call_function(aten.mm.default, (bt, at))
        bt.meta["val"] = b.meta["val"].t()
        at.meta["val"] = a.meta["val"].t()
        mm.meta["val"] = aten.mm.default(bt.meta["val"], at.meta["val"])
        node.replace_all_uses_with(mm)
        graph.erase_node(node)
        graph.erase_node(product)
        rewritten += 1
    if rewritten:
        gm._lazy_recompile()
    return rewritten


def layout_optimization(gm, kind, saved_layouts=None, **_):
    """Channels-last activations around 2-d convolutions (layout.py, Note [Layout optimization])."""
    from kiln._inductor.layout import optimize_layouts

    return optimize_layouts(gm, kind, saved_layouts)


# The passes compile_fx_inner runs on a graph before lowering it: (name, pass, the graphs it
# applies to), each called as pass(gm, kind=..., saved_layouts=...). kiln._dynamo.bisect turns
# them off one by one (bisect_controls.disabled_passes).
POST_GRAD_PASSES = [
    ("contiguous_transposed_products", contiguous_transposed_products, ("backward",)),
    ("layout_optimization", layout_optimization, ("forward", "backward", "inference")),
]


def run_post_grad_passes(gm, kind, saved_layouts=None):
    """Runs the passes for a graph of `kind` ("forward", "backward" or "inference") in order;
    `saved_layouts` carries a forward's saved values' layouts to its backward (layout.py)."""
    from kiln._inductor.bisect_controls import disabled_passes

    for name, run, kinds in POST_GRAD_PASSES:
        if kind in kinds and name not in disabled_passes:
            run(gm, kind=kind, saved_layouts=saved_layouts)
