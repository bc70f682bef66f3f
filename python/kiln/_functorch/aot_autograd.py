"""kiln._functorch.aot_autograd: AOTAutograd, as PyTorch's functorch has it.

    compiled = aot_function(fn, fw_compiler, bw_compiler, partition_fn=default_partition)

On the first call with inputs of a given layout, `fn` is traced ahead of time into aten graphs:

1. the joint: fn on fake copies of the inputs, then kiln.autograd.grad of its differentiable
   outputs against the inputs that require grad, with one `tangents_i` input per such output,
   recorded by make_fx (the Tracing key sees the forward ops and every backward op);
2. that graph traced again through kiln.func.functionalize, with the decomposition table: no
   in-place op and no mutation remains; an input the program mutated (batch norm's running
   statistics, a user's `x.add_(1)`) ends in a copy_ epilogue, which becomes an extra output;
3. partition_fn cuts the joint into a forward graph (primals -> outputs + saved values) and a
   backward graph (saved values + tangents -> input gradients); the compilers compile each.

At run time a kiln.autograd.Function runs the compiled forward, keeps the saved values, and
runs the compiled backward on .backward(); the wrapper copies mutated inputs back and rebuilds
outputs that alias an input as views of it. Without grad (no input requires it, or grad mode
off) one functional graph goes to the inference compiler. Compiled code is cached per input
layout (sizes, strides, dtype, requires_grad) and grad mode.
"""

import functools
import time

import kiln
from kiln import _C
from kiln._dynamo import logs
from kiln._subclasses.fake_tensor import FakeTensorMode
from kiln.fx.experimental.proxy_tensor import make_fx
from kiln.func import _flatten, _unflatten, functionalize
from kiln.utils.checkpoint import annotate_region

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "AOTConfig"]


class AOTConfig:
    def __init__(self, fw_compiler, bw_compiler, inference_compiler, partition_fn, decompositions,
                 num_params_buffers=0, keep_inference_input_mutations=False):
        self.fw_compiler, self.bw_compiler, self.inference_compiler = fw_compiler, bw_compiler, inference_compiler
        self.partition_fn, self.decompositions = partition_fn, dict(decompositions or {})
        self.num_params_buffers = num_params_buffers
        self.keep_inference_input_mutations = keep_inference_input_mutations


def _call_compiled(fn, args):
    """The boxed convention (make_boxed_func): a list the callee may clear; else positional."""
    if getattr(fn, "_boxed_call", False):
        return fn(list(args))
    return fn(*args)


def _layout_key(leaves):
    key = _C._aot_layout_key(leaves)  # C++: runs on every call of a compiled function
    if key is not None:
        return key
    key = [_C.is_grad_enabled()]  # symbolic sizes (a compiled function called inside a trace)
    for x in leaves:
        if isinstance(x, kiln.Tensor):
            key.append((tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype, x.device, x.requires_grad))
        else:
            key.append((type(x), x))
    return tuple(key)


# --- tracing ---------------------------------------------------------------------------------------
class _Traced:
    """What tracing learned: the functional graph and how its outputs map back."""

    def __init__(self, graph, num_mutations, mutated_inputs, num_outputs, output_aliases, out_requires_grad):
        self.graph = graph
        self.num_mutations = num_mutations          # graph outputs 0..num_mutations-1: new input values
        self.mutated_inputs = mutated_inputs        # their input indices
        self.num_outputs = num_outputs              # the user's outputs, after the mutations
        self.output_aliases = output_aliases        # output index -> input index it views (or None)
        self.out_requires_grad = out_requires_grad


def _fakes(leaves):
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    fakes = [mode.from_tensor(x, static_shapes=True) if isinstance(x, kiln.Tensor) else x for x in leaves]
    return mode, fakes


def _analyze_outputs(flat_fn, mode, fakes):
    """Output metadata from one fake run: which outputs require grad, which alias an input."""
    with mode:
        outs = flat_fn(*fakes)
    input_storages = {}
    for i, f in enumerate(fakes):
        if isinstance(f, kiln.Tensor):
            input_storages.setdefault(f._storage_id(), i)
    aliases = [input_storages.get(o._storage_id()) if isinstance(o, kiln.Tensor) else None for o in outs]
    requires = [isinstance(o, kiln.Tensor) and o.requires_grad for o in outs]
    return outs, aliases, requires


