"""The joint forward-backward graph (AOTAutograd, kiln._functorch.aot_autograd): fn and
kiln.autograd.grad of its outputs traced as one functional graph, with what eager's backward
formulas would have read (Note [Inputs eager would have saved] in backward_reads.py) and errors eager raises only in
backward deferred to it."""

import contextlib

import kiln
from kiln import _C
from kiln._functorch._aot_autograd.functional_graph import _functional_graph, _mutations_to_outputs, _outputs
from kiln._functorch._aot_autograd.input_aliasing import _overlaps_itself
from kiln._functorch._aot_autograd.output_analysis import (_Piece, _Traced, _analyze_outputs, _fakes, _view_chains,
                                                           _walk_views)
from kiln._functorch.backward_reads import formula_masks, tangent_masks
from kiln.fx.experimental.proxy_tensor import current_trace_node


def _clone_keeping_layout(t):
    """A copy of t with t's strides, so the program sees the layout it was given: a contiguous
    clone of a strided input made `x.contiguous()` return the input itself, and the program's
    later `x.relu_()` then changed that result too (fuzz seed 71, program 2602). An input that
    repeats elements (expanded) cannot be copied into its own layout and is cloned contiguous."""
    if _overlaps_itself(t):
        return t.clone()
    out = kiln.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(t)


def trace_joint(flat_fn, leaves, config):
    """The joint graph, with the bases of split pieces among the outputs as hidden outputs
    (Note [Pieces of intermediates])."""
    traced = _trace_joint(flat_fn, leaves, config)
    pieces = _pieces_of_intermediates(traced)
    if not pieces:
        return traced
    hidden = []

    def with_bases(*args):
        outs = list(flat_fn(*args))
        bases = []
        for k in pieces:
            base = outs[k]._base
            if base is not None and all(base is not b for b in bases):
                bases.append(base)
        hidden[:] = [len(bases)]
        return (*outs, *bases)

    traced = _trace_joint(with_bases, leaves, config)
    traced.hidden_outputs = hidden[0]
    return traced


# Note [Pieces of intermediates]
# `p = x.log().chunk(2)[0]; p.sub_(1)` raises in eager: p is one of several views split returned,
# which autograd refuses to change in place. Returned by a compiled graph (a graph break before
# the sub_), p was a tensor of its own and the sub_ went through. Such an output, a piece (or a
# view of one) of a value the graph computed without returning it, makes the graph return that
# value too, as a hidden last output; the piece is then rebuilt from it by replaying the split
# (_Alias, Note [Replaying output views] in output_analysis.py), a multi-output view as in eager. PyTorch's AOT hides
# the aliasing instead (its Dynamo raises while tracing, before any graph break). Only
# differentiable pieces: without autograd an in-place change of a piece is allowed.


def _pieces_of_intermediates(traced):
    """The outputs (positions) that are differentiable split/chunk pieces, or views of one, of a
    value the graph computed but does not return."""
    results = _outputs(traced.graph)
    found = []
    for k, alias in enumerate(traced.output_aliases):
        # an output whose backward raises (deferred: an input it needs changed later) is still
        # differentiable to eager: its piece-ness refuses an in-place change before any backward
        # (fuzz seed 241, program 5573)
        if alias is not None or not (traced.out_requires_grad[k] or k in traced.deferred_outputs):
            continue
        node, chain = _walk_views(results[traced.num_mutations + k])
        if node.op == "call_function" and any(isinstance(op, _Piece) for op, _, _ in chain):
            found.append(k)
    return found


