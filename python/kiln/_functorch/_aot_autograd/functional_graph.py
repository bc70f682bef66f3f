"""The functional graph (AOTAutograd, kiln._functorch.aot_autograd): make_fx of functionalize(f)
with the decomposition table, its copy_ epilogue turned into leading outputs, tensor constants
lifted to inputs, and the inference trace."""

import kiln
from kiln import _C
from kiln._functorch._aot_autograd.output_analysis import (_Traced, _analyze_outputs, _fakes, _layout,
                                                           _restore_layouts, _view_chains)
from kiln.fx.experimental.proxy_tensor import make_fx
from kiln.func import functionalize
from kiln.utils.checkpoint import annotate_region


def _mutations_to_outputs(gm, num_inputs):
    """Turns make_fx(functionalize(f))'s copy_ epilogue (an input mutated) into leading outputs
    and returns the positions of the inputs mutated. The epilogue's in-place view ops on inputs
    (`x.t_()` replayed) are dropped: the runtime replays an input's new layout itself (Note [Input
    metadata mutations] in runtime.py). In C++: aot/joint.h, Note [Input mutations as outputs]."""
    mutated = _C._aot.mutations_to_outputs(gm.graph)
    gm.graph.eliminate_dead_code()
    gm._lazy_recompile()
    return mutated


def _lift_constants(gm, mode, before=None):
    """The tensors a traced program made itself (`x + kiln.tensor([1., 2.])`, recorded by make_fx
    as get_attr constants) become placeholders, inserted before `before` (the first tangent) or
    after the last input. The retrace then sees fake tensors only, and the compiled graphs take
    the real constants as trailing inputs. Returns (their fakes, the real tensors)."""
    graph = gm.graph
    attrs = [n for n in graph.nodes if n.op == "get_attr" and isinstance(getattr(gm, n.target, None), kiln.Tensor)]
    if not attrs:
        return [], []
    anchor = before or next(n for n in graph.nodes if n.op != "placeholder")
    reals, fakes = [], []
    with graph.inserting_before(anchor):
        for node in attrs:
            real = getattr(gm, node.target)
            placeholder = graph.placeholder(f"_lifted{node.target}")
            fake = mode.from_tensor(real, static_shapes=True)
            placeholder.meta.update(node.meta)
            placeholder.meta["val"] = fake
            node.replace_all_uses_with(placeholder)
            graph.erase_node(node)
            reals.append(real)
            fakes.append(fake)
    gm._lazy_recompile()
    return fakes, reals


def _drop_constant_mutations(gm, slots):
    """A program that mutates a tensor it made (`t = kiln.tensor(...); t.add_(1)`) makes it anew on
    every call: its copy_ epilogue must not write the lifted constant back."""
    if not slots:  # no lifted constants (the usual case): nothing to look for among the nodes
        return
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    constants = {placeholders[i] for i in slots}
    dropped = False
    copy_ = kiln.ops.aten.copy_.default
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is copy_ and node.args[0] in constants and not node.users:
            graph.erase_node(node)
            dropped = True
    if dropped:
        graph.eliminate_dead_code()
        gm._lazy_recompile()


def _functional_graph(fn, example_inputs, decompositions, mode, names=None, keep_raw=None):
    """make_fx of fn (fake tensors as inputs), then again through functionalize with the
    decompositions: an aten graph without in-place ops. Tensor constants the program made are
    lifted to inputs after the program's own (primal) inputs; returns (graph, the constants).
    `keep_raw`, a list, gets the first trace's module, which the caller's records of its nodes
    need alive."""
    layouts = [_layout(t) if isinstance(t, kiln.Tensor) else None for t in _flat(example_inputs)]
    # `x.t_()` re-laid the example inputs; given back even when the trace raised, since the joint
    # is traced again after a backward-only error (Note [Backward errors of mutated inputs] in joint.py): a
    # retrace that saw x transposed made x.flatten() a copy, and the index_select that saved it
    # lost eager's version error (fuzz seed 181, program 12912)
    try:
        raw = make_fx(fn, tracing_mode="real", _record_tensor_meta=False)(*example_inputs)
    finally:
        _restore_layouts(mode, _flat(example_inputs), layouts)
    if keep_raw is not None:
        keep_raw.append(raw)
    if names is None:
        fakes, constants = _lift_constants(raw, mode)
        first = len(example_inputs)
        example_inputs = [*example_inputs, *fakes]
    else:
        primals, tangents = example_inputs
        placeholders = [n for n in raw.graph.nodes if n.op == "placeholder"]
        # constants are lifted to primals, before the first tangent (Note [The joint graph's
        # contract], aot/joint.h)
        tangent = placeholders[len(placeholders) - len(tangents)] if tangents else None
        fakes, constants = _lift_constants(raw, mode, before=tangent)
        first = len(primals)
        example_inputs = ([*primals, *fakes], tangents)
    detached = _detached(example_inputs)
    layouts = [_layout(t) if isinstance(t, kiln.Tensor) else None for t in _flat(detached)]
    try:
        gm = make_fx(functionalize(_named(raw, names)), decomposition_table=decompositions,
                     tracing_mode="real")(*detached)
    finally:
        _restore_layouts(mode, _flat(detached), layouts)  # the placeholders' fakes: the epilogue re-laid them
    _drop_constant_mutations(gm, range(first, first + len(constants)))
    return gm, constants