def _mutations_to_outputs(gm, num_inputs):
    """Turns make_fx(functionalize(f))'s copy_ epilogue (an input mutated) into leading outputs."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    mutated, values = [], []
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is kiln.ops.aten.copy_.default and \
                node.args[0] in placeholders and not node.users:
            mutated.append(placeholders.index(node.args[0]))
            values.append(node.args[1])
            graph.erase_node(node)
    out = graph.output_node()
    results = out.args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    out.args = (tuple(values + results),)
    graph.eliminate_dead_code()
    gm.recompile()
    return mutated


def _functional_graph(fn, example_inputs, decompositions, names=None):
    """make_fx of fn (fake tensors as inputs), then again through functionalize with the
    decompositions: an aten graph without in-place ops."""
    raw = make_fx(fn, tracing_mode="real")(*example_inputs)
    return make_fx(functionalize(_named(raw, names)), decomposition_table=decompositions,
                   tracing_mode="real")(*_detached(example_inputs))


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
    run = replay(gm)
    if names is None:
        return lambda *args: run(*args)

    def joint(primals, tangents):
        return run(*primals, *tangents)

    return joint


class _AnnotatingInterpreter(kiln.fx.Interpreter):
    """Runs a graph node by node under an active make_fx; the nodes recorded while running an
    annotated node inherit its activation-checkpointing annotation: meta["recompute"] as is, or
    meta["ac_policy"] (a selective policy) applied to each recorded op."""

    def run_node(self, n):
        from kiln.fx.experimental.proxy_tensor import current_trace_graph

        graph = current_trace_graph()
        recompute, policy = n.meta.get("recompute"), n.meta.get("ac_policy")
        if graph is None or (recompute is None and policy is None):
            return super().run_node(n)
        before = set(graph.nodes)
        result = super().run_node(n)
        if policy is None:
            def policy(ctx, op, *args, **kwargs):
                return recompute
        annotate_region(graph, before, policy)
        return result


def replay(gm):
    """A callable running gm: its generated code, or the annotating interpreter when some node
    carries an activation-checkpointing annotation (so a retrace keeps them)."""
    if any("recompute" in n.meta or "ac_policy" in n.meta for n in gm.graph.nodes):
        return _AnnotatingInterpreter(gm).run
    return gm.forward


def trace_inference(flat_fn, leaves, config):
    mode, fakes = _fakes(leaves)
    with kiln.no_grad():
        outs, aliases, _ = _analyze_outputs(flat_fn, mode, fakes)
        with mode:
            gm = _functional_graph(lambda *a: tuple(flat_fn(*a)), fakes, config.decompositions)
    if config.keep_inference_input_mutations:  # the copy_ epilogue stays in the graph
        return _Traced(gm, 0, [], len(outs), aliases, [False] * len(outs))
    mutated = _mutations_to_outputs(gm, len(leaves))
    return _Traced(gm, len(mutated), mutated, len(outs), aliases, [False] * len(outs))


def trace_joint(flat_fn, leaves, config):
    mode, fakes = _fakes(leaves)
    outs, aliases, requires = _analyze_outputs(flat_fn, mode, fakes)
    diff_inputs = [i for i, f in enumerate(fakes) if isinstance(f, kiln.Tensor) and f.requires_grad]

    def joint(primals, tangents):
        outs = flat_fn(*primals)
        diff_outs = [o for o, r in zip(outs, requires) if r]
        grads = kiln.autograd.grad(diff_outs, [primals[i] for i in diff_inputs], grad_outputs=list(tangents),
                                   allow_unused=True) if diff_outs else [None] * len(diff_inputs)
        by_input = dict(zip(diff_inputs, grads))
        return (*outs, *[by_input.get(i) for i in range(len(primals))])

    with mode:
        tangents = [kiln.empty_like(o, memory_format=kiln.contiguous_format) for o, r in zip(outs, requires) if r]
        gm = _functional_graph(joint, ([*fakes], tangents), config.decompositions, names=True)
    mutated = _mutations_to_outputs(gm, len(leaves) + len(tangents))
    for i in mutated:
        if fakes[i].requires_grad:
            raise NotImplementedError(
                f"aot_function: input {i} requires grad and is mutated in place by the compiled function; "
                "mutate a tensor that does not require grad, or copy it first")
    return _Traced(gm, len(mutated), mutated, len(outs), aliases, requires)


# --- run time ------------------------------------------------------------------------------------
def _restore_outputs(traced, leaves, results):
    """Copies mutated inputs back and rebuilds outputs that view an input as views of it."""
    new_values, outs = results[:traced.num_mutations], list(results[traced.num_mutations:])
    if new_values:
        with kiln.no_grad():
            for i, value in zip(traced.mutated_inputs, new_values):
                leaves[i].copy_(value)
    for k, source in enumerate(traced.output_aliases):
        if source is not None and isinstance(outs[k], kiln.Tensor):
            o = outs[k]
            outs[k] = leaves[source].as_strided(o.shape, o.stride(), o.storage_offset())
    return outs


def _needs_restore(traced):
    return traced.num_mutations > 0 or any(a is not None for a in traced.output_aliases)


class _InferenceRuntime:
    def __init__(self, traced, compiled):
        self.traced, self.compiled = traced, compiled
        self.boxed = getattr(compiled, "_boxed_call", False)
        self.restore = _needs_restore(traced)

    def __call__(self, leaves):
        results = self.compiled(list(leaves)) if self.boxed else self.compiled(*leaves)
        if not self.restore:
            return list(results)
        return _restore_outputs(self.traced, leaves, list(results))


class _SavedContext:
    """The backward node's context (what kiln.autograd.Function's ctx is to its node): the
    forward's saved values, with the versions their tensors had, and the compiled backward."""

    __slots__ = ("saved", "versions", "backward", "inputs", "_node")

    def _do_backward(self, *grads):
        if self.saved is None:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.")
        for t, v in zip(self.saved, self.versions):
            if v is not None and t._version != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t.dtype} {list(t.shape)}] is at version {t._version}; expected version {v} "
                    "instead. (It was saved by a compiled function's forward for its backward.)")
        if not _C.is_grad_enabled():
            return self.backward(self.saved, grads)
        # create_graph: the compiled backward records nothing, so its gradients get a node whose
        # own backward refuses (as PyTorch's compiled functions do), not a silently missing history
        with kiln.no_grad():
            result = self.backward(self.saved, grads)
        tensors = [r for r in result if isinstance(r, kiln.Tensor)]
        marked = iter(_NoDoubleBackward.apply(len(tensors), *tensors, *self.inputs, *grads)) if tensors else iter(())
        return tuple(next(marked) if isinstance(r, kiln.Tensor) else r for r in result)

    def _free_saved(self):
        self.saved = self.inputs = None


