"""What tracing learns besides the graph (AOTAutograd, kiln._functorch.aot_autograd): the _Traced
record, outputs that alias an input or another output (_Alias, rebuilt as views at run time),
the fake copies of the inputs and the layouts a program changed (`x.t_()`)."""

import kiln
from kiln import _C
from kiln._subclasses.creation_meta import as_multi_output_view, multi_output_origin
from kiln._subclasses.fake_tensor import FakeTensorMode


class _Traced:
    """What tracing learned: the functional graph and how its outputs map back."""

    def __init__(self, graph, mutated_inputs, num_outputs, output_aliases, out_requires_grad,
                 mutation_differentiable=None, constants=(), new_layouts=None):
        self.graph = graph
        # input index -> (sizes, strides, offset) the program left it with (`x.t_()`)
        self.new_layouts = dict(new_layouts or {})
        self.deferred_errors = {}  # input index -> the error a backward through its mutation raises
        self.deferred_outputs = {}  # output index -> the error a backward through it raises
        self.num_mutations = len(mutated_inputs)   # graph outputs 0..num_mutations-1: new input values
        self.mutated_inputs = mutated_inputs        # their input indices
        # per mutation: copied back with grad (a non-leaf input that requires grad, so the copy_
        # joins its history as eager's in-place op does) or under no_grad
        self.mutation_differentiable = list(mutation_differentiable or [False] * len(mutated_inputs))
        self.num_outputs = num_outputs              # the user's outputs, after the mutations
        self.output_aliases = output_aliases        # per output: an _Alias or None
        self.out_requires_grad = out_requires_grad
        self.constants = list(constants)            # tensors the program made: trailing graph inputs
        # (primal position, tangent bitmask): inputs eager's backward formulas unpack, and the
        # tangents whose presence runs them (Note [Inputs eager would have saved] in backward_reads.py)
        self.saved_reads = []
        # per input gradient: the tangents whose formulas made part of it from no gradient
        # (Note [Gradients made from no gradient] in backward_reads.py)
        self.formula_masks = []
        self.hidden_outputs = 0  # trailing outputs the caller does not see (Note [Pieces of intermediates] in joint.py)
        self.num_tangents = 0  # a joint graph's: its last placeholders (Note [The joint graph's contract], aot/joint.h)

    def joint_graph(self):
        """The traced joint graph with its contract, a ``kiln._C._aot.JointGraph``."""
        placeholders = sum(n.op == "placeholder" for n in self.graph.graph.nodes)
        return _C._aot.JointGraph(self.graph.graph, placeholders - self.num_tangents, self.num_tangents,
                                  self.num_mutations + self.num_outputs, list(self.mutated_inputs),
                                  [None if a is None else a.found for a in self.output_aliases])

    def joint_inputs(self):
        """(primals, tangents): the joint graph's example inputs, as PyTorch hands them to a
        partition_fn."""
        vals = [n.meta.get("val") for n in self.graph.graph.nodes if n.op == "placeholder"]
        split = len(vals) - self.num_tangents
        return vals[:split], vals[split:]


class _Alias:
    """An output that views an input or another output (a ``kiln._C._aot.OutputAlias``: Note
    [Output aliases] in aot/output_aliases.h), rebuilt at run time as that view, with the sizes,
    strides and offset the traced (fake) output had, so a compiled function returns views exactly
    where eager does (`x[0].mul_(2)`, `(y, y.t())`)."""

    __slots__ = ("found", "chain", "origin")

    def __init__(self, found, view):
        self.found = found
        self.chain = None  # an input's view ops, replayed so autograd sees them (_view_chains)
        # a split piece stays one (Note [Multi-output views of stand-ins]): `x.t_()` then
        # `x.split(1, -1)[-1]` returned, rebuilt by as_strided, took `v[:1] = 0` that eager refuses
        # (fuzz seed 421, program 52)
        self.origin = multi_output_origin(view) if view.requires_grad else None

    @property
    def index(self):
        """The input's index, or the output's it views."""
        return self.found.index

    @property
    def base_layout(self):
        """An output's base: its traced StridedLayout; None for an input's view."""
        return self.found.base_layout

    def rebuild(self, leaves, outs):
        view = self._rebuild(leaves, outs)
        if view is not None and self.origin is not None and view.requires_grad and _C.is_grad_enabled() and \
                multi_output_origin(view) is None:
            view = as_multi_output_view(view, self.origin)
        return view

    def _rebuild(self, leaves, outs):
        view = self.found.view
        size, stride, offset = view.size, view.stride, view.offset
        if self.base_layout is None:
            if self.chain is not None:
                # the traced shape too: where a dim has size 1, strides alone do not tell (6, 1) from (1, 6)
                view = _replay(leaves[self.index], self.chain)
                if tuple(view.shape) == size and tuple(view.stride()) == stride and \
                        view.storage_offset() == offset and _aliases(view, leaves[self.index]):
                    return view
            return leaves[self.index].as_strided(size, stride, offset)
        base = outs[self.index]
        base_size, base_stride, base_offset = self.base_layout.size, self.base_layout.stride, self.base_layout.offset
        # (a dim of size 1 has no stride to keep: Inductor's contiguous one is as good)
        same_layout = tuple(base.shape) == base_size and _same_strides(base, base_size, base_stride)
        if self.chain is not None and (same_layout or _logical(self.chain)):
            # view ops that pick elements by index (not as_strided) view the compiled output
            # whatever its layout: `v3[0]` of a scatter whose result Inductor laid out
            # contiguously, where eager's kept its input's transposed strides (fuzz seed 111,
            # program 1439: returned as a separate tensor)
            try:
                view = _replay(base, self.chain)
            except RuntimeError:  # `view` of a layout it cannot view
                view = None
            if view is not None and tuple(view.shape) == size and _aliases(view, base):
                return view
        if not same_layout:
            return None  # the compiled output has another layout: keep the separate result
        return base.as_strided(size, stride, base.storage_offset() + offset - base_offset)


