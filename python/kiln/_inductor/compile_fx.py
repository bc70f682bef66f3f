"""compile_fx: the "inductor" backend. AOTAutograd (min-cut partition) hands each forward,
backward or inference graph to compile_fx_inner, which lowers it (graph.py), compiles its
kernels through LLVM (inductor/, kiln._C._inductor) and returns the wrapper (wrapper.py's
WrapperProgram) as `call`."""

import functools
import logging
import time

import kiln
from kiln import _C
from kiln._inductor.fx_passes import run_post_grad_passes
from kiln._inductor import config as config_module
from kiln._inductor import debug
from kiln._inductor.decomposition import decompositions
from kiln._inductor.graph import GraphLowering, compile_kernels
from kiln._inductor import oversubscription
from kiln._logging import getArtifactLogger, trace_structured
from kiln._logging._metrics import counters, dynamo_timed

log = logging.getLogger(__name__)
output_code_log = getArtifactLogger(__name__, "output_code")

code_sinks = []  # run_and_get_code's collectors
graph_sinks = []  # lists that collect each GraphLowering (its kernels and fallbacks: tests)


# The wrapper calls the C entry points themselves: each Python layer costs about a microsecond
# per call, and small graphs make dozens of these calls.
_reinterpret_tensor = _C._inductor.reinterpret_tensor
_empty_strided = _C._overload_function("aten::empty_strided")


def _as_declared(t, size, stride):
    """An extern op's result in the layout the graph declared (Note [Extern results in the declared
    layout] in wrapper.py): itself when it has it, else a copy."""
    if t.stride() == stride:
        return t
    out = _empty_strided(size, stride, dtype=t.dtype)
    out.copy_(t)
    return out


# Inductor's options (kiln.compile(options={...})) and what each mode sets.
OPTIONS = {
    "max_autotune": False,   # time the alternatives for matmul and convolution, keep the fastest
    "static_memory": False,  # intermediate buffers allocated once and kept between calls
}
MODES = {None: {}, "default": {}, "reduce-overhead": {"static_memory": True},
         "max-autotune": {"max_autotune": True, "static_memory": True},
         "max-autotune-no-cudagraphs": {"max_autotune": True}}


def make_config(mode=None, options=None):
    config = dict(OPTIONS)
    config.update(MODES[mode])
    for key, value in (options or {}).items():
        if key not in OPTIONS:
            raise RuntimeError(f"Unexpected optimization option {key}, known options are {sorted(OPTIONS)}")
        if not isinstance(value, type(OPTIONS[key])):
            raise RuntimeError(f"Unexpected type of attr {key}, got {type(value).__name__} should be "
                               f"{type(OPTIONS[key]).__name__}")
        config[key] = value
    return config


def compile_fx_inner(gm, example_inputs, config=None, is_backward=False, is_inference=False, graph_name=None,
                     saved_layouts=None):
    """One aten graph compiled; `graph_name` (the user's function, for KILN_COMPILE_DEBUG's folder);
    `saved_layouts` (one dict shared by a forward and its backwards): the strides of the forward's
    saved values, by name, where layout optimization chose them (layout.py)."""
    with dynamo_timed("compile_fx_inner", phase="inductor lowering"):
        call = _compile_fx_inner(gm, example_inputs, config, is_backward, is_inference, graph_name, saved_layouts)
    oversubscription.check()  # one warning when kiln's threads exceed the cores left free
    return call


def _compile_fx_inner(gm, example_inputs, config, is_backward, is_inference, graph_name, saved_layouts):
    config = config or OPTIONS
    start = time.perf_counter()
    kind = "backward" if is_backward else "inference" if is_inference else "forward"
    debug_folder = debug.graph_folder(graph_name, kind) if debug.enabled() else None
    if debug_folder:
        debug.write_graph_before_passes(debug_folder, gm, example_inputs, config, kind)
    run_post_grad_passes(gm, kind, saved_layouts)
    with dynamo_timed("GraphLowering.run"):
        graph = GraphLowering(gm, config).run()
    graph.memory_plan()  # before the kernels compile: in-place writes rewrite their IR
    with dynamo_timed("compile_kernels", phase="LLVM codegen"):
        compile_kernels(graph.kernels, config_module.compile_threads)
    call = _checking_input_layouts(graph.wrapper_program(_as_declared), gm)
    call._boxed_call = True
    rendered = []

    def code():  # the output code, written only where someone reads it (Note [The wrapper program])
        if not rendered:
            source = graph.wrapper_code()
            rendered[:] = [source, output_code(graph, source)]
        return rendered[1]

    elapsed = (time.perf_counter() - start) * 1e3
    log.info("compiled a %sgraph of %d nodes in %.1f ms (kernels: %d, fallbacks: %d)",
             "backward " if is_backward else "", len(gm.graph.nodes), elapsed, len(graph.kernels), len(graph.fallbacks))
    if output_code_log.isEnabledFor(logging.DEBUG):
        output_code_log.debug("Output code (%.1f ms):\n%s", elapsed, code())
    counters["inductor"]["generated_kernel_count"] += len(graph.kernels)
    counters["inductor"]["fallbacks"] += len(graph.fallbacks)
    trace_structured("inductor_output_code", lambda: {
        "is_backward": is_backward, "kernels": [{"name": k.name, "source": k.compiled.code} for k in graph.kernels],
        "fallbacks": [{"op": op, "why": why} for op, why in graph.fallbacks]}, code)
    for sink in code_sinks:
        sink.append(code())
    for sink in graph_sinks:
        sink.append(graph)
    if debug_folder:
        code()
        debug.write_graph_after_lowering(debug_folder, gm, graph, rendered[0], example_inputs)
    return call