class _NoDoubleBackward(kiln.autograd.Function):
    """Gradients of a compiled backward under create_graph: they pass through; differentiating
    them again raises."""

    @staticmethod
    def forward(ctx, count, *args):  # args: the gradients, then what they depend on (for the edges)
        return tuple(t.clone() for t in args[:count])

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("kiln.compile with aot_autograd does not currently support double backward")


def _training_runtime(traced, compiled_fw, compiled_bw, saved_order, num_inputs):
    """run(leaves): the compiled forward without grad, then one backward node (the C++ node a
    kiln.autograd.Function records) whose backward runs the compiled backward. This is
    Function.apply specialised to what AOT knows ahead of time, for a lean per-call path."""
    n_mut, n_out = traced.num_mutations, traced.num_outputs
    n_fw = n_mut + n_out
    requires = traced.out_requires_grad
    fw_boxed = getattr(compiled_fw, "_boxed_call", False)
    bw_boxed = getattr(compiled_bw, "_boxed_call", False)
    restore = _needs_restore(traced)
    # mutated inputs' new values and outputs that need no grad are not differentiable
    differentiable_out = [False] * n_mut + list(requires)

    def backward(saved, grads):
        saved = [saved[i] for i in saved_order]
        tangents = [g.contiguous() if isinstance(g, kiln.Tensor) else g for g, r in zip(grads[n_mut:], requires) if r]
        result = compiled_bw(saved + tangents) if bw_boxed else compiled_bw(*saved, *tangents)
        return tuple(result)[:num_inputs]

    def run(leaves):
        grad_enabled = _C.is_grad_enabled()
        _C._set_grad_enabled(False)
        try:
            results = compiled_fw(list(leaves)) if fw_boxed else compiled_fw(*leaves)
        finally:
            _C._set_grad_enabled(grad_enabled)
        outs = list(results[:n_fw])
        saved = list(results[n_fw:])
        if grad_enabled:
            input_ids = {id(x) for x in leaves}
            tensor_outs, differentiable = [], []
            for k, o in enumerate(outs):
                if isinstance(o, kiln.Tensor):
                    if id(o) in input_ids:  # an input returned as is: a fresh alias keeps its history
                        o = outs[k] = o.view_as(o) if not o.requires_grad else o.detach()
                    tensor_outs.append(o)
                    differentiable.append(differentiable_out[k])
            ctx = _SavedContext()
            ctx.backward = backward
            ctx.inputs = [x for x in leaves if x.requires_grad]  # a create_graph backward's dependencies
            _C._record_function(ctx, "CompiledFunctionBackward", list(leaves), tensor_outs, differentiable)
            # A saved output would hold its grad_fn, which holds ctx: a cycle through C++ that the
            # GC cannot see. Keep a detached alias (same storage and version counter) instead.
            out_ids = {id(o) for o in tensor_outs if o.requires_grad}
            if out_ids:
                saved = [s.detach() if id(s) in out_ids else s for s in saved]
            ctx.saved = saved
            ctx.versions = [s._version if isinstance(s, kiln.Tensor) else None for s in saved]
        if not restore:
            return outs
        return _restore_outputs(traced, leaves, outs)

    return run