def _replay(base, chain):
    for op, args, kwargs in chain:
        base = op(base, *args, **kwargs)
    return base


def _aliases(view, base):
    """Whether a replayed chain gave a view (a maybe-view op such as reshape may have copied)."""
    return view._storage_id() == base._storage_id()


def _same_strides(view, size, stride):
    return all(n == 1 or a == b for n, a, b in zip(size, view.stride(), stride))


def _logical(chain):
    """Every op of a view chain picks elements by index, so it means the same on any layout
    (`view` too, where the layout allows it: else it raises)."""
    return all(op is not kiln.ops.aten.as_strided.default for op, _, _ in chain)


class _Piece:
    """One output of a multi-output view op, as a view op of its own: _Piece(split, 2)(x, 1)."""

    def __init__(self, op, index):
        self.op, self.index = op, index

    def __call__(self, t, *args, **kwargs):
        return self.op(t, *args, **kwargs)[self.index]


def _walk_views(node, target=None):
    """From an output's node back through the view ops that made it, to `target` or as far as
    view ops go (kiln._C._aot.walk_views: Note [Replaying output views] in aot/output_aliases.h):
    (the node reached, the view ops from it to the output, in order, as (op, args, kwargs) to
    replay; a piece of split/chunk is replayed as that op and the item, so the output is one of
    its multi-output views as in eager, which refuse in-place changes under autograd)."""
    if not isinstance(node, kiln.fx.Node):
        return node, []
    chain = _C._aot.walk_views(node, target if isinstance(target, kiln.fx.Node) else None)
    steps = []
    for step in chain.steps:
        n = step.node
        steps.append((n.target if step.piece < 0 else _Piece(n.target, step.piece), n.args[1:], dict(n.kwargs)))
    return chain.reached, steps


def _view_chains(traced):
    """Note [Replaying output views]: an output that views an unmutated input is rebuilt by the
    graph's own view ops (select, slice, permute, ...) applied to the real input, found by
    walking from the graph output back to the input's placeholder through view-tagged ops. An
    as_strided view says the same thing about memory but not to autograd: its backward scatters
    into the input's storage, which double-counts an expanded input (three rows of one row got
    three times the gradient). Without such a chain (the input was re-laid by `t_()`, or the
    output came from a scatter) the as_strided view stays. An output that views another output,
    or a mutated input, is replayed from that output's result or that input's new value."""
    graph = traced.graph.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    results = graph.output_node().args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    for k, alias in enumerate(traced.output_aliases):
        if alias is None or alias.base_layout is None and alias.index in traced.new_layouts:
            continue
        # an output that views another output is replayed from it the same way (`v0.chunk(2)[0]`
        # returned with v0 is a split piece of it, which eager refuses to change in place); one
        # that views a mutated input, from the input's new value (the graph's leading output for
        # it), which the runtime copies back before rebuilding the views
        if alias.base_layout is not None:
            target = results[traced.num_mutations + alias.index]
        elif alias.index in traced.mutated_inputs:
            target = results[traced.mutated_inputs.index(alias.index)]
        else:
            target = placeholders[alias.index]
        node, chain = _walk_views(results[traced.num_mutations + k], target)
        if node is target:
            alias.chain = chain


def _extent(t):
    """The storage elements a tensor's view can touch: [first, last]."""
    if t.numel() == 0:
        return None
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if n > 0)
    return t.storage_offset(), last


def _fakes(leaves):
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    fakes = [mode.from_tensor(x, static_shapes=True) if isinstance(x, kiln.Tensor) else x for x in leaves]
    return mode, fakes


def _layout(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def _restore_layouts(mode, fakes, layouts):
    """Gives fakes a traced program re-laid (`x.t_()`) their `layouts` back; returns the layouts
    it had left them with, by input index."""
    changed = {}
    for i, (f, before) in enumerate(zip(fakes, layouts)):
        if before is not None and _layout(f) != before:
            changed[i] = _layout(f)
            with mode, kiln.no_grad():
                f.as_strided_(*before)
    return changed


def _analyze_outputs(flat_fn, mode, fakes):
    """Output metadata from one fake run: which outputs require grad, which view an input or
    another output (an _Alias each), which inputs the program mutated (version counters), and
    the new layout of each input whose metadata it changed (Note [Input metadata mutations] in runtime.py); the
    fakes get their layouts back for the traces that follow."""
    versions = [f._version if isinstance(f, kiln.Tensor) else None for f in fakes]
    layouts = [_layout(f) if isinstance(f, kiln.Tensor) else None for f in fakes]
    with mode:
        outs = flat_fn(*fakes)
    mutated = [i for i, (f, v) in enumerate(zip(fakes, versions)) if v is not None and f._version != v]
    # an input that did not require grad does after a write from one that does (x0.copy_(x2))
    differentiable_after = {i for i in mutated if fakes[i].requires_grad}
    # Note [Output aliases] (aot/output_aliases.h): which outputs view an input or another output
    found = _C._aot.find_output_aliases(fakes, outs)
    aliases = [None if f is None else _Alias(f, o) for f, o in zip(found, outs)]
    requires = [isinstance(o, kiln.Tensor) and o.requires_grad for o in outs]
    # only now: an output may be a relaid input itself (`x1.t_(); return x1.contiguous()`), whose
    # alias must keep the program's layout, not the restored one (fuzz seed 331, program 5452)
    new_layouts = _restore_layouts(mode, fakes, layouts)
    return outs, aliases, requires, mutated, new_layouts, differentiable_after
