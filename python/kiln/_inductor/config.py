"""kiln._inductor.config: Inductor's module-level settings, as torch._inductor.config's of the same
names (the per-compile options of kiln.compile(options=...) are compile_fx.OPTIONS)."""

import os


def decide_compile_threads():
    """Threads that compile a graph's kernels: $KILN_INDUCTOR_COMPILE_THREADS when set, else the
    CPUs this process may run on, at most 32 (PyTorch's rule, TORCHINDUCTOR_COMPILE_THREADS).
    Independent of kiln.set_num_threads, which sizes the pool that runs kernels."""
    if "KILN_INDUCTOR_COMPILE_THREADS" in os.environ:
        return max(1, int(os.environ["KILN_INDUCTOR_COMPILE_THREADS"]))
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return min(32, cpus)


# Kernels of one graph are compiled on up to this many threads (LLVM, with the GIL released).
compile_threads = decide_compile_threads()
# Warn once when kiln's kernel threads exceed the cores other processes leave free (oversubscription.py).
check_thread_oversubscription = os.environ.get("KILN_CHECK_THREADS", "1") != "0"
# Channels-last activations for graphs with 2-d convolutions (layout.py, Note [Layout
# optimization]): PyTorch's config.layout_optimization and $TORCHINDUCTOR_LAYOUT_OPTIMIZATION.
layout_optimization = os.environ.get("KILN_INDUCTOR_LAYOUT_OPTIMIZATION", "1") == "1"
# Lay out any graph with convolutions channels-last, whatever runs them ($TORCHINDUCTOR_FORCE_LAYOUT_OPT).
force_layout_optimization = os.environ.get("KILN_INDUCTOR_FORCE_LAYOUT_OPT", "0") == "1"