def _log_graph(title, gm):
    if logs.enabled("aot_graphs"):
        logs.log("aot_graphs", f"{title}:\n" + gm.print_readable(print_output=False))


def create_runtime(flat_fn, leaves, config):
    """Traces, partitions and compiles flat_fn for inputs like `leaves`; returns run(leaves)."""
    needs_grad = _C.is_grad_enabled() and any(isinstance(x, kiln.Tensor) and x.requires_grad for x in leaves)
    start = time.perf_counter()
    if not needs_grad:
        traced = trace_inference(flat_fn, leaves, config)
        _log_graph("Inference graph", traced.graph)
        compiled = config.inference_compiler(traced.graph, _fake_examples(traced.graph))
        logs.log("aot_graphs", f"traced in {(time.perf_counter() - start) * 1e3:.1f} ms")
        return _InferenceRuntime(traced, compiled)
    traced = trace_joint(flat_fn, leaves, config)
    _log_graph("Joint graph", traced.graph)
    num_fwd_outputs = traced.num_mutations + traced.num_outputs
    fw_module, bw_module = config.partition_fn(traced.graph, None, num_fwd_outputs=num_fwd_outputs)
    _log_graph("Forward graph", fw_module)
    _log_graph("Backward graph", bw_module)
    saved_order = _saved_order(fw_module, bw_module, num_fwd_outputs)
    compiled_fw = config.fw_compiler(fw_module, _fake_examples(fw_module))
    compiled_bw = config.bw_compiler(bw_module, _fake_examples(bw_module))
    logs.log("aot_graphs", f"traced and partitioned in {(time.perf_counter() - start) * 1e3:.1f} ms")
    return _training_runtime(traced, compiled_fw, compiled_bw, saved_order, len(leaves))


