"""kiln._functorch.backward_reads: what a compiled backward reads, compared with eager's.

Two places where the one node that stands for a compiled function must not differ from the
many nodes eager would have recorded: which inputs and outputs the backward reads (so that their
in-place changes raise as eager's saved-tensor checks do, `inputs_read_by_backward`), and which
part of the backward runs when some outputs got no gradient (`prune_absent`, `formula_masks`).

## Absent tangents

One node stands for a whole compiled function, and its backward graph takes a tangent for each
differentiable output. When the loss did not use an output, autograd hands the node None for it,
and eager would never run that output's part of the backward. Feeding zeros in its place is not
the same:

- the backward is linear in its tangents, so that part is zero in exact arithmetic but not in
  floating point: `log`'s backward is `grad / x`, 0 / 0 is NaN at x == 0, and NaN + 1 is what the
  input's gradient became (`return x.log(), x.sum()` with only the sum in the loss);
- it reads saved tensors eager never reads, so an in-place change to one raised where eager
  does not (`float(x.amax())` saves x for amax's backward, then `x.add_(1)`).

So for each set of absent tangents the backward graph is specialised (`prune_absent`): every
value computed from absent tangents only is replaced by zeros where something else reads it, and
what fed only those values is dropped, saved inputs included. See also Note [Gradients of
absent tangents] in _aot_autograd/runtime.py (an input gradient that depends on absent tangents
only is None, not zeros).
"""

import contextlib
import copy

import kiln
from kiln import _C
from kiln.fx.graph_module import GraphModule

aten = kiln.ops.aten


def tangent_masks(graph, num_tangents, seeds=None):
    """{node: bitmask of the tangents (the last `num_tangents` placeholders, in order) it is computed from};
    `seeds` ({node: bitmask}) adds tangents a node stands for without reading them. An in-place
    op's mask reaches every node of the storage it writes (the argument, the views it was made
    through, their base): aot/backward_reads.h, Note [Tangent masks]."""
    return _C._aot.tangent_masks(graph, num_tangents, seeds)


def tangent_dependencies(bw_module, num_tangents, formula_masks=()):
    """For each backward output (an input's gradient, or None), the bitmask of the tangents it
    is computed from, or whose formulas made part of it (`formula_masks`, by output: Note
    [Gradients made from no gradient])."""
    graph = bw_module.graph
    masks = tangent_masks(graph, num_tangents)
    outs = graph.output_node().args[0]
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    deps = [masks.get(o, 0) if isinstance(o, kiln.fx.Node) else 0 for o in outs]
    made = list(formula_masks) + [0] * len(deps)
    return [d | m for d, m in zip(deps, made)]


# Note [Gradients made from no gradient]
# A formula may make an input's gradient without reading the gradient it was given: cat's for a
# legacy 1-D empty input it skipped is `zeros({0})`. In the graph that value depends on no
# tangent, so when it is added to one from a tangent that is absent (`x2.zero_()` on that input
# after the cat, the loss not reading x2's new value), the sum looked absent too and the input's
# gradient came back None, where eager's CatBackward ran and gave tensor([]) (fuzz seed 181,
# program 22566). The joint trace sees, through a hook on every autograd node, which gradients a
# formula returned that depend on no tangent, and seeds them with its incoming gradients'
# tangents (`formula_masks`): present exactly when eager would have run that node.
def formula_masks(made, num_inputs, num_tangents):
    """made: (node, the nodes of the gradients its formula was given) for each gradient a formula
    returned, in the joint's first (raw) trace, whose last `num_tangents` inputs are the tangents.
    The bitmask, for each of the last `num_inputs` outputs (the inputs' gradients), of the
    tangents whose formulas made part of it from none."""
    live = [(n, [s for s in sources if s.graph is not None]) for n, sources in made if n.graph is not None]
    if not live:
        return []
    graph = live[0][0].graph
    masks = tangent_masks(graph, num_tangents)
    seeds = {}
    for n, sources in live:
        if masks.get(n, 0) == 0:
            for s in sources:
                seeds[n] = seeds.get(n, 0) | masks.get(s, 0)
    if not any(seeds.values()):
        return []
    masks = tangent_masks(graph, num_tangents, seeds)
    outs = graph.output_node().args[0]
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    return [masks.get(o, 0) if isinstance(o, kiln.fx.Node) else 0 for o in outs[len(outs) - num_inputs:]]


