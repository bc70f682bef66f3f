"""mm, bmm and matmul on CUDA through cuBLAS, against float64 products on the host (and against
PyTorch's CUDA result where PyTorch has CUDA, on the H200): dtypes, layouts (transposed, sliced,
expanded batches), empty and degenerate sizes, TF32, and the errors PyTorch raises."""

import numpy as np
import pytest

import kiln

pytestmark = pytest.mark.skipif(not kiln.cuda.is_available(), reason="CUDA is not available")
CUBLAS = kiln.cuda.is_available() and kiln._C._cuda_cublas_available()
needs_cublas = pytest.mark.skipif(not CUBLAS, reason="cuBLAS is not available (the fake driver has none)")

try:
    import torch

    TORCH_CUDA = torch.cuda.is_available()
except ImportError:
    torch, TORCH_CUDA = None, False

TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}


def rand(shape, rng):
    return rng.standard_normal(shape)


def check(got, a64, b64, name, tol=None):
    want = np.matmul(a64, b64)
    g = got.cpu().double().numpy()
    assert g.shape == want.shape
    scale = max(1.0, np.abs(want).max()) if want.size else 1.0
    err = np.abs(g - want).max() / scale if want.size else 0.0
    assert err <= (tol or TOL[name]) * max(1, a64.shape[-1] ** 0.5), (name, err)


def rounded(x, name):
    """x rounded to dtype `name`, as float64 (the product's exact inputs)."""
    return kiln.tensor(x).to(getattr(kiln, name)).double().numpy()


@needs_cublas
@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (64, 32, 16), (129, 257, 65), (5, 1, 3), (1, 64, 1)])
def test_mm_dtypes_and_sizes(name, m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = rounded(rand((m, k), rng), name), rounded(rand((k, n), rng), name)
    dt = getattr(kiln, name)
    got = kiln.mm(kiln.tensor(a, dtype=dt).cuda(), kiln.tensor(b, dtype=dt).cuda())
    assert got.device == kiln.device("cuda:0") and got.dtype == dt and got.is_contiguous()
    check(got, a, b, name)


@needs_cublas
def test_mm_layouts():
    rng = np.random.default_rng(1)
    a, b = rand((40, 24), rng).astype(np.float32), rand((24, 36), rng).astype(np.float32)
    ka, kb = kiln.tensor(a).cuda(), kiln.tensor(b).cuda()
    at, bt = kiln.tensor(a.T.copy()).cuda().t(), kiln.tensor(b.T.copy()).cuda().t()  # column-major views
    for x, y in [(ka, kb), (at, kb), (ka, bt), (at, bt)]:
        check(kiln.mm(x, y), a.astype(np.float64), b.astype(np.float64), "float32")
    big = kiln.tensor(rand((80, 72), rng).astype(np.float32)).cuda()
    x, y = big[::2, :24], big[1:25, ::2]  # strided: copied contiguous first
    check(kiln.mm(x, y), x.cpu().double().numpy(), y.cpu().double().numpy(), "float32")
    check(ka @ kb, a.astype(np.float64), b.astype(np.float64), "float32")


@needs_cublas
@pytest.mark.parametrize("name", ["float32", "float16"])
def test_bmm_and_matmul_batches(name):
    rng = np.random.default_rng(2)
    dt = getattr(kiln, name)
    a, b = rounded(rand((4, 9, 13), rng), name), rounded(rand((4, 13, 6), rng), name)
    ka, kb = kiln.tensor(a, dtype=dt).cuda(), kiln.tensor(b, dtype=dt).cuda()
    check(kiln.bmm(ka, kb), a, b, name)
    check(kiln.bmm(ka.transpose(1, 2).contiguous().transpose(1, 2), kb), a, b, name)
    one = kiln.tensor(b[:1], dtype=dt).cuda().expand(4, 13, 6)  # a batch stride of 0
    check(kiln.bmm(ka, one), a, np.broadcast_to(b[:1], (4, 13, 6)), name)
    check(ka @ kb[0], a, b[0], name)  # 3-d @ 2-d folds into one mm


@needs_cublas
def test_empty_and_zero_contraction():
    z = kiln.mm(kiln.empty(3, 0, device="cuda"), kiln.empty(0, 4, device="cuda"))
    assert z.shape == (3, 4) and kiln.equal(z.cpu(), kiln.zeros(3, 4))
    assert kiln.mm(kiln.empty(0, 5, device="cuda"), kiln.empty(5, 2, device="cuda")).shape == (0, 2)
    assert kiln.bmm(kiln.empty(0, 2, 3, device="cuda"), kiln.empty(0, 3, 4, device="cuda")).shape == (0, 2, 4)


@needs_cublas
def test_tf32_follows_float32_matmul_precision():
    rng = np.random.default_rng(3)
    a, b = rand((256, 512), rng).astype(np.float32), rand((512, 256), rng).astype(np.float32)
    ka, kb = kiln.tensor(a).cuda(), kiln.tensor(b).cuda()
    assert kiln.get_float32_matmul_precision() == "highest" and not kiln.backends.cuda.matmul.allow_tf32
    ieee = kiln.mm(ka, kb).cpu().double().numpy()
    try:
        kiln.backends.cuda.matmul.allow_tf32 = True
        tf32 = kiln.mm(ka, kb).cpu().double().numpy()
    finally:
        kiln.set_float32_matmul_precision("highest")
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(want).max()
    assert np.abs(ieee - want).max() / scale < 1e-5
    assert 1e-5 < np.abs(tf32 - want).max() / scale < 1e-2  # TF32 rounds the inputs to 10 bits


@pytest.mark.skipif(not (CUBLAS and TORCH_CUDA), reason="needs cuBLAS and PyTorch with CUDA (the H200)")
@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_mm_matches_pytorch_cuda(name):
    rng = np.random.default_rng(4)
    a, b = rand((96, 80), rng), rand((80, 112), rng)
    got = kiln.mm(kiln.tensor(a).to("cuda", getattr(kiln, name)), kiln.tensor(b).to("cuda", getattr(kiln, name)))
    want = torch.mm(torch.tensor(a).to("cuda", getattr(torch, name)), torch.tensor(b).to("cuda", getattr(torch, name)))
    g, w = got.cpu().double().numpy(), want.cpu().double().numpy()
    assert np.abs(g - w).max() / np.abs(w).max() <= TOL[name]


def test_mm_errors():
    a = kiln.ones(2, 3, device="cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        kiln.mm(a, kiln.ones(3, 2))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"):
        kiln.mm(a, a)
    if CUBLAS:
        with pytest.raises(NotImplementedError, match="\"addmm_cuda\" not implemented for 'Long'"):
            kiln.mm(kiln.ones(2, 2, dtype=kiln.int64, device="cuda"), kiln.ones(2, 2, dtype=kiln.int64, device="cuda"))
    else:  # the fake driver: cuBLAS cannot load, and the error says so
        with pytest.raises(RuntimeError, match=r"cuBLAS \(libcublas\.so\.13\) could not be loaded"):
            kiln.mm(a, kiln.ones(3, 2, device="cuda"))