def _saved_order(fw_module, bw_module, num_fwd_outputs):
    """Positions, among the forward's saved outputs, of the backward's non-tangent inputs (the
    partitioner may order them differently, e.g. size symbols first); matched by node name."""
    saved = [getattr(v, "name", None) for v in _outputs(fw_module)[num_fwd_outputs:]]
    wanted = [n.name for n in bw_module.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    return [saved.index(name) for name in wanted]


def _outputs(gm):
    out = gm.graph.output_node().args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _fake_examples(gm):
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _default_partition():
    from kiln._functorch.partitioners import default_partition

    return default_partition


# --- entry points ----------------------------------------------------------------------------------
def aot_function(fn, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None, num_params_buffers=0,
                 keep_inference_input_mutations=False, inference_compiler=None, *, dynamic=False):
    """fn compiled ahead of time into forward and backward aten graphs (see the module docstring).
    fn takes and returns tensors (in tuples, lists and dicts); the compilers get GraphModules.
    num_params_buffers (the leading inputs that are parameters and buffers) is kept on the
    config for compilers; keep_inference_input_mutations leaves inference graphs' copy_
    epilogue in the graph instead of returning the new values."""
    if dynamic:
        raise NotImplementedError("aot_function(dynamic=True): kiln traces static shapes and retraces per input "
                                  "layout; symbolic tracing here is not built yet")
    if not callable(fw_compiler):
        raise TypeError(f"aot_function(): fw_compiler must be callable, got {type(fw_compiler).__name__}")
    partition_fn = partition_fn or _default_partition()
    config = AOTConfig(fw_compiler, bw_compiler or fw_compiler, inference_compiler or fw_compiler, partition_fn,
                       decompositions, num_params_buffers, keep_inference_input_mutations)
    cache = {}

    @functools.wraps(fn)
    def compiled(*args, **kwargs):
        leaves = []
        builder = _flatten((args, kwargs), leaves)
        key = _layout_key(leaves)
        entry = cache.get(key)
        if entry is None:
            tensor_slots = [i for i, x in enumerate(leaves) if isinstance(x, kiln.Tensor)]
            constants = list(leaves)
            out_spec = []

            def flat_fn(*tensors):
                values = list(constants)
                for i, t in zip(tensor_slots, tensors):
                    values[i] = t
                f_args, f_kwargs = _unflatten(builder, values)
                out_leaves = []
                out_spec[:] = [_flatten(fn(*f_args, **f_kwargs), out_leaves)]
                return out_leaves

            runtime = create_runtime(flat_fn, [leaves[i] for i in tensor_slots], config)
            entry = cache[key] = (runtime, tensor_slots, out_spec)
        runtime, tensor_slots, out_spec = entry
        outs = runtime([leaves[i] for i in tensor_slots])
        return _unflatten(out_spec[0], outs)

    compiled._kiln_aot_cache = cache
    return compiled


def aot_module(mod, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None, inference_compiler=None):
    """mod compiled ahead of time: its parameters and buffers are graph inputs (functional_call),
    so training updates them in place as usual and buffers mutated by forward are written back."""
    from kiln.func import functional_call

    names = [n for n, _ in mod.named_parameters()] + [n for n, _ in mod.named_buffers()]

    def functional(state, *args, **kwargs):
        return functional_call(mod, dict(zip(names, state)), args, kwargs)

    compiled = aot_function(functional, fw_compiler, bw_compiler, partition_fn, decompositions,
                            num_params_buffers=len(names), inference_compiler=inference_compiler)

    class AOTModule(kiln.nn.Module):
        def __init__(self):
            super().__init__()
            self.orig_module = mod

        def forward(self, *args, **kwargs):
            state = [t for _, t in mod.named_parameters()] + [t for _, t in mod.named_buffers()]
            return compiled(state, *args, **kwargs)

    return AOTModule()


def aot_module_simplified(gm, example_inputs, fw_compiler, bw_compiler=None, partition_fn=None,
                          decompositions=None, inference_compiler=None, keep_inference_input_mutations=False):
    """The Dynamo entry: gm's flat inputs in, its flat outputs out (a tuple)."""
    run_graph = replay(gm)
    config = AOTConfig(fw_compiler, bw_compiler or fw_compiler, inference_compiler or fw_compiler,
                       partition_fn or _default_partition(), decompositions,
                       keep_inference_input_mutations=keep_inference_input_mutations)
    runtimes = {}

    def flat_fn(*args):
        return list(run_graph(*args))

    def run(*args):
        # Dynamo's inputs are already flat, so the layout key picks the runtime directly, with
        # none of aot_function's pytree work. Sizes passed as ints (dynamic shapes) are part of
        # the key and baked into that runtime's trace, as aot_function does.
        key = _layout_key(args)
        entry = runtimes.get(key)
        if entry is None:
            slots = [i for i, a in enumerate(args) if isinstance(a, kiln.Tensor)]
            if len(slots) == len(args):
                entry = runtimes[key] = (create_runtime(flat_fn, list(args), config), None)
            else:
                constants = list(args)

                def bound(*tensors):
                    values = list(constants)
                    for i, t in zip(slots, tensors):
                        values[i] = t
                    return list(run_graph(*values))

                entry = runtimes[key] = (create_runtime(bound, [args[i] for i in slots], config), slots)
        runtime, slots = entry
        return runtime(args if slots is None else [args[i] for i in slots])

    run._boxed_call = False
    return run