def saved_placeholders(graph, num_tangents):
    """A backward graph's inputs before its `num_tangents` tangents: the values the forward saved
    (Note [The joint graph's contract], aot/joint.h)."""
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    return placeholders[:len(placeholders) - num_tangents]


def _static_tensor(value):
    return isinstance(value, kiln.Tensor) and all(isinstance(s, int) for s in value.shape)


def prune_absent(bw_module, num_tangents, absent):
    """bw_module specialised to the tangents in the bitmask `absent` being zero, or None when a
    value to replace has no static shape (then the caller feeds zeros through the full graph).

    Returns (module, unread): `unread` are the positions, among the graph's non-tangent
    placeholders (its saved inputs), of those the specialised graph no longer reads."""
    graph = copy.deepcopy(bw_module.graph)
    masks = tangent_masks(graph, num_tangents)

    def is_zero(n):
        m = masks.get(n, 0)
        return n.op not in ("placeholder", "output") and m != 0 and not m & ~absent

    for n in list(graph.nodes):
        if not is_zero(n):
            continue
        readers = [u for u in n.users if not is_zero(u)]
        if not readers:
            continue
        val = n.meta.get("val")
        if not _static_tensor(val):
            return None
        with graph.inserting_before(n):
            z = graph.call_function(aten.zeros.default, (list(val.shape),),
                                    {"dtype": val.dtype, "device": val.device})
        # the zeros' own (contiguous) layout: n's strides, which Inductor read the zeros with,
        # may span more memory (fuzz seed 81, program 1501: strides (1, 4) over 4 elements)
        mode = getattr(val, "fake_mode", None)
        with mode if mode is not None else contextlib.nullcontext():
            z.meta["val"] = kiln.zeros(tuple(val.shape), dtype=val.dtype, device=val.device)
        keep = set(readers)
        n.replace_all_uses_with(z, lambda u: u in keep)
    graph.eliminate_dead_code()
    saved = saved_placeholders(graph, num_tangents)
    unread = {j for j, n in enumerate(saved) if not n.users}
    return GraphModule(bw_module, graph), unread


# reading a tensor's sizes is not reading its values (eager saves sizes, not the tensor)


