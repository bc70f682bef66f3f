"""A fixed-seed slice of the differential fuzzer, run by tools/test.sh: the first SLICE programs of
seed SEED, each compared in every mode (kiln eager, kiln.compile with eager/aot_eager/inductor,
forward and backward) against PyTorch 2.13, in worker subprocesses (crashes and hangs fail).

The slice was not chosen to dodge failures: a program that hits a known kiln bug is a strict xfail
naming the bug, so it turns into a failure (XPASS) once the bug is fixed; then drop its entry.
Run more with tools/fuzz.py (tests/fuzz/README.md).
"""

import pytest

pytest.importorskip("torch", reason="PyTorch is the oracle and is only installed for Python 3.11")

from fuzz import driver  # noqa: E402
from fuzz.worker import BACKENDS  # noqa: E402

SEED = 0
SLICE = 40

# program index -> the kiln bug it hits (issue 16 or a repro in tests/fuzz/README.md).
KNOWN = {}


@pytest.fixture(scope="module")
def slice_results():
    results = driver.run_range(SEED, 0, SLICE, BACKENDS, timeout=120)
    return {r["index"]: r for r in results}


@pytest.mark.parametrize("index", [
    pytest.param(i, marks=pytest.mark.xfail(strict=True, reason=KNOWN[i])) if i in KNOWN else i
    for i in range(SLICE)])
def test_fuzz_program(slice_results, index):
    r = slice_results[index]
    problems = "\n".join(f"  {mode}: {p}" for mode, ps in r["failures"].items() for p in ps)
    assert r["status"] == "ok", f"program {index} ({r['status']}):\n{problems}\n{r['detail']}\n{r['source']}"