def _trace_joint(flat_fn, leaves, config):
    """The joint graph. An input that requires grad and is mutated (Note [Mutated inputs that
    require grad]) is traced through a clone, whose final value becomes an extra output."""
    # the analysis runs on fakes of its own: its in-place ops leave autograd history on the fakes
    # it mutates (a CopySlices on a non-leaf input's base), which the joint's gradients then went
    # through a second time (`x1.add_(x0)` gave x0 twice its gradient)
    outs, aliases, requires, mutated, layouts, differentiable_after = _analyze_outputs(flat_fn, *_fakes(leaves))
    mode, fakes = _fakes(leaves)
    diff_inputs = [i for i, f in enumerate(fakes) if isinstance(f, kiln.Tensor) and f.requires_grad]
    # inputs that require grad, and those that do once the program wrote a value that does into
    # them (x0.copy_(x2)): their new value is differentiable, its copy-back joins their history
    mutated_diff = [i for i in mutated if i in diff_inputs or i in differentiable_after]
    # a leaf that requires grad can only have been mutated under no_grad (else the fake run
    # raised, as eager does)
    copies_with_grad = [not (leaves[i].is_leaf and leaves[i].requires_grad) and i in differentiable_after
                        for i in mutated_diff]

    unpacked = []  # (primal position, the raw graph's nodes of the unpacking node's gradients)
    unpacked_outputs = []  # (output number, those nodes): results a formula unpacks
    # The raw graph those nodes belong to, alive until saved_reads() has read them: a node's graph
    # is None once its graph is freed, which happened or not as the garbage collector ran, so an
    # input amax's backward unpacks counted as read (mask 0) in a backward without amax's tangent,
    # and a later change to it raised where eager trains on (fuzz seed 41, program 1029, in the
    # stored regressions' run only).
    raw_graphs = []
    made = []  # (the raw graph's node of a gradient a formula returned, those of the ones it was given)

    def record_formula(grad_inputs, grad_outputs):
        sources = [n for n in (current_trace_node(g) for g in grad_outputs if g is not None) if n is not None]
        for g in grad_inputs:
            n = current_trace_node(g) if isinstance(g, kiln.Tensor) else None
            if n is not None:
                made.append((n, sources))

    def joint(primals, tangents):
        args = list(primals)
        for i in mutated_diff:  # primals[i] stays the value autograd differentiates against
            args[i] = _clone_keeping_layout(primals[i])
        outs = flat_fn(*args)
        new_values = [args[i] for i in mutated_diff]
        diff_outs = [o for o, r in zip(outs, requires) if r]
        diff_outs += [v for v, d in zip(new_values, copies_with_grad) if d]
        # an input a formula unpacks (or a view of it) counts as read even when the formula's
        # graph does not use it (div with a rounding mode): eager's check raises there too
        storages = {p._storage_id(): i for i, p in enumerate(primals)
                    if isinstance(p, kiln.Tensor) and i not in mutated_diff}
        # an output a formula unpacks (prod's result, Note [Outputs eager would have saved] in backward_reads.py) is
        # read too: `v = x.prod()` returned across a graph break, then `v.masked_fill_(...)`,
        # raised in eager's backward and not compiled, where x is 0-d and the graph reads no v
        # (fuzz seed 261, program 1499)
        out_storages = {}
        for k, o in enumerate(outs):
            if isinstance(o, kiln.Tensor) and o._storage_id() not in storages:
                out_storages.setdefault(o._storage_id(), k)

        def observe(saved, grads):
            nodes = [current_trace_node(g) for g in grads if g is not None]
            nodes = [n for n in nodes if n is not None]
            i = storages.get(saved._storage_id())
            if i is not None:
                unpacked.append((i, nodes))
            elif saved._storage_id() in out_storages:
                unpacked_outputs.append((out_storages[saved._storage_id()], nodes))

        with _observing_saved_inputs(observe), _observing_formulas(diff_outs, record_formula):
            try:
                grads = kiln.autograd.grad(diff_outs, [primals[i] for i in diff_inputs], grad_outputs=list(tangents),
                                           allow_unused=True) if diff_outs else [None] * len(diff_inputs)
            except (RuntimeError, NotImplementedError) as e:
                e._kiln_raised_in_backward = True  # _backward_only_error
                raise
        by_input = dict(zip(diff_inputs, grads))
        return (*new_values, *outs, *[by_input.get(i) for i in range(len(primals))])

    def trace():
        unpacked.clear()
        unpacked_outputs.clear()
        made.clear()
        raw_graphs.clear()
        with mode:
            tangents = [kiln.empty(tuple(o.shape), dtype=o.dtype, device=o.device) for o, r in zip(outs, requires) if r]
            # a mutated input's new value has the shape the program left it with (`x.t_()`)
            tangents += [kiln.empty(layouts[i][0], dtype=fakes[i].dtype, device=fakes[i].device) if i in layouts
                         else kiln.empty_like(fakes[i], memory_format=kiln.contiguous_format)
                         for i, d in zip(mutated_diff, copies_with_grad) if d]
            gm, constants = _functional_graph(joint, ([*fakes], tangents), config.decompositions, mode, names=True,
                                              keep_raw=raw_graphs)
        return gm, constants, tangents

    def saved_reads():
        masks = {}
        # an output's position among the graph's: after its primals (constants included) and the
        # new values of mutated inputs (inputs_read_by_backward)
        first_output = sum(n.op == "placeholder" for n in gm.graph.nodes) - len(tangents) + \
            len(mutated) + len(mutated_diff)
        # a node dead code elimination erased after the trace (its graph is None) says nothing
        # about the tangents: it is left out, as a gradient the tracer had no node for
        unpacked_live = [(i, [n for n in nodes if n.graph is not None])
                         for i, nodes in unpacked + [(first_output + k, ns) for k, ns in unpacked_outputs]]
        for _, nodes in unpacked_live:
            for n in nodes:
                if n not in masks:
                    masks.update(tangent_masks(n.graph, len(tangents)))
        return sorted({(i, _or(masks.get(n, 0) for n in nodes)) for i, nodes in unpacked_live})

    deferred, deferred_outputs = {}, {}  # Note [Backward errors of mutated inputs]
    try:
        gm, constants, tangents = trace()
    except (RuntimeError, NotImplementedError) as e:
        if not _backward_only_error(e):
            raise
        # which differentiated values raise on their own: each is traced alone
        candidates = [(copies_with_grad, k) for k, d in enumerate(copies_with_grad) if d] + \
                     [(requires, k) for k, r in enumerate(requires) if r]
        kept = [list(copies_with_grad), list(requires)]
        failing = {}
        for flags, k in candidates:
            copies_with_grad[:] = [False] * len(copies_with_grad)
            requires[:] = [False] * len(requires)
            flags[k] = True
            try:
                trace()
            except (RuntimeError, NotImplementedError) as alone:
                if not _backward_only_error(alone):
                    raise
                failing[(flags is requires, k)] = str(alone)
        copies_with_grad[:], requires[:] = kept
        for (is_output, k), message in failing.items():
            if is_output:
                requires[k] = False
                deferred_outputs[k] = message
            else:
                copies_with_grad[k] = False
                deferred[mutated_diff[k]] = message
        gm, constants, tangents = trace()  # raises again if only a combination failed
    mutated = _mutations_to_outputs(gm, len(leaves) + len(constants) + len(tangents))
    traced = _Traced(gm, mutated + mutated_diff, len(outs), aliases, requires,
                     [False] * len(mutated) + copies_with_grad, constants, layouts)
    traced.deferred_errors, traced.deferred_outputs = deferred, deferred_outputs
    traced.num_tangents = len(tangents)
    traced.saved_reads = saved_reads()
    traced.formula_masks = formula_masks(made, len(leaves), len(tangents))
    raw_graphs.clear()
    _view_chains(traced)
    return traced


