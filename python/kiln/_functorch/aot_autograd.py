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

This module holds the entry points and create_runtime; the parts live in _aot_autograd/:
input_aliasing (arguments that share memory), output_analysis (what tracing learns besides the
graph), functional_graph (make_fx of functionalize, the inference trace), joint (the training
trace) and runtime (running the compiled graphs under autograd).
"""

import functools
import logging
import time

import kiln
from kiln import _C
from kiln._functorch._aot_autograd.functional_graph import _outputs, replay, trace_inference
from kiln._functorch._aot_autograd.input_aliasing import _deduplicated, _layout_key
from kiln._functorch._aot_autograd.joint import trace_joint
from kiln._functorch._aot_autograd.runtime import _InferenceRuntime, _training_runtime, _with_constants
from kiln._functorch.backward_reads import (inputs_read_by_backward, prune_absent, saved_input_aliases,
                                             saved_inputs_recomputed_from, saved_placeholders, tangent_dependencies)
from kiln._guards import compile_context, current_compile_id
from kiln._logging import getArtifactLogger, trace_structured
from kiln._logging._metrics import counters, dynamo_timed
from kiln.func import _flatten, _unflatten

log = logging.getLogger(__name__)
aot_graphs_log = getArtifactLogger(__name__, "aot_graphs")

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "AOTConfig"]


class AOTConfig:
    def __init__(self, fw_compiler, bw_compiler, inference_compiler, partition_fn, decompositions,
                 num_params_buffers=0, keep_inference_input_mutations=False):
        self.fw_compiler, self.bw_compiler, self.inference_compiler = fw_compiler, bw_compiler, inference_compiler
        self.partition_fn, self.decompositions = partition_fn, dict(decompositions or {})
        self.num_params_buffers = num_params_buffers
        self.keep_inference_input_mutations = keep_inference_input_mutations


def _log_graph(title, gm):
    if aot_graphs_log.isEnabledFor(logging.DEBUG):
        aot_graphs_log.debug("%s:\n%s", title, gm.print_readable(print_output=False))
    # KILN_TRACE: aot_joint_graph, aot_forward_graph, aot_backward_graph, aot_inference_graph
    trace_structured(f"aot_{title.split()[0].lower()}_graph", {"title": title},
                     lambda: gm.print_readable(print_output=False))


def create_runtime(flat_fn, leaves, config):
    """Traces, partitions and compiles flat_fn for inputs like `leaves`; returns run(leaves)."""
    counters["aot_autograd"]["total"] += 1
    with dynamo_timed("create_aot_dispatcher_function", phase="aot"):
        runtime = _create_runtime(flat_fn, leaves, config)
    counters["aot_autograd"]["ok"] += 1
    return runtime


def _create_runtime(flat_fn, leaves, config):
    needs_grad = _C.is_grad_enabled() and any(isinstance(x, kiln.Tensor) and x.requires_grad for x in leaves)
    start = time.perf_counter()
    if not needs_grad:
        traced = trace_inference(flat_fn, leaves, config)
        _log_graph("Inference graph", traced.graph)
        compiled = _with_constants(config.inference_compiler(traced.graph, _fake_examples(traced.graph)),
                                   traced.constants)
        log.info("traced and compiled an inference graph in %.1f ms", (time.perf_counter() - start) * 1e3)
        return _InferenceRuntime(traced, compiled)
    traced = trace_joint(flat_fn, leaves, config)
    _log_graph("Joint graph", traced.graph)
    num_fwd_outputs = traced.num_mutations + traced.num_outputs
    fw_module, bw_module = config.partition_fn(traced.graph, traced.joint_inputs(), num_fwd_outputs=num_fwd_outputs)
    _log_graph("Forward graph", fw_module)
    _log_graph("Backward graph", bw_module)
    num_tangents = traced.num_tangents
    saved_order = _saved_order(fw_module, bw_module, num_fwd_outputs, num_tangents)
    compiled_fw = _with_constants(config.fw_compiler(fw_module, _fake_examples(fw_module)), traced.constants)
    compiled_bw = config.bw_compiler(bw_module, _fake_examples(bw_module))
    log.info("traced, partitioned and compiled a forward and backward graph in %.1f ms",
             (time.perf_counter() - start) * 1e3)

    compile_id = current_compile_id()

    def specialise(absent):  # the backward for calls where the tangents in `absent` are None
        pruned = prune_absent(bw_module, num_tangents, absent)
        if pruned is None:
            return None
        module, unread = pruned
        # compiled at the first such backward, long after the forward's compile: its logs and
        # output code still name the compile that made the forward ([frame/recompile])
        with compile_context(compile_id):
            _log_graph(f"Backward graph without tangents {absent:b}", module)
            compiled = config.bw_compiler(module, _fake_examples(module))
        return compiled, getattr(compiled, "_boxed_call", False), {saved_order[j] for j in unread}

    aliases = saved_input_aliases(fw_module, num_fwd_outputs)
    return _training_runtime(traced, compiled_fw, compiled_bw, saved_order, len(leaves),
                             tangent_dependencies(bw_module, num_tangents, traced.formula_masks), specialise,
                             inputs_read_by_backward(traced.joint_graph(), traced.saved_reads), aliases,
                             saved_inputs_recomputed_from(fw_module, bw_module, num_tangents, saved_order, aliases))


def _saved_order(fw_module, bw_module, num_fwd_outputs, num_tangents):
    """Positions, among the forward's saved outputs, of the backward's inputs before its tangents
    (the partitioner may order them differently, e.g. size symbols first): kiln's partitioners say
    so (`Partition.saved_order`, aot/partition.h); a user's partition_fn, which returns modules
    only (PyTorch's contract), by node name."""
    partition = fw_module.meta.get("partition")
    if partition is not None and partition is bw_module.meta.get("partition"):
        return list(partition.saved_order)
    saved = [getattr(v, "name", None) for v in _outputs(fw_module)[num_fwd_outputs:]]
    wanted = [n.name for n in saved_placeholders(bw_module.graph, num_tangents)]
    return [saved.index(name) for name in wanted]


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

            runtime = _deduplicated(create_runtime, flat_fn, [leaves[i] for i in tensor_slots], config)
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
                          decompositions=None, inference_compiler=None, keep_inference_input_mutations=False,
                          on_trace_error=None):
    """The Dynamo entry: gm's flat inputs in, its flat outputs out (a tuple). `on_trace_error(gm,
    e, run_eagerly)` (kiln's Dynamo bridge) handles an error while tracing or compiling for a new
    input layout: it raises, or returns run_eagerly()'s outputs, and the layout runs gm as
    written from then on (Note [Internal errors at the first call] in _dynamo/backends/common.py)."""
    run_graph = replay(gm)
    config = AOTConfig(fw_compiler, bw_compiler or fw_compiler, inference_compiler or fw_compiler,
                       partition_fn or _default_partition(), decompositions,
                       keep_inference_input_mutations=keep_inference_input_mutations)
    runtimes = {}

    def flat_fn(*args):
        return list(run_graph(*args))

    def _entry(args):
        slots = [i for i, a in enumerate(args) if isinstance(a, kiln.Tensor)]
        if len(slots) == len(args):
            return _deduplicated(create_runtime, flat_fn, list(args), config), None
        constants = list(args)

        def bound(*tensors):
            values = list(constants)
            for i, t in zip(slots, tensors):
                values[i] = t
            return list(run_graph(*values))

        return _deduplicated(create_runtime, bound, [args[i] for i in slots], config), slots

    def run(*args):
        # Dynamo's inputs are already flat, so the layout key picks the runtime directly, with
        # none of aot_function's pytree work. Sizes passed as ints (dynamic shapes) are part of
        # the key and baked into that runtime's trace, as aot_function does.
        key = _layout_key(args)
        entry = runtimes.get(key)
        if entry is None:
            try:
                with compile_context(gm.meta.get("kiln_compile_id")):  # logs name Dynamo's compile
                    entry = runtimes[key] = _entry(args)
            except Exception as e:  # noqa: BLE001 - the handler decides who sees it
                if on_trace_error is None:
                    raise
                # run as written: gm.forward, not the tracing replay (which names graph nodes in errors)
                outs = on_trace_error(gm, e, lambda: list(gm.forward(*args)))
                runtimes[key] = (lambda leaves: list(gm.forward(*leaves)), None)
                return outs
        runtime, slots = entry
        return runtime(args if slots is None else [args[i] for i in slots])

    run._boxed_call = False
    return run
