"""KILN_REPRO_AFTER=aot: an Inductor crash on an aten graph (forward, backward or inference)
writes a repro of that graph (PyTorch's TORCHDYNAMO_REPRO_AFTER="aot").

compile_fx wraps each of its graph compilers when the variable is set. The repro's source is made
before compiling, as the passes rewrite the graph in place; on a crash it is written to
$KILN_REPRO_DIR/repro_aot.py (default ./kiln_repro), its path printed on stderr, and the error
goes on as without the variable. The script traces the aten graph again (make_fx) and compiles it
with compile_fx_inner under the same options.
"""

import os
import sys

from kiln._dynamo import debug_utils
from kiln._dynamo.repro.after_dynamo import ENV, repro_dir


def wrap_compiler_debug(compile_graph, kind, options):
    """`compile_graph` (gm, example_inputs) -> callable, writing a repro when it raises, if
    KILN_REPRO_AFTER=aot; else itself."""
    if os.environ.get(ENV) != "aot":
        return compile_graph

    def repro_after_aot(gm, example_inputs):
        try:
            source = debug_utils.repro_source(gm, example_inputs, backend="inductor", after="aot",
                                              options=dict(options or {}), kind=kind,
                                              note=f"KILN_REPRO_AFTER=aot: Inductor crashed on this {kind} graph.")
        except NotImplementedError as e:
            source, why = None, str(e)
        try:
            return compile_graph(gm, example_inputs)
        except Exception as e:  # noqa: BLE001 - reported with a repro, then raised as it was
            what = f"{type(e).__name__}: {e}"
            if source is None:
                print(f"kiln: {ENV}=aot: Inductor crashed on an aten {kind} graph ({what}); no repro written: {why}",
                      file=sys.stderr)
                raise
            path = os.path.join(repro_dir(), "repro_aot.py")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(source)
            print(f"kiln: {ENV}=aot: Inductor crashed on an aten {kind} graph ({what}); wrote a repro: {path}",
                  file=sys.stderr)
            raise

    return repro_after_aot