def _flat(values):
    """The example inputs, with the joint's (primals, tangents) lists opened."""
    return [t for v in values for t in (v if isinstance(v, (list, tuple)) else [v])]


def _detached(values):
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.append(type(v)(_detached(v)))
        elif isinstance(v, kiln.Tensor):
            out.append(v.detach())
        else:
            out.append(v)
    return out


def _named(gm, names):
    """gm as a function of (primals, tangents) lists, so make_fx names its inputs primals_1...,
    tangents_1... as PyTorch's joint graphs are named (arg0_1... for inference graphs)."""
    run = _aten_replay(gm) or replay(gm)
    if names is None:
        return lambda *args: run(*args)

    def joint(primals, tangents):
        return run(*primals, *tangents)

    return joint


class _AnnotatingInterpreter(kiln.fx.Interpreter):
    """Runs a graph node by node under an active make_fx; the nodes recorded while running a node
    inherit its source provenance (meta["stack_trace"], kiln.fx.traceback: AOT graphs and Inductor's
    kernels name the user's line) and its activation-checkpointing annotation: meta["recompute"]
    as is, or meta["ac_policy"] (a selective policy) applied to each recorded op."""

    def run_node(self, n):
        from kiln.fx.experimental.proxy_tensor import current_trace_graph

        graph = current_trace_graph()
        # node metadata read and written through its C++ accessors: this runs for every node of
        # every traced graph
        recompute, policy = n._meta_get_or("recompute", None), n._meta_get_or("ac_policy", None)
        stack_trace = n._meta_get_or("stack_trace", None)
        if graph is None or (recompute is None and policy is None and stack_trace is None):
            return super().run_node(n)
        root = graph._root_node()
        last = root.prev  # nodes are recorded at the end: the new ones follow it
        before = set(graph.nodes) if recompute is not None or policy is not None else None
        result = super().run_node(n)
        if stack_trace is not None:
            node = last.next
            while node is not root:
                if not node._meta_has("stack_trace"):
                    node._meta_set("stack_trace", stack_trace)
                node = node.next
        if before is None:
            return result
        if policy is None:
            def policy(ctx, op, *args, **kwargs):
                return recompute
        annotate_region(graph, before, policy)
        return result


def _aten_replay(gm):
    """gm run by the C++ interpreter of aten graphs (Note [Interpreting aten graphs] in
    fx/interpreter.h), which carries each node's stack_trace onto what the trace records; None
    where Python's interpreter is needed: a node annotated for activation checkpointing (its
    policy is Python), or one the C++ interpreter cannot run."""
    graph = gm.graph
    if any(n._meta_has("recompute") or n._meta_has("ac_policy") for n in graph.nodes) or \
            _C._fx._why_not_interpretable(graph):
        return None
    from kiln.fx.experimental.proxy_tensor import current_trace_graph

    return lambda *args: _C._fx._interpret(graph, args, current_trace_graph())


def replay(gm):
    """A callable running gm: its generated code, or the annotating interpreter when some node
    carries source provenance or an activation-checkpointing annotation (so a retrace keeps them)."""
    if any(n._meta_has("stack_trace") or n._meta_has("recompute") or n._meta_has("ac_policy")
           for n in gm.graph.nodes):
        return _AnnotatingInterpreter(gm).run
    return gm.forward


def trace_inference(flat_fn, leaves, config):
    mode, fakes = _fakes(leaves)
    with kiln.no_grad():
        outs, aliases, _, _, layouts, _ = _analyze_outputs(flat_fn, mode, fakes)
        with mode:
            gm, constants = _functional_graph(lambda *a: tuple(flat_fn(*a)), fakes, config.decompositions, mode)
    no_grad = [False] * len(outs)
    if config.keep_inference_input_mutations:  # the copy_ epilogue stays in the graph
        return _Traced(gm, [], len(outs), aliases, no_grad, constants=constants)
    mutated = _mutations_to_outputs(gm, len(leaves))
    traced = _Traced(gm, mutated, len(outs), aliases, no_grad, constants=constants, new_layouts=layouts)
    _view_chains(traced)
    return traced


def _outputs(gm):
    out = gm.graph.output_node().args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]