# Note [Input layouts]: kernels address their inputs with the strides of the graph's placeholder
# meta values, and the wrapper's reinterpret_tensor views of inputs use those strides and the meta
# storage offset. A tensor arriving in another layout would be read in the wrong order, silently,
# or viewed out of bounds (a saved activation laid out otherwise than the joint graph recorded, such
# as a forward output that is a strided view of an intermediate; a view input AOTAutograd described
# as contiguous). Dynamo guards input layouts, and a forward graph lays its outputs out alike on
# every call, so the first call compares them: a graph whose inputs disagree copies those inputs
# into the expected layout (strides and offset, in a storage of their own) on every call, logged as
# a bug in kiln upstream of Inductor; one whose inputs agree runs unchecked after.
def _checking_input_layouts(call, gm):
    expected = []
    for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        val = node.meta.get("val")
        if isinstance(val, kiln.Tensor):
            layout = (tuple(val.shape), tuple(val.stride()), val.storage_offset())
            if all(type(v) is int for v in layout[0] + layout[1] + (layout[2],)):  # symbolic: Dynamo's guards
                expected.append((i, node.name) + layout)
    if not expected:
        return call
    state = {}

    def mismatched(args):
        return [(i, name, shape, stride, offset) for i, name, shape, stride, offset in expected
                if isinstance(args[i], kiln.Tensor) and
                not _same_layout(shape, (args[i].stride(), args[i].storage_offset()), (stride, offset))]

    def restriding(args, wrong):
        for i, _, shape, stride, offset in wrong:
            args[i] = _in_layout(args[i], shape, stride, offset)
        return call(args)

    def first(args):
        wrong = mismatched(args)
        if wrong:
            output_code_log.debug("inputs laid out otherwise than the graph was compiled for (a bug in kiln): "
                     + ", ".join(f"{name} {tuple(args[i].stride())}+{args[i].storage_offset()} for {stride}+{offset}"
                                 for i, name, _, stride, offset in wrong)
                     + "; copied into that layout on each call")
            state["call"] = lambda args: restriding(args, wrong)
            return restriding(args, wrong)
        state["call"] = call
        return call(args)

    state["call"] = first

    def checked(args):
        return state["call"](args)

    checked._kiln_inner = call
    return checked


def _same_layout(shape, a, b):
    """Whether (strides, offset) a and b address a tensor of `shape` alike (size-1 dimensions'
    strides never matter; an empty tensor's layout never does)."""
    if any(s == 0 for s in shape):
        return True
    return a[1] == b[1] and all(x == y for n, x, y in zip(shape, a[0], b[0]) if n != 1)


def _in_layout(x, shape, stride, offset):
    """A copy of x with the given strides and storage offset (in a storage of its own). Along a
    stride-0 dimension (an expanded layout) every element is one memory location: the first of
    x's is written there (copy_ refuses to write one location twice; the graph read x as
    expanded, so its elements along that dimension are equal)."""
    extent = offset + 1 + sum((n - 1) * st for n, st in zip(shape, stride))
    flat = _empty_strided((extent,), (1,), dtype=x.dtype, device=x.device)
    out = _reinterpret_tensor(flat, shape, stride, offset)
    dst, src = out, x
    for d, (n, st) in enumerate(zip(shape, stride)):
        if st == 0 and n > 1:
            dst, src = dst.narrow(d, 0, 1), src.narrow(d, 0, 1)
    dst.copy_(src)
    return out


def output_code(graph, wrapper):
    parts = [f"# autotune: {op} -> {choice}" for op, choice in graph.autotune_choices]
    for kernel in graph.kernels:
        parts.append(f"# kernel {kernel.name}\n" + "".join(f"{c}\n" for c in kernel.provenance) + kernel.compiled.code)
    parts.append("# wrapper\n" + wrapper)
    return "\n".join(parts)


def compile_fx(gm, example_inputs, config=None):
    """The "inductor" Dynamo backend; `config` from make_config (kiln.compile's mode/options)."""
    from kiln._dynamo.backends.common import aot_autograd
    from kiln._functorch.partitioners import min_cut_rematerialization_partition

    from kiln._dynamo.repro.after_aot import wrap_compiler_debug

    config = config or OPTIONS
    code = gm.meta.get("kiln_code", lambda: None)() if hasattr(gm, "meta") else None
    name = code.co_name if code is not None else None
    saved_layouts = {}  # the forward's saved values' strides, by name, for its backwards (layout.py)
    compilers = {kind: wrap_compiler_debug(functools.partial(compile_fx_inner, config=config, graph_name=name,
                                                             is_backward=kind == "backward",
                                                             is_inference=kind == "inference",
                                                             saved_layouts=saved_layouts), kind, config)
                 for kind in ("forward", "backward", "inference")}
    return aot_autograd(fw_compiler=compilers["forward"], bw_compiler=compilers["backward"],
                        inference_compiler=compilers["inference"],
                        decompositions=decompositions(),
                        partition_fn=min_cut_rematerialization_partition)(gm, example_inputs)


def _with_config(mode=None, options=None):
    """compile_fx with kiln.compile's mode and options bound (validated here, at kiln.compile)."""
    config = make_config(mode, options)
    backend = functools.partial(compile_fx, config=config)
    backend.__name__ = "compile_fx"
    return backend


compile_fx.with_config = _with_config