# Note [Inputs eager would have saved]
# Eager saves an op's inputs for its backward and raises if one changes in place before the
# backward runs. A compiled function saves what its partitioner chose: min-cut may save the mask
# `x0 >= x2` that clamp's backward needs rather than x2, and then `x2[:1] = 0` after the call went
# unnoticed (eager raises). The joint graph says what eager would have read: the inputs that a
# backward-only node reads directly. An input the function mutates is read by the backward when
# a backward-only node reads its new value (the graph's leading output for it) or a view of that:
# eager saved the input itself there, so a change after the call raised (`v = x1 @ x0.t()` after
# `x1.pow_(2)`, then `x1[::2].zero_()` past a graph break; fuzz seed 91, program 576), while the
# compiled forward saved a buffer of its own. A formula may also unpack an input its graph never
# reads: div's with a rounding mode is zero but unpacks both operands (as PyTorch's does), so
# `v = x1 // x1` followed, past a graph break, by `x1[..., 0] = 2` raised in eager and not compiled
# (fuzz seed 141, program 1200). The joint trace watches the formulas' unpacks
# (_C._observing_saved_inputs) and records each unpacked input with the tangents its node's
# gradients come from (`saved_reads`). A value sharing an input's memory (a view of it) is the
# input here, and a saved value sharing an input's memory is checked only through this rule
# (`saved_input_aliases`): min-cut saved x to recompute `-x`, which prod saves in eager, and
# `x.mul_(1)` past a graph break raised in a backward eager runs (fuzz seed 181, program 14906).
#
# Note [Outputs eager would have saved]
# The same holds for the function's outputs: eager's MinBackward saves its result, and `v1 =
# v0.min()` returned across a graph break, then `v1.t_()`, raised in eager's backward. The compiled
# forward saved a buffer of its own under min-cut (a mask computed from v1), so nothing noticed the
# change (fuzz seed 181, program 17144; PyTorch's compile loses it too). An output that a
# backward-only node reads, or a value sharing its memory (the intermediate it views), is watched
# like an input: its version after the call, checked when that part of the backward runs.
def inputs_read_by_backward(joint, saved_reads=()):
    """joint: a ``kiln._C._aot.JointGraph``. read(absent) -> the positions, among the joint's
    primals, of those that nodes only the backward needs read directly, in the part of the
    backward that runs when the tangents in the bitmask `absent` are None (as `prune_absent`
    specialises it); position len(primals) + k stands for the joint's k-th output: the new value
    of the k-th mutated input while k is below the number of mutated inputs, then the function's
    outputs (Note [Outputs eager would have saved]).

    `saved_reads`, (primal position, tangent bitmask) pairs, are inputs eager's formulas unpack
    without the graph reading them (div's with a rounding mode): read when one of those tangents
    is present (any, for a mask of 0)."""
    reads, cache = _C._aot.BackwardReads(joint, list(saved_reads)), {}

    def read(absent):
        if absent not in cache:
            cache[absent] = reads.read(absent)
        return cache[absent]

    return read


# Note [Inputs saved only to recompute from]
# Min-cut may save an input only to recompute from it, in the backward, forward values that eager
# saved instead: where(x0 > 0, x0, -1) for max's backward, where eager's MaxBackward saved the
# where's result. Eager never sees a later in-place change to x0, and neither may the compiled
# backward: `x0.fill_(0.5)` past a graph break made it recompute from the new values and the
# gradient came out wrong, silently (fuzz seed 321, program 11679; PyTorch's compile raises its
# version error there, as the saved value's version moved). Such saved values are cloned when the
# forward runs, so the backward recomputes from the values eager's saved ones were made of; a
# change to an input eager itself saved still raises (Note [Inputs eager would have saved]).
def saved_inputs_recomputed_from(fw_module, bw_module, num_tangents, saved_order, aliases):
    """The positions, among the forward's saved values, of those sharing an input's memory
    (`aliases`: saved_input_aliases) from which the backward recomputes forward values (Note
    [Inputs saved only to recompute from])."""
    forward_nodes = {n.name for n in fw_module.graph.nodes if n.op == "call_function"}
    saved = saved_placeholders(bw_module.graph, num_tangents)
    return {saved_order[j] for j, n in enumerate(saved)
            if saved_order[j] in aliases and any(u.op == "call_function" and u.name in forward_nodes for u in n.users)}


def saved_input_aliases(fw_module, num_fwd_outputs):
    """The positions, among the forward's saved values, of those sharing an input's memory (the
    input itself or a view of it). The partitioner may save an input only to recompute from it
    what eager saved instead (prod's `-x` from x), so whether a change to it raises is decided by
    `inputs_read_by_backward` (what eager saved), not by the saved value's own version."""
    graph = fw_module.graph
    inputs = {n.meta["val"]._storage_id() for n in graph.nodes
              if n.op == "placeholder" and isinstance(n.meta.get("val"), kiln.Tensor)}
    outs = graph.output_node().args[0]
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    return {k for k, n in enumerate(outs[num_fwd_outputs:])
            if isinstance(n, kiln.fx.Node) and isinstance(n.meta.get("val"), kiln.Tensor)
            and n.meta["val"]._storage_id() in inputs}
