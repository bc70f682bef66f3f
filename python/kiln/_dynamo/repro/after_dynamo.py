"""KILN_REPRO_AFTER=dynamo: a backend that crashes on a Dynamo graph writes a minimal repro
(PyTorch's TORCHDYNAMO_REPRO_AFTER="dynamo").

kiln.compile wraps its backend when the variable is set. The wrapped backend compiles the graph
and runs it once on copies of its example inputs (AOTAutograd and Inductor compile at a graph's
first call, so a crash there shows only then); a crash is minified (minifier.py) with the same
exception as its test and written to $KILN_REPRO_DIR/repro.py (default ./kiln_repro), its path
printed on stderr, and the error goes on as without the variable (the frame runs eagerly, with a
warning). With KILN_REPRO_LEVEL=4 (PyTorch's TORCHDYNAMO_REPRO_LEVEL=4) a graph whose compiled run
differs from its eager run beyond kiln's tolerance is written too (the program goes on, with the
compiled graph); kiln._dynamo.bisect finds which part of the backend makes it differ.
"""

import os
import sys

from kiln._dynamo import debug_utils

ENV = "KILN_REPRO_AFTER"


def repro_dir():
    return os.environ.get("KILN_REPRO_DIR") or os.path.join(os.getcwd(), "kiln_repro")


def wrap_backend_debug(compiler, backend_name):
    """`compiler`, writing a repro when it crashes, if KILN_REPRO_AFTER=dynamo; else itself."""
    after = os.environ.get(ENV)
    if after not in (None, "", "dynamo", "aot"):
        raise ValueError(f"{ENV} must be 'dynamo' or 'aot', got {after!r}")
    if after != "dynamo":
        return compiler

    accuracy = os.environ.get("KILN_REPRO_LEVEL") == "4"

    def repro_after_dynamo(gm, example_inputs):
        inputs = debug_utils.clone_inputs(example_inputs)
        try:
            with debug_utils.strict_compile():
                compiled = compiler(gm, example_inputs)
                if not accuracy:
                    compiled(*debug_utils.clone_inputs(inputs))
        except Exception as e:  # noqa: BLE001 - reported with a repro, then raised as it was
            inner = getattr(e, "inner_exception", None) or e
            _write(gm, inputs, backend_name, debug_utils.Failure("crash", f"{type(inner).__name__}: {inner}", inner))
            raise
        if accuracy:
            failure = debug_utils.check(
                lambda: debug_utils.run_collect(compiled, debug_utils.clone_inputs(inputs)),
                lambda: debug_utils.run_collect(gm.forward, debug_utils.clone_inputs(inputs)))
            if failure is not None:
                _write(gm, inputs, backend_name, failure)
                if failure.kind == "crash":
                    raise failure.exception
        return compiled

    repro_after_dynamo.__name__ = getattr(compiler, "__name__", "backend")
    return repro_after_dynamo


def _write(gm, inputs, backend_name, failure):
    from kiln._dynamo.compiler_bisector import write_minimal_repro

    what = ("crashed" if failure.kind == "crash" else "diverged from eager") + f" ({failure.detail})"
    if backend_name is None:
        print(f"kiln: {ENV}=dynamo: the backend {what}; no repro written: the backend is a callable, not a "
              "registered name", file=sys.stderr)
        return
    try:
        path = write_minimal_repro(gm, inputs, backend_name, failure, repro_dir(),
                                   note=f"KILN_REPRO_AFTER=dynamo: the {backend_name!r} backend {what}")
    except NotImplementedError as e:
        print(f"kiln: {ENV}=dynamo: the backend {what}; no repro written: {e}", file=sys.stderr)
        return
    print(f"kiln: {ENV}=dynamo: the {backend_name!r} backend {what}; wrote a repro: {path}", file=sys.stderr)
