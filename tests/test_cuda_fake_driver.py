"""Runs tests/cuda against the fake libcuda.so.1 of runtime/cuda/testing (tools/build.sh puts it in
.build/fake_cuda/), in a subprocess: the driver is loaded once per process. On machines without a
GPU this is how CI checks kiln's CUDA host code: loading, contexts, streams, events, the caching
allocator, copies and errors. Two fake devices, so copies between devices run too."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_DIR = os.path.join(ROOT, ".build", "fake_cuda")


@pytest.mark.skipif(not os.path.exists(os.path.join(FAKE_DIR, "libcuda.so.1")),
                    reason="the fake driver is built by tools/build.sh")
def test_cuda_suite_under_the_fake_driver():
    # device memory unreadable from the host, as on a GPU: a host read of it crashes the run here
    env = dict(os.environ, KILN_CUDA_LIB_DIR=FAKE_DIR, KILN_FAKE_CUDA_DEVICES="2", KILN_FAKE_CUDA_GUARD_MEMORY="1",
               PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                           os.path.join(ROOT, "tests", "cuda")], env=env, capture_output=True, text=True, timeout=600)
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and " failed" not in proc.stdout, tail
