"""The generated-kernel path's back half: PTX (ISA 7.0 for sm_80, what LLVM 14's NVPTX back end
writes) through nvJitLink to the device's machine code, loaded and launched on the current stream.
The PTX is checked by the local ptxas for sm_90 wherever the toolkit is installed (CI included);
compiling and launching need the GPU."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
PTX = open(os.path.join(HERE, "data", "add_f32.ptx")).read()
CUDA = kiln.cuda.is_available()
NVJITLINK = CUDA and kiln._C._cuda_nvjitlink_available()
PTXAS = shutil.which("ptxas") or ("/usr/local/cuda-13.0/bin/ptxas" if os.path.exists("/usr/local/cuda-13.0/bin/ptxas")
                                  else None)


@pytest.mark.skipif(PTXAS is None, reason="no ptxas (the CUDA toolkit) on this machine")
def test_ptx_assembles_for_sm_90_without_spills(tmp_path):
    src = tmp_path / "k.ptx"
    src.write_text(PTX)
    out = subprocess.run([PTXAS, "-arch=sm_90", "-v", str(src), "-o", str(tmp_path / "k.cubin")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr, out.stderr


@pytest.mark.skipif(not NVJITLINK, reason="needs the GPU and nvJitLink (tools/gpu/test.sh)")
def test_compile_load_and_launch():
    major, minor = kiln.cuda.get_device_capability()
    cubin = kiln._C._cuda_compile_ptx(PTX, major, minor)
    assert cubin[:4] == b"\x7fELF"
    module = kiln._C._CudaModule(0, cubin)
    rng = np.random.default_rng(0)
    n = 1000 * 33 + 7  # not a multiple of the block
    a = kiln.tensor(rng.standard_normal(n).astype(np.float32)).cuda()
    b = kiln.tensor(rng.standard_normal(n).astype(np.float32)).cuda()
    out = kiln.full((n + 5,), float("nan"), device="cuda")  # poisoned; the 5 past n must stay so
    module.launch("kiln_test_add", (n + 255) // 256, 256, [out, a, b, n])
    got = out.cpu().numpy()
    np.testing.assert_array_equal(got[:n], a.cpu().numpy() + b.cpu().numpy())
    assert np.isnan(got[n:]).all()
    with pytest.raises(RuntimeError, match="no kernel named 'missing'"):
        module.launch("missing", 1, 1, [])
    with pytest.raises(RuntimeError, match="kernel argument 1 is a tensor on cpu"):
        module.launch("kiln_test_add", 1, 1, [out, kiln.ones(1), b, 1])


@pytest.mark.skipif(not NVJITLINK, reason="needs the GPU and nvJitLink (tools/gpu/test.sh)")
def test_bad_ptx_raises_with_the_log():
    with pytest.raises(RuntimeError, match="nvJitLink: nvJitLinkAddData failed|nvJitLink: nvJitLinkComplete failed"):
        kiln._C._cuda_compile_ptx(PTX.replace("add.f32", "add.bogus"), *kiln.cuda.get_device_capability())


@pytest.mark.skipif(not CUDA or NVJITLINK, reason="the fake driver's machine has no nvJitLink")
def test_missing_nvjitlink_is_a_typed_error():
    with pytest.raises(RuntimeError, match=r"nvJitLink \(libnvJitLink\.so\.13\) could not be loaded"):
        kiln._C._cuda_compile_ptx(PTX, 9, 0)
