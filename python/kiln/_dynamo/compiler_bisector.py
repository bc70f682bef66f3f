"""The backend bisector: which part of a compile makes a program crash or diverge from eager
(PyTorch's torch._inductor.compiler_bisector, with its minifier run at the end).

    result = kiln._dynamo.bisect(fn, *args)      # or: python tools/compile_bisect.py script.py
    print(result)                                 # backend, graph, subsystem, repro path

1. backends: the program runs eagerly, then compiled by each backend in BACKENDS, each doing
   more than the one before; the first whose run crashes, or whose outputs (and the gradients a
   backward of their sum gives the inputs and a module's parameters) differ from eager's beyond
   rtol/atol, is the culprit;
2. graph: each graph Dynamo captured is compiled by that backend alone, the others run as
   captured; the first that fails alone is the culprit;
3. subsystem (SUBSYSTEMS): for that graph, Inductor's passes are turned off one at a time; then
   fusion and lowering are allowed only for the first N applications (bisect_controls.Budget)
   and N is bisected down to the one application that makes it fail; aot_eager_decomp_partition
   bisects its decomposition table the same way;
4. repro: the failing graph is minified (repro/minifier.py) and written as a standalone script
   that exits 1 while the bug is there (debug_utils.repro_source).

A compile that fails never falls back to eager here (suppress_errors is off during the runs).
Each run starts from kiln._dynamo.reset() and the same random seed, and a module's parameters
and buffers are restored before it, so runs differ only in how they were compiled.

tools/compile_bisect.py runs a script in subprocesses instead, steering kiln.compile through the
variables read by `backend_from_environment` (KILN_BISECT_BACKEND, _GRAPH, _SUBSYSTEM, _LIMIT,
_RECORD, _REPRO).
"""

import atexit
import dataclasses
import json
import os

import kiln
from kiln._dynamo import debug_utils
from kiln._dynamo.backends.registry import lookup_backend
from kiln._inductor import bisect_controls

BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor")
SUBSYSTEMS = {"aot_eager_decomp_partition": ("decomposition",),
              "inductor": ("passes", "fusion", "lowerings")}


@dataclasses.dataclass
class BisectionResult:
    """What bisect found; backend None when every backend agrees with eager."""

    backend: str = None          # the first backend that crashes or diverges
    failure: str = None          # how: "crash: ..." or "accuracy: ..."
    graph: int = None            # the first graph (in capture order) that fails alone
    graph_count: int = 0         # graphs Dynamo captured
    subsystem: str = None        # "passes", "fusion", "lowerings", "decomposition"
    bisect_number: int = None    # the failing application's number (1-based) within it
    debug_info: str = None       # what that application was (a node and its op, a pass)
    repro_path: str = None       # the minimal standalone repro
    repro_note: str = None       # why no repro was written, when none was

    def __str__(self):
        if self.backend is None:
            return "kiln bisect: every backend agrees with eager (eager, " + ", ".join(BACKENDS[1:]) + ")"
        lines = [f"kiln bisect: the first backend that fails is {self.backend!r} ({self.failure})"]
        if self.graph is not None:
            lines.append(f"  graph: {self.graph} of {self.graph_count} (in capture order) fails alone")
        if self.subsystem is not None:
            where = f", application {self.bisect_number}" if self.bisect_number else ""
            lines.append(f"  subsystem: {self.subsystem}{where}: {self.debug_info}")
        if self.repro_path:
            lines.append(f"  repro: {self.repro_path} (python it: exit status 1 while the bug is there)")
        elif self.repro_note:
            lines.append(f"  no repro written: {self.repro_note}")
        return "\n".join(lines)


class GraphSelector:
    """The backend Dynamo sees during one run: graph `only` (every graph when None) goes to
    `backend`, the others run as captured; each graph and its inputs are kept."""

    def __init__(self, backend, only=None):
        self.backend, self.only, self.graphs = backend, only, []

    def __call__(self, gm, example_inputs):
        index = len(self.graphs)
        self.graphs.append((gm, debug_utils.clone_inputs(example_inputs)))
        if self.only is None or index == self.only:
            return self.backend(gm, example_inputs)
        return gm.forward


