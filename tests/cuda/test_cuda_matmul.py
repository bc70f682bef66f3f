"""mm, bmm and matmul on CUDA through cuBLAS, against float64 products on the host (and against
PyTorch's CUDA result where PyTorch has CUDA, on the H200): dtypes, layouts (transposed, sliced,
expanded batches), empty and degenerate sizes, TF32, and the errors PyTorch raises; addmm, linear and
_addmm_activation with the bias (and ReLU/GELU) in cuBLASLt's epilogue."""

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


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


@needs_cublas
@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_addmm_bias_and_activation_epilogues(name):
    """addmm with a vector bias (beta 1) runs as one cuBLASLt GEMM (counted), and equals the float64
    product plus bias; _addmm_activation applies ReLU or the tanh GELU, as PyTorch's CUDA kernel. Odd
    sizes, a transposed weight (linear's layout), an operand at an unaligned offset, alpha != 1."""
    assert kiln._C._cuda_cublaslt_available(), kiln._C._cuda_cublaslt_unavailable_reason()
    rng = np.random.default_rng(7)
    dt = getattr(kiln, name)
    tol = TOL[name] * 4
    for m, k, n in [(64, 32, 48), (37, 129, 65), (2, 3, 2)]:
        a, w, bias = rounded(rand((m, k), rng), name), rounded(rand((n, k), rng), name), rounded(rand(n, rng), name)
        ka, kw, kb = (kiln.tensor(v, dtype=dt).cuda() for v in (a, w, bias))
        for alpha in (1, 0.5):
            before = kiln._C._cuda_cublaslt_gemms()
            got = kiln.addmm(kb, ka, kw.t(), alpha=alpha)
            assert kiln._C._cuda_cublaslt_gemms() == before + 1, "addmm with a vector bias takes the epilogue path"
            want = alpha * (a @ w.T) + bias
            check_value = got.cpu().double().numpy()
            scale = max(1.0, np.abs(want).max())
            assert np.abs(check_value - want).max() / scale <= tol * k ** 0.5, (name, m, k, n, alpha)
        pre = a @ w.T + bias
        for use_gelu, f in ((False, lambda x: np.maximum(x, 0)), (True, gelu_tanh)):
            got = kiln._addmm_activation(kb, ka, kw.t(), use_gelu=use_gelu).cpu().double().numpy()
            want = f(pre)
            # cuBLASLt's GELU epilogue is not accurate to float64's precision (2e-10 measured on the H200)
            act_tol = 1e-9 if (use_gelu and name == "float64") else tol * k ** 0.5
            assert np.abs(got - want).max() / max(1.0, np.abs(want).max()) <= act_tol, (name, use_gelu)
    # an operand at an odd element offset (the heuristic is told its alignment) and an unaligned bias
    # view (the unfused path), then an aligned bias (cuBLASLt)
    big = kiln.tensor(rand((33 * 17 + 1,), rng)).to("cuda", dt)
    x = big[1:].view(33, 17)
    wb = kiln.tensor(rand((19, 17), rng)).to("cuda", dt)
    bb = kiln.tensor(rand((20,), rng)).to("cuda", dt)[1:]
    want = x.cpu().double().numpy() @ wb.cpu().double().numpy().T + bb.cpu().double().numpy()
    got = kiln.addmm(bb, x, wb.t()).cpu().double().numpy()
    assert np.abs(got - want).max() / np.abs(want).max() <= tol * 17 ** 0.5
    before = kiln._C._cuda_cublaslt_gemms()
    got = kiln.addmm(bb.clone(), x, wb.t()).cpu().double().numpy()
    if name in ("float32", "float64"):  # 16-bit operands 2 bytes off may find no algorithm (then cuBLAS)
        assert kiln._C._cuda_cublaslt_gemms() == before + 1, "an operand at an element offset takes cuBLASLt"
    assert np.abs(got - want).max() / np.abs(want).max() <= tol * 17 ** 0.5


@needs_cublas
def test_linear_of_batched_input_is_one_gemm_with_bias_and_its_gradients():
    """nn.Linear on a contiguous [B, T, C] input is flattened to one addmm (PyTorch's
    _flatten_nd_linear), the bias in the epilogue; forward and gradients equal the CPU's."""
    kiln.manual_seed(0)
    lin = kiln.nn.Linear(24, 40)
    x = kiln.randn(3, 5, 24)
    g = kiln.randn(3, 5, 40)
    lin_g = kiln.nn.Linear(24, 40).cuda()
    lin_g.load_state_dict(lin.state_dict())
    xg = x.cuda().requires_grad_()
    xc = x.clone().requires_grad_()
    before = kiln._C._cuda_cublaslt_gemms()
    yg, yc = lin_g(xg), lin(xc)
    assert kiln._C._cuda_cublaslt_gemms() == before + 1
    np.testing.assert_allclose(yg.cpu().detach().numpy(), yc.detach().numpy(), rtol=1e-5, atol=1e-5)
    yg.backward(g.cuda())
    yc.backward(g)
    for got, want in ((xg.grad, xc.grad), (lin_g.weight.grad, lin.weight.grad), (lin_g.bias.grad, lin.bias.grad)):
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
