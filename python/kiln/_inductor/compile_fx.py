"""compile_fx: the "inductor" backend. AOTAutograd (min-cut partition) hands each forward,
backward or inference graph to compile_fx_inner, which lowers it (graph.py), compiles its
kernels through LLVM (inductor/, kiln._C._inductor) and returns the wrapper's `call`."""

import itertools
import os
import time

import kiln
from kiln._dynamo import logs
from kiln._dynamo.backends.registry import register_backend
from kiln._inductor.graph import GraphLowering

_graph_ids = itertools.count()
code_sinks = []  # run_and_get_code's collectors
graph_sinks = []  # lists that collect each GraphLowering (its kernels and fallbacks: tests)


def _reinterpret_tensor(t, size, stride, offset=0):
    return t.as_strided(size, stride, offset)


def _empty_strided(size, stride, dtype):
    return kiln.empty_strided(size, stride, dtype=dtype)


def compile_fx_inner(gm, example_inputs):
    start = time.perf_counter()
    graph = GraphLowering(gm).run()
    source = graph.wrapper_code()
    namespace = {"kiln": kiln, "empty_strided": _empty_strided, "reinterpret_tensor": _reinterpret_tensor}
    for kernel in graph.kernels:
        namespace[kernel.name] = kernel.compiled
    exec(compile(source, f"<kiln inductor output {next(_graph_ids)}>", "exec"), namespace)
    call = namespace["call"]
    call._boxed_call = True
    code = output_code(graph, source)
    call._kiln_output_code = code
    logs.log("output_code", f"Output code ({(time.perf_counter() - start) * 1e3:.1f} ms):\n{code}")
    for sink in code_sinks:
        sink.append(code)
    for sink in graph_sinks:
        sink.append(graph)
    if os.environ.get("KILN_COMPILE_DEBUG") == "1":
        _write_debug_dir(gm, graph, code)
    return call


_debug_run = None


def _write_debug_dir(gm, graph, code):
    """KILN_COMPILE_DEBUG=1: kiln_compile_debug/run_<time>-pid_<pid>/<graph n>/ with the graph
    (readable and as a standalone repro), the IR before and after fusion, and the output code."""
    global _debug_run
    if _debug_run is None:
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S")
        _debug_run = os.path.join(os.getcwd(), "kiln_compile_debug", f"run_{stamp}-pid_{os.getpid()}")
    folder = os.path.join(_debug_run, f"graph_{len(os.listdir(_debug_run)) if os.path.isdir(_debug_run) else 0}")
    os.makedirs(folder, exist_ok=True)

    def write(name, text):
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)

    write("fx_graph_readable.py", gm.print_readable(print_output=False))
    write("fx_graph_runnable.py", _runnable(gm))
    write("ir_pre_fusion.txt", "\n".join(graph.pre_fusion) + "\n")
    write("ir_post_fusion.txt", "\n\n".join(f"{k.name}: {k.ir}" for k in graph.kernels) + "\n")
    write("output_code.py", code)


def _runnable(gm):
    """A standalone script rebuilding the graph's inputs and running it eagerly and compiled."""
    inputs = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta.get("val")
            if isinstance(v, kiln.Tensor):
                inputs.append(f"kiln.randn({tuple(v.shape)}).to(kiln.{str(v.dtype).split('.')[-1]})")
            else:
                inputs.append(repr(v))
    return ("import kiln\n"
            "from kiln._inductor.compile_fx import compile_fx_inner\n\n"
            + gm.code.replace("def forward(self, ", "def forward(").replace("def forward(self)", "def forward()")
            + "\n\nclass _Graph:\n    pass\n\n"
            "if __name__ == '__main__':\n"
            f"    args = [{', '.join(inputs)}]\n"
            "    print(forward(*args))\n")


def output_code(graph, wrapper):
    parts = []
    for kernel in graph.kernels:
        parts.append(f"# kernel {kernel.name}\n{kernel.compiled.code}")
    parts.append("# wrapper\n" + wrapper)
    return "\n".join(parts)


def compile_fx(gm, example_inputs):
    """The "inductor" Dynamo backend."""
    from kiln._dynamo.backends.common import aot_autograd
    from kiln._functorch.partitioners import min_cut_rematerialization_partition

    return aot_autograd(fw_compiler=compile_fx_inner, bw_compiler=compile_fx_inner,
                        inference_compiler=compile_fx_inner,
                        partition_fn=min_cut_rematerialization_partition)(gm, example_inputs)


register_backend(compile_fx, name="inductor")