class _Program:
    """fn(*args, **kwargs), runnable again and again from the same state."""

    def __init__(self, fn, args, kwargs, rtol, atol):
        fn = _uncompiled(fn)
        self.fn, self.args, self.kwargs, self.rtol, self.atol = fn, args, kwargs, rtol, atol
        self.params = list(fn.parameters()) if isinstance(fn, kiln.nn.Module) else []
        state = fn.state_dict() if isinstance(fn, kiln.nn.Module) else {}
        self.state = {k: v.detach().clone() for k, v in state.items()}
        self.reference = self.run(fn)  # eager; its errors are the user's and propagate

    def run(self, fn):
        if self.state:
            with kiln.no_grad():
                for name, value in self.fn.state_dict().items():
                    value.copy_(self.state[name])
        kiln.manual_seed(0)
        return debug_utils.run_collect(lambda *a: fn(*a, **self.kwargs), debug_utils.clone_inputs(self.args),
                                       self.params)

    def check(self, backend, only=None, prepare=None):
        """(Failure or None, the run's GraphSelector) for one compiled run."""
        from kiln._dynamo import reset
        from kiln._dynamo.eval_frame import optimize

        selector = GraphSelector(lookup_backend(backend), only)
        bisect_controls.reset()
        reset()
        try:
            if prepare is not None:
                prepare()
            compiled = optimize(selector)(self.fn)
            failure = debug_utils.check(lambda: self.run(compiled), lambda: self.reference, self.rtol, self.atol)
        finally:
            bisect_controls.reset()
            reset()
        return failure, selector


def _uncompiled(fn):
    """What kiln.compile was given, for fn that kiln.compile returned (the bisector compiles it
    itself, once per run)."""
    from kiln._dynamo.eval_frame import OptimizedModule

    if isinstance(fn, OptimizedModule):
        return fn._orig_mod
    inner = getattr(fn, "__wrapped__", None)
    if inner is not None and hasattr(fn, "_kiln_callback"):
        return inner
    return fn


def bisect(fn, *args, rtol=debug_utils.RTOL, atol=debug_utils.ATOL, repro_dir=None, minify=True, **kwargs):
    """Finds the first backend, graph and subsystem application under which fn(*args, **kwargs)
    crashes or diverges from eager, and writes a minimal repro into `repro_dir` (default
    ./kiln_bisect). Returns a BisectionResult (print it for a summary). fn runs once per trial
    (a few dozen times), each from the same state; minify=False writes the whole failing graph."""
    program = _Program(fn, args, kwargs, rtol, atol)
    result = BisectionResult()
    for backend in BACKENDS:
        failure, selector = program.check(backend)
        if failure is not None:
            break
    else:
        return result
    result.backend, result.failure, result.graph_count = backend, str(failure), len(selector.graphs)
    for index in range(len(selector.graphs)):
        alone, graph_selector = program.check(backend, only=index)
        if alone is not None:
            result.graph, failure, selector = index, alone, graph_selector
            break
    if result.graph is None:
        result.repro_note = "no graph fails alone (the graphs fail only together)"
        return result
    found = _narrow(program, backend, result.graph)
    if found is not None:
        result.subsystem, result.bisect_number, result.debug_info = found
    gm, inputs = selector.graphs[result.graph]
    try:
        result.repro_path = write_minimal_repro(gm, inputs, backend, failure, repro_dir or "kiln_bisect",
                                                minify=minify, note=str(result), rtol=rtol, atol=atol)
    except NotImplementedError as e:
        result.repro_note = str(e)
    return result


def _narrow(program, backend, graph):
    """(subsystem, application number, what it was) whose turning off makes `graph` pass, or None."""
    def passes(prepare):
        return program.check(backend, only=graph, prepare=prepare)[0] is None

    for subsystem in SUBSYSTEMS.get(backend, ()):
        if subsystem == "passes":
            from kiln._inductor.fx_passes import POST_GRAD_PASSES

            for name, _, _ in POST_GRAD_PASSES:
                if passes(lambda name=name: bisect_controls.disabled_passes.add(name)):
                    return "passes", None, f"the pass {name}"
            continue
        budget = bisect_controls.BUDGETS[subsystem]
        if not passes(lambda: budget.start(0)):
            continue  # the bug stays with this subsystem off: not here
        recorded = []
        if passes(lambda: (budget.start(None), recorded.append(budget.applied))):
            continue  # (the failure did not come back: not deterministic)
        applied = recorded[0]
        good, bad = 0, len(applied)  # the first `good` applications pass, the first `bad` fail
        while bad - good > 1:
            middle = (good + bad) // 2
            if passes(lambda: budget.start(middle)):
                good = middle
            else:
                bad = middle
        return subsystem, bad, _describe(subsystem, applied[bad - 1])
    return None