@contextlib.contextmanager
def _observing_saved_inputs(observe):
    """observe(saved, grads) is called with each saved input a backward formula unpacks (and the
    gradients of its node's outputs) while the block runs, on this thread."""
    previous = _C._set_saved_input_observer(observe)
    try:
        yield
    finally:
        _C._set_saved_input_observer(previous)


@contextlib.contextmanager
def _observing_formulas(roots, observe):
    """observe(grad_inputs, grad_outputs) after each formula of the autograd graph behind
    `roots` runs while the block runs (a post hook on every node)."""
    handles, seen = [], set()
    stack = [r.grad_fn for r in roots if isinstance(r, kiln.Tensor) and r.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            handles.append(node.register_hook(observe))
            stack.extend(fn for fn, _ in node.next_functions if fn is not None)
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _or(masks):
    out = 0
    for m in masks:
        out |= m
    return out


# Note [Backward errors of mutated inputs]
# `v = x.clamp_max(1); x.copy_(v)` on an input that requires grad: clamp_max saved x, which the
# copy_ overwrote, so differentiating x's new value raises, in eager too, but only if a backward
# reaches it. The joint graph differentiates every output at once, so its trace raised for
# programs whose loss never reads x. Such a mutation is traced without its gradient, and its
# copy-back joins x's history through a node that raises eager's error if a gradient does reach
# it (_RaiseInBackward), so the program runs as it does eagerly. The same holds for an op with
# no derivative (floor_divide's backward raises in eager too). An output whose own gradient
# raises (`x1 * 1` after that copy_) is returned through such a node too. Each differentiated
# value is traced alone to find which raise.


def _backward_only_error(e):
    """An error eager raises only when a backward runs through the op: anything a derivative
    formula raised (atan2's of a bool operand negates it: `-` on a bool tensor raises, and only
    where the loss reaches atan2, fuzz seed 971, program 3698), an input it saved was overwritten,
    the op has no derivative (floor_divide), or it wrote through an expanded view (its gradient
    would be written into memory that repeats elements)."""
    text = str(e)
    return isinstance(e, (RuntimeError, NotImplementedError)) and (
        getattr(e, "_kiln_raised_in_backward", False)
        or "modified by an inplace operation" in text or ("derivative for" in text and "not implemented" in text)
        or "more than one element of the written-to tensor refers to a single memory location" in text)


class _RaiseInBackward(kiln.autograd.Function):
    """value, as an output of a node that raises `message` in backward; `anchors`, the inputs
    whose history the gradient would have reached, make it require grad."""

    @staticmethod
    def forward(ctx, value, message, *anchors):
        ctx.message = message
        # a view made below autograd, as the compiled op's own output: not one made under the
        # Function's no_grad, which an in-place op of the program may not change (Note [View
        # creation] in tensor/empty.cc; fuzz seed 341, program 5292: `v1.masked_fill_` refused)
        return _C._inductor.reinterpret_tensor(value, tuple(value.shape), value.stride(), value.storage_offset())

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(ctx.message)
