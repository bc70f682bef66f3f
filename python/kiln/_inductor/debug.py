"""KILN_COMPILE_DEBUG=1: a folder per compiled graph, with what reproduces its compile
(PyTorch's TORCH_COMPILE_DEBUG=1, torch/_inductor/debug.py).

    kiln_compile_debug/run_<time>-pid_<pid>/       (printed on stderr once, when first made)
        dynamo.log                                  graph breaks, guards and recompiles, [frame/compile] first
        <frame>_<compile>-<function>-<forward|backward|inference>/
            fx_graph_readable.py                    the aten graph Inductor received
            fx_graph_runnable.py                    a repro: that graph compiled as then, compared with eager
            ir_pre_fusion.txt, ir_post_fusion.txt   each node's lazy value; each kernel's IR
            output_code.py                          kernels and wrapper, runnable on random inputs

The folder name's compile ID is the one KILN_LOGS lines carry ([0/1] -> 0_1); a graph compiled
again under the same ID (a backward specialised for absent gradients) gets a numbered suffix.
"""

import logging
import os
import sys
import time

from kiln._dynamo import debug_utils

ENV = "KILN_COMPILE_DEBUG"
_run_dir = None
_folders = set()
_restore = []  # (logger, the file handler added, its level and propagate before)
_LOGGED_ARTIFACTS = ("graph_breaks", "guards", "recompiles")


def enabled():
    return os.environ.get(ENV) == "1"


def run_dir():
    """This process's folder, made (and its path printed) at the first call."""
    global _run_dir
    if _run_dir is None:
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S")
        _run_dir = os.path.join(os.getcwd(), "kiln_compile_debug", f"run_{stamp}-pid_{os.getpid()}")
        os.makedirs(_run_dir, exist_ok=True)
        print(f"kiln: {ENV}=1: writing the compile's debug files to {_run_dir}", file=sys.stderr)
        _log_dynamo_to(os.path.join(_run_dir, "dynamo.log"))
    return _run_dir


def _log_dynamo_to(path):
    """Graph breaks, guards and recompiles go to `path` as well, whatever KILN_LOGS asks for (an
    artifact not asked for is turned on for this file only: it does not reach stderr)."""
    from kiln._logging import _internal

    handler = logging.FileHandler(path)
    handler.setFormatter(_internal._formatter())
    handler.setLevel(logging.DEBUG)
    for qname in sorted(_internal.log_registry.artifact_log_qnames):
        logger = logging.getLogger(qname)
        if getattr(logger, "artifact_name", None) not in _LOGGED_ARTIFACTS:
            continue
        _restore.append((logger, handler, logger.level, logger.propagate))
        if not logger.isEnabledFor(logging.DEBUG):
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
        logger.addHandler(handler)


def reset():
    """Forgets this process's folder: the next compile makes a new one (tests)."""
    global _run_dir
    for logger, handler, level, propagate in reversed(_restore):
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        handler.close()
    _restore.clear()
    _folders.clear()
    _run_dir = None


def graph_folder(graph_name, kind):
    """The folder for the graph being compiled now: its compile ID, function and kind."""
    from kiln._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    ident = str(compile_id).replace("/", "_") if compile_id is not None else "nocompileid"
    base = os.path.join(run_dir(), f"{ident}-{graph_name or 'graph'}-{kind}")
    folder, n = base, 1
    while folder in _folders:
        n += 1
        folder = f"{base}-{n}"
    _folders.add(folder)
    os.makedirs(folder, exist_ok=True)
    return folder


def _write(folder, name, text):
    with open(os.path.join(folder, name), "w") as f:
        f.write(text)


def write_graph_before_passes(folder, gm, example_inputs, options, kind):
    """The graph as Inductor received it (Inductor's passes rewrite it in place)."""
    _write(folder, "fx_graph_readable.py", gm.print_readable(print_output=False))
    try:
        runnable = debug_utils.repro_source(
            gm, example_inputs, backend="inductor", after="aot", options=dict(options), kind=kind,
            note=f"The {kind} graph of {os.path.basename(folder)}, compiled by Inductor as kiln compiled it\n"
                 "(compile_fx_inner, same options) and compared with running it eagerly.")
    except NotImplementedError as e:
        runnable = f"# no standalone runnable for this graph: {e}\n"
    _write(folder, "fx_graph_runnable.py", runnable)


def write_graph_after_lowering(folder, gm, graph, wrapper, example_inputs):
    _write(folder, "ir_pre_fusion.txt", "\n".join(graph.pre_fusion) + "\n")
    _write(folder, "ir_post_fusion.txt", "\n\n".join(str(k.ir) for k in graph.kernels) + "\n")
    _write(folder, "output_code.py", runnable_output_code(graph, wrapper, example_inputs))


def runnable_output_code(graph, wrapper, example_inputs):
    """The output code as a script: each kernel compiled from its IR (its C-like listing in a
    comment above it), the wrapper's call(args), and a main that runs it on random inputs."""
    parts = ['"""Inductor\'s output code for one graph: kernels compiled from their IR by LLVM, and the\n'
             'wrapper\'s call(args). Run: python output_code.py (random inputs; prints each output)."""\n',
             "import kiln",
             "from kiln import _C",
             "from kiln._C._inductor.kernel_ir import Kernel",
             "from kiln._dynamo.debug_utils import rand_strided",
             "from kiln._inductor.compile_fx import _as_declared as as_declared  # noqa: F401",
             "from kiln._inductor.compile_fx import _empty_strided as empty_strided  # noqa: F401",
             "from kiln._inductor.compile_fx import _reinterpret_tensor as reinterpret_tensor  # noqa: F401\n"]
    parts += [f"# autotune: {op} -> {choice}" for op, choice in graph.autotune_choices]
    for kernel in graph.kernels:
        listing = "\n".join("# " + line for line in kernel.compiled.code.splitlines())
        parts.append(f"\n{listing}\n{kernel.name} = _C._inductor.compile(Kernel.parse({str(kernel.ir)!r}))\n")
    parts.append("\n" + wrapper)
    try:
        args = ",\n        ".join(debug_utils.describe_input(v) for v in example_inputs)
        main = (f"    kiln.manual_seed(0)\n    args = [\n        {args},\n    ]\n"
                "    for i, out in enumerate(call(args)):\n"
                "        print(f\"output {i}:\", tuple(out.shape) if isinstance(out, kiln.Tensor) else out)\n")
    except NotImplementedError as e:
        main = f"    raise SystemExit({str(e)!r})\n"
    parts.append(f"\n\nif __name__ == \"__main__\":\n{main}")
    return "\n".join(parts)