def _describe(subsystem, what):
    return {"lowerings": f"the lowering of node {what}",
            "fusion": f"fusing node {what} into the kernel that reads it",
            "decomposition": f"the decomposition of {what}"}.get(subsystem, what)


def write_minimal_repro(gm, inputs, backend, failure, folder, *, minify=True, note="", rtol=debug_utils.RTOL,
                        atol=debug_utils.ATOL, filename="repro.py"):
    """The smallest part of `gm` that still shows `failure` under `backend`, written to
    folder/filename; returns its path. Raises NotImplementedError when it cannot be standalone."""
    compile_with = lookup_backend(backend)

    def still_fails(candidate, candidate_inputs):
        def compiled_run():
            compiled = compile_with(candidate, debug_utils.clone_inputs(candidate_inputs))
            return debug_utils.run_collect(lambda *a: compiled(*a), debug_utils.clone_inputs(candidate_inputs))

        eager = debug_utils.run_collect(candidate.forward, debug_utils.clone_inputs(candidate_inputs))
        return failure.same_kind(debug_utils.check(compiled_run, lambda: eager, rtol, atol))

    if minify:
        from kiln._dynamo.repro.minifier import minify as shrink

        gm, inputs = shrink(gm, inputs, still_fails)
    path = os.path.join(os.path.abspath(folder), filename)
    return debug_utils.write_repro(path, gm, inputs, backend=backend, after="dynamo", rtol=rtol, atol=atol,
                                   note=f"A repro written by kiln's compile bisector.\n\n{note}")


# --- driven by tools/compile_bisect.py, through the environment ---------------------------------------
_environment_selector = None


def backend_from_environment(compiler):
    """kiln.compile's backend as tools/compile_bisect.py asks for it in a child process: `compiler`
    itself when KILN_BISECT_BACKEND is unset; None (run eagerly) when it is "none"; else that
    backend for graph KILN_BISECT_GRAPH (every graph when unset), the others run as captured."""
    global _environment_selector
    name = os.environ.get("KILN_BISECT_BACKEND")
    if not name:
        return compiler
    if name == "none":
        return None
    if _environment_selector is None:
        from kiln._dynamo import config

        config.suppress_errors = False  # a failing compile must fail the script, not run eagerly
        graph = os.environ.get("KILN_BISECT_GRAPH")
        _environment_selector = GraphSelector(lookup_backend(name), int(graph) if graph else None)
        subsystem, limit = os.environ.get("KILN_BISECT_SUBSYSTEM"), os.environ.get("KILN_BISECT_LIMIT")
        if subsystem == "passes":
            bisect_controls.disabled_passes.add(limit)
        elif subsystem:
            bisect_controls.BUDGETS[subsystem].start(None if limit in (None, "") else int(limit))
        atexit.register(_record_environment_run, subsystem)
        if os.environ.get("KILN_BISECT_REPRO") and graph:
            _environment_selector.backend = _repro_writing(_environment_selector.backend, name, int(graph))
    return _environment_selector


def _record_environment_run(subsystem):
    path = os.environ.get("KILN_BISECT_RECORD")
    if not path:
        return
    budget = bisect_controls.BUDGETS.get(subsystem or "")
    with open(path, "w") as f:
        json.dump({"graphs": len(_environment_selector.graphs), "applied": budget.applied if budget else []}, f)


def _repro_writing(backend, name, graph):
    """The backend for the one graph under bisection, which first writes that graph's minimal repro
    (KILN_BISECT_REPRO: the folder) for a failure seen directly under the backend."""
    def compile_and_write(gm, example_inputs):
        inputs = debug_utils.clone_inputs(example_inputs)

        def compiled_run():
            compiled = backend(gm, debug_utils.clone_inputs(inputs))
            return debug_utils.run_collect(lambda *a: compiled(*a), debug_utils.clone_inputs(inputs))

        failure = debug_utils.check(compiled_run, lambda: debug_utils.run_collect(
            gm.forward, debug_utils.clone_inputs(inputs)))
        if failure is not None:
            try:
                path = write_minimal_repro(gm, inputs, name, failure, os.environ["KILN_BISECT_REPRO"],
                                           note=f"graph {graph} under {name!r}: {failure}")
                print(f"kiln bisect: wrote {path}", flush=True)
            except NotImplementedError as e:
                print(f"kiln bisect: no repro written: {e}", flush=True)
        return backend(gm, example_inputs)

    return compile_and_write
