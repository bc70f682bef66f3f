"""Gathering and scattering rows by index on CUDA (tensor/cuda/kernels/index.cu): index_select,
embedding and its backward (padding_idx, scale_grad_by_freq, 16-bit floats summed in float),
index_add_, against kiln's CPU kernels (tested against PyTorch in tests/); and indices out of range,
reported by the kernel and raised at the next synchronisation (Note [Device-side errors]), after which
the device keeps working."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F

from cuda_util import ALL, host, needs_kernels

pytestmark = needs_kernels
TOL = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 2e-2, "float16": 2e-3}


def close(got, want, tol=0.0, what=""):
    assert got.device.type == "cuda" and got.dtype == want.dtype and got.shape == want.shape, what
    g, w = got.cpu().double().numpy(), want.double().numpy()
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=str(what))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("index_dtype", [kiln.int64, kiln.int32])
def test_index_select(name, index_dtype):
    x = host(name, (6, 7, 9), 1)
    for dim in [0, 1, 2, -1]:
        idx = kiln.tensor([3, 0, 0, 5, 2], dtype=index_dtype) % x.shape[dim]
        close(x.cuda().index_select(dim, idx.cuda()), x.index_select(dim, idx), what=dim)
    xt = x.transpose(0, 2)
    close(xt.cuda().index_select(1, idx.cuda()), xt.index_select(1, idx), what="non-contiguous self")
    out = kiln.empty(9, 5, 6, dtype=x.dtype, device="cuda").transpose(0, 2)
    kiln.index_select(x.cuda(), 1, idx.cuda(), out=out)
    close(out, x.index_select(1, idx), what="non-contiguous out")
    close(host(name, (), 2).cuda().index_select(0, kiln.tensor([0], device="cuda")), host(name, (), 2).index_select(0, kiln.tensor([0])))


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_embedding_forward_and_backward(name):
    dt = getattr(kiln, name)
    weight = host(name, (50, 33), 3)
    idx = kiln.tensor([[1, 4, 4, 49, 0], [7, 4, 1, 1, 2]])
    for kwargs in [{}, {"padding_idx": 4}, {"scale_grad_by_freq": True}, {"padding_idx": 1, "scale_grad_by_freq": True}]:
        wc = weight.clone().requires_grad_()
        wg = weight.cuda().requires_grad_()
        want = F.embedding(idx, wc, **kwargs)
        got = F.embedding(idx.cuda(), wg, **kwargs)
        close(got, want.detach(), what=("forward", kwargs))
        g = host(name, tuple(want.shape), 4)
        want.backward(g)
        got.backward(g.cuda())
        close(wg.grad, wc.grad, TOL[name], ("backward", kwargs))
    many = kiln.randint(0, 3, (4000,))
    wc, wg = weight.clone().requires_grad_(), weight.cuda().requires_grad_()
    F.embedding(many, wc).sum().backward()
    F.embedding(many.cuda(), wg).sum().backward()
    # thousands of rows summed into three: in float for 16-bit floats, so only the final rounding differs
    close(wg.grad, wc.grad.to(dt), max(TOL[name], 1e-4) * 1500 if name != "float64" else 1e-9, "many repeats")
    assert dt is wg.grad.dtype
    # deterministic (Note [Deterministic embedding backward]): bitwise the same every run, and with an
    # int32 index tensor of several dims
    big = kiln.randint(0, 50, (64, 300), dtype=kiln.int32)
    g = host(name, (64, 300, 33), 5).cuda()
    grads = []
    for _ in range(3):
        w = weight.cuda().requires_grad_()
        F.embedding(big.cuda(), w).backward(g)
        grads.append(w.grad.cpu())
    for other in grads[1:]:
        np.testing.assert_array_equal(other.double().numpy(), grads[0].double().numpy())
    # against sums in float64 rounded once (the CPU's 16-bit kernel rounds every partial sum)
    w64 = weight.double().requires_grad_()
    F.embedding(big.long(), w64).backward(g.cpu().double())
    sum_tol = {"float32": 2e-4, "float64": 1e-10, "float16": 4e-3, "bfloat16": 1.6e-2}[name]
    close(grads[0].cuda(), w64.grad.to(dt), sum_tol, "sorted sums")


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
def test_index_add(name):
    tol = TOL.get(name, 0.0)
    x = host(name, (5, 6, 4), 5)
    for dim, alpha in [(0, 1), (1, 2), (2, 1), (-1, 3)]:
        n = 7
        idx = kiln.tensor([0, 2, 2, 1, 0, 3, 3]) % x.shape[dim]
        src_shape = list(x.shape)
        src_shape[dim] = n
        src = host(name, tuple(src_shape), 6)
        close(x.cuda().index_add(dim, idx.cuda(), src.cuda(), alpha=alpha), x.index_add(dim, idx, src, alpha=alpha),
              tol * 4, (dim, alpha))
    xt = x.transpose(0, 1).cuda()
    want = x.transpose(0, 1).clone().index_add_(0, idx % 6, host(name, (7, 5, 4), 7))
    xt.index_add_(0, (idx % 6).cuda(), host(name, (7, 5, 4), 7).cuda())
    close(xt, want, tol * 4, "non-contiguous self")
    with pytest.raises(NotImplementedError, match="index_add_cuda_"):
        kiln.zeros(3, dtype=kiln.int8, device="cuda").index_add_(0, kiln.tensor([0], device="cuda"),
                                                                 kiln.ones(1, dtype=kiln.int8, device="cuda"))


def test_indices_out_of_range_raise_at_the_next_synchronisation():
    x = kiln.randn(5, 3, device="cuda")
    bad = kiln.tensor([1, 5], device="cuda")
    y = x.index_select(0, bad)  # the launch returns; the kernel reports
    with pytest.raises(IndexError, match=r"index_select\(\): index out of range in self"):
        y.cpu()
    assert kiln.allclose(x.index_select(0, kiln.tensor([4], device="cuda")).cpu(), x.cpu()[4:5]), "the device works on"
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(kiln.tensor([[0, -1]], device="cuda"), x)
        kiln.cuda.synchronize()
    kiln.cuda.synchronize()  # reported once
    w = kiln.zeros(4, 2, device="cuda", requires_grad=True)
    with pytest.raises(IndexError, match="index_add_"):
        kiln.zeros(4, device="cuda").index_add_(0, kiln.tensor([9], device="cuda"), kiln.ones(1, device="cuda"))
        kiln.cuda.current_stream().synchronize()
    F.embedding(kiln.tensor([3, 3], device="cuda"), w).sum().backward()
    assert w.grad.cpu().tolist() == [[0, 0], [0, 0], [0, 0], [2, 2]]


def _cuda_key(key):
    key = key if isinstance(key, tuple) else (key,)
    return tuple(k.cuda() if isinstance(k, kiln.Tensor) else k for k in key)


KEYS = [
    (kiln.tensor([[0, 5], [-1, 2]]),),
    (slice(None), kiln.tensor([1, -2, 1])),
    (kiln.tensor([[0], [5]]), slice(1, 4), kiln.tensor([3, 4, -1])),  # not adjacent: indexed dims go first
    (Ellipsis, kiln.tensor([7, 0])),
    (kiln.tensor([True, False, True, False, False, True]),),
    (1, kiln.tensor([2, 2, 0])),
]


@pytest.mark.parametrize("name", ALL)
def test_advanced_indexing_and_backward(name):
    x = host(name, (6, 7, 8), 20)
    for xs in (x, x.transpose(0, 2).contiguous().transpose(0, 2)):
        for key in KEYS:
            close(xs.cuda()[_cuda_key(key)], xs[key], what=("index", key))
            close(xs.cuda()[key], xs[key], what=("CPU indices", key))
    close(kiln.nonzero(x.cuda()), kiln.nonzero(x), what="nonzero")
    if name in ("float32", "float64"):
        xc, xg = x.clone().requires_grad_(), x.cuda().requires_grad_()
        key = KEYS[0]
        xc[key].pow(2).sum().backward()
        xg[_cuda_key(key)].pow(2).sum().backward()
        close(xg.grad, xc.grad, TOL[name], "backward: repeated rows accumulate")


@pytest.mark.parametrize("name", ALL)
def test_index_put(name):
    x = host(name, (6, 7, 8), 21)
    for key in KEYS[:4]:
        shape = tuple(x[key].shape)
        v = host(name, shape[-1:], 22)  # broadcast over the result
        want = x.clone()
        want[key] = v
        got = x.cuda()
        got[_cuda_key(key)] = v.cuda()
        close(got, want, what=("index_put_", key))  # repeated positions get one value: the same one
    if name in ("float32", "float64", "float16", "bfloat16", "int32", "int64"):
        rows = kiln.tensor([0, 3, 0, 0, 5])
        vals = host(name, (5, 7, 8), 23)
        want = x.clone().index_put_((rows,), vals, accumulate=True)
        got = x.cuda().index_put_((rows.cuda(),), vals.cuda(), accumulate=True)
        close(got, want, TOL.get(name, 0.0) * 4, "accumulate over repeats")
    else:
        with pytest.raises(NotImplementedError, match="accumulation"):
            x.cuda().index_put_((kiln.tensor([0]).cuda(),), x[:1].cuda(), accumulate=True)


@pytest.mark.parametrize("name", ALL)
def test_gather_and_scatter(name):
    x = host(name, (5, 6, 7), 24)
    rng = np.random.default_rng(25)
    for dim in (0, 1, -1):
        size = x.shape[dim]
        shape = list(x.shape)
        shape[dim] = 4
        idx = kiln.tensor(rng.integers(0, size, shape))
        close(kiln.gather(x.cuda(), dim, idx.cuda()), kiln.gather(x, dim, idx), what=("gather", dim))
        src = host(name, tuple(shape), 26)
        perm = kiln.tensor(np.stack([rng.permutation(size)[:4] for _ in range(int(np.prod(shape)) // 4)]))
        unique = perm.reshape([shape[d] for d in range(3) if d != dim % 3] + [4]).movedim(-1, dim).contiguous()
        close(x.cuda().scatter(dim, unique.cuda(), src.cuda()), x.scatter(dim, unique, src), what=("scatter", dim))
        value = True if name == "bool" else 3
        close(x.cuda().scatter(dim, unique.cuda(), value), x.scatter(dim, unique, value), what=("scatter value", dim))
        if name in ("float32", "float64", "int32", "int64"):
            close(x.cuda().scatter_add(dim, idx.cuda(), src.cuda()), x.scatter_add(dim, idx, src), TOL.get(name, 0) * 4,
                  ("scatter_add", dim))
    if name == "float32":
        xc, xg = x.clone().requires_grad_(), x.cuda().requires_grad_()
        idx = kiln.tensor(rng.integers(0, 6, (5, 9, 7)))
        kiln.gather(xc, 1, idx).sum().backward()
        kiln.gather(xg, 1, idx.cuda()).sum().backward()
        close(xg.grad, xc.grad, 1e-6, "gather backward (scatter_add)")


def test_bad_advanced_and_gather_indices_raise_at_the_next_synchronisation():
    x = kiln.randn(5, 3, device="cuda")
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        x[kiln.tensor([1, 9], device="cuda")].cpu()
    with pytest.raises(IndexError, match="index -6 is out of bounds"):
        x[kiln.tensor([-6], device="cuda")] = 1.0
        kiln.cuda.synchronize()
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
        kiln.gather(x, 1, kiln.tensor([[0, 3]], device="cuda")).cpu()
    assert x[kiln.tensor([-1], device="cuda")].cpu().shape == (1, 3), "the device works on"


def test_deterministic_mode_refuses_float_atomics():
    """use_deterministic_algorithms(True): the CUDA kernels that add floats with atomics raise
    PyTorch's RuntimeError (warn with warn_only=True); deterministic ones (embedding's backward, integer
    adds) run."""
    x = kiln.zeros(5, device="cuda")
    idx = kiln.tensor([0, 1, 1], device="cuda")
    src = kiln.ones(3, device="cuda")
    try:
        kiln.use_deterministic_algorithms(True)
        with pytest.raises(RuntimeError, match="index_add_cuda_ does not have a deterministic implementation"):
            x.index_add_(0, idx, src)
        with pytest.raises(RuntimeError, match="scatter_add_cuda_kernel"):
            x.scatter_add_(0, idx, src)
        with pytest.raises(RuntimeError, match="accumulate=True"):
            x.index_put_((idx,), src, accumulate=True)
        kiln.zeros(5, dtype=kiln.int64, device="cuda").index_add_(0, idx, kiln.ones(3, dtype=kiln.int64, device="cuda"))
        w = kiln.ones(4, 3, device="cuda", requires_grad=True)
        F.embedding(idx, w).sum().backward()
        kiln.use_deterministic_algorithms(True, warn_only=True)
        with pytest.warns(UserWarning, match="index_add_cuda_"):
            x.index_add_(0, idx, src)
        assert x.cpu().tolist() == [1.0, 2.0, 0.0, 0.0, 0.0]
    finally:
        kiln.use_deterministic_algorithms(False)
    x.index_add_(0, idx, src)
