"""native_layer_norm and native_layer_norm_backward against PyTorch 2.13, bit for bit (issues 16
and 19; Note [Layer norm as aten's CPU kernel] in tensor/ops/norm.cc).

kiln repeats the arithmetic of aten's CPU kernels as PyTorch runs them on an AVX2 machine (a
cascaded, vectorized Welford in the op-math type; PyTorch's fused multiply-adds), so y, mean and
rstd, and the input, weight and bias gradients, are PyTorch's exactly: float32 over row lengths
around the register (8 values) and chunk (128) sizes, 1 to 5 rows (and more for the backward),
random data, large offsets, constant rows and close values, with and without weight and bias,
non-contiguous inputs and several normalized dims; float64, float16 and bfloat16 (with float32
parameters too, PyTorch's "mixed type"); the fuzz programs where cancellation magnifies the last
bits. The weight and bias gradients sum rows into per-thread partials, so they are compared with
both libraries running the same number of threads. Where PyTorch does not run its AVX2 kernels,
the comparisons fall back to tight tolerances.
"""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch

EXACT = torch is not None and torch.backends.cpu.get_cpu_capability() == "AVX2"
DTYPES = ["float32", "float64", "float16", "bfloat16"]
TOL = {"float32": 1e-6, "float64": 1e-14, "float16": 1e-3, "bfloat16": 8e-3}
INT_OF = {"float32": np.int32, "float64": np.int64, "float16": np.int16, "bfloat16": np.int16}
LENGTHS = [1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 128, 129, 1000, 4097]


def name_of(t):
    return str(t.dtype).split(".")[1]


def bits(t):
    """The values' bit patterns (a numpy integer array), for a kiln or torch tensor."""
    t = t.detach().contiguous()
    name = name_of(t)
    if name in ("float16", "bfloat16"):
        lib = kiln if isinstance(t, kiln.Tensor) else torch
        return t.view(lib.int16).numpy()
    return t.numpy().view(INT_OF[name])


def values(t):
    t = t.detach()
    if isinstance(t, torch.Tensor):
        return t.double().numpy()
    return np.array(t.double().tolist(), dtype=np.float64).reshape(tuple(t.shape))  # keeps an empty shape


def assert_same(k, t, what):
    """kiln's tensor is PyTorch's: dtype, shape, and every bit (on AVX2; else within TOL)."""
    if t is None:
        assert k is None, what
        return
    assert name_of(k) == name_of(t), f"{what}: dtype {k.dtype} != {t.dtype}"
    assert tuple(k.shape) == tuple(t.shape), f"{what}: shape {tuple(k.shape)} != {tuple(t.shape)}"
    if EXACT:
        kb, tb = bits(k), bits(t)
        if not np.array_equal(kb, tb):
            ulp = np.abs(kb.astype(np.int64) - tb.astype(np.int64)).max()
            pytest.fail(f"{what}: {int((kb != tb).sum())} of {kb.size} values differ (max {ulp} ulp)")
    else:
        tol = TOL[name_of(t)]
        np.testing.assert_allclose(values(k), values(t), rtol=tol, atol=tol, err_msg=what)


def rows(kind, m, n, rng):
    """m rows of n float64 values: random, a large offset, constant rows, or close values."""
    x = rng.standard_normal((m, n))
    if kind == "offset":
        return x * 0.01 + 1000.0
    if kind == "constant":
        return np.repeat(x[:, :1] * 3, n, axis=1)
    if kind == "close":
        return 2.5 + x * 1e-6
    return x


def pair(data, name):
    """The same values as a kiln and a torch tensor of dtype `name` (rounded once, by torch)."""
    t = torch.from_numpy(np.asarray(data, dtype=np.float64)).to(getattr(torch, name))
    k = kiln.tensor(t.double().numpy()).to(getattr(kiln, name))
    return k, t


def both(lib_args, fn):
    """fn(lib, args) for kiln and torch, args picked from (kiln, torch) pairs."""
    pick = lambda i: [a[i] if isinstance(a, tuple) else a for a in lib_args]  # noqa: E731
    return fn(kiln, pick(0)), fn(torch, pick(1))


def forward(lib, args):
    return lib.ops.aten.native_layer_norm(*args)


def check_forward(x, shape, w, b, eps=1e-5, what=""):
    got, want = both([x, list(shape), w, b, eps], forward)
    for name, k, t in zip(("y", "mean", "rstd"), got, want):
        assert_same(k, t, f"{what} {name}")
    return got, want


def check_backward(x, shape, w, b, mask=None, what="", rng=None):
    (_, km, kr), (_, tm, tr) = check_forward(x, shape, w, b, what=what)
    mask = mask or (True, w is not None, b is not None)
    g = pair(rng.standard_normal(tuple(x[1].shape)), name_of(x[1]))
    got = kiln.ops.aten.native_layer_norm_backward(g[0], x[0], list(shape), km, kr, w and w[0], b and b[0],
                                                   list(mask))
    want = torch.ops.aten.native_layer_norm_backward(g[1], x[1], list(shape), tm, tr, w and w[1], b and b[1],
                                                     list(mask))
    for name, k, t in zip(("grad_input", "grad_weight", "grad_bias"), got, want):
        assert_same(k, t, f"{what} {name}")


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """Both libraries on the same number of threads (the weight and bias gradients depend on it)."""
    old = torch.get_num_threads(), kiln.get_num_threads()
    torch.set_num_threads(request.param)
    kiln.set_num_threads(request.param)
    try:
        if torch.get_num_threads() != kiln.get_num_threads():
            pytest.skip(f"kiln runs {kiln.get_num_threads()} threads here, torch {torch.get_num_threads()}")
        yield request.param
    finally:
        torch.set_num_threads(old[0])
        kiln.set_num_threads(old[1])


@pytest.mark.parametrize("n", LENGTHS)
def test_forward_float32(n):
    rng = np.random.default_rng(n)
    for kind in ("random", "offset", "constant", "close"):
        for m in range(1, 6):
            x = pair(rows(kind, m, n, rng), "float32")
            w, b = pair(rng.standard_normal(n), "float32"), pair(rng.standard_normal(n), "float32")
            for wb in ((None, None), (w, None), (None, b), (w, b)):
                check_forward(x, [n], *wb, what=f"{kind} [{m}, {n}] weight={wb[0] is not None} "
                                                f"bias={wb[1] is not None}")


@pytest.mark.parametrize("n", LENGTHS)
def test_backward_float32(n, threads):
    rng = np.random.default_rng(100 + n)
    for kind in ("random", "offset", "constant"):
        for m in (1, 2, 3, 5, 33):
            x = pair(rows(kind, m, n, rng), "float32")
            w, b = pair(rng.standard_normal(n), "float32"), pair(rng.standard_normal(n), "float32")
            for wb in ((None, None), (w, b)):
                check_backward(x, [n], *wb, what=f"{kind} [{m}, {n}] affine={wb[0] is not None}", rng=rng)


def test_backward_masks(threads):
    rng = np.random.default_rng(7)
    x = pair(rng.standard_normal((6, 37)), "float32")
    w, b = pair(rng.standard_normal(37), "float32"), pair(rng.standard_normal(37), "float32")
    for mask in ((True, False, False), (False, True, False), (False, False, True), (False, True, True)):
        check_backward(x, [37], w, b, mask, what=f"mask {mask}", rng=rng)


LAYOUTS = {
    "transposed": lambda lib, a: lib.tensor(np.ascontiguousarray(a.T)).t(),
    "strided": lambda lib, a: lib.tensor(np.repeat(a, 2, axis=-1))[..., ::2],
    "offset": lambda lib, a: lib.tensor(np.concatenate([a[:1], a]))[1:],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_non_contiguous(layout, threads):
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((7, 19)) + 50).astype(np.float32)
    x = LAYOUTS[layout](kiln, a), LAYOUTS[layout](torch, a)
    if layout == "offset":  # contiguous, at a storage offset
        assert x[0].storage_offset() == x[1].storage_offset() == 19
    else:
        assert not x[0].is_contiguous() and not x[1].is_contiguous()
    wa = rng.standard_normal(19).astype(np.float32)
    w = LAYOUTS["strided"](kiln, wa), LAYOUTS["strided"](torch, wa)  # a strided weight too
    b = pair(rng.standard_normal(19), "float32")
    check_backward(x, [19], w, b, what=layout, rng=rng)


@pytest.mark.parametrize("shape,norm", [((2, 3, 4, 5), (4, 5)), ((3, 5, 7), (3, 5, 7)), ((4, 3, 130), (130,))])
def test_normalized_dims(shape, norm, threads):
    rng = np.random.default_rng(len(shape) * 10 + len(norm))
    x = pair(rng.standard_normal(shape) * 4 + 9, "float32")
    w, b = pair(rng.standard_normal(norm), "float32"), pair(rng.standard_normal(norm), "float32")
    check_backward(x, norm, w, b, what=f"{shape} over {norm}", rng=rng)


@pytest.mark.parametrize("name", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape,norm", [((0, 5), (5,)), ((3, 0), (0,)), ((2, 3, 0), (3, 0)), ((0, 0), (0,))])
def test_empty(shape, norm, name):
    """No rows, or empty rows: PyTorch's mean 0 and rstd NaN for each empty row."""
    x = pair(np.zeros(shape), name)
    w, b = pair(np.ones(norm), name), pair(np.zeros(norm), name)
    check_backward(x, norm, w, b, what=f"{shape} over {norm}", rng=np.random.default_rng(0))


@pytest.mark.parametrize("eps", [0.0, 1e-12, 1e-5, 0.5])
def test_eps(eps):
    rng = np.random.default_rng(3)
    x = pair(np.concatenate([rows("random", 2, 33, rng), rows("constant", 2, 33, rng)]), "float32")
    check_forward(x, [33], None, None, eps, what=f"eps {eps}")


@pytest.mark.parametrize("name", ["float64", "float16", "bfloat16"])
@pytest.mark.parametrize("param", ["same", "float32"])
def test_other_dtypes(name, param, threads):
    if param == "float32" and name == "float64":
        pytest.skip("float64 takes float64 parameters only")
    pname = name if param == "same" else "float32"
    rng = np.random.default_rng(len(name))
    for n in (1, 7, 9, 15, 16, 17, 33, 100, 129, 1000):
        for kind in ("random", "offset", "constant"):
            for m in (1, 3, 40):
                x = pair(rows(kind, m, n, rng), name)
                w, b = pair(rng.standard_normal(n), pname), pair(rng.standard_normal(n), pname)
                for wb in ((None, None), (w, b)) if param == "same" else ((w, b),):
                    check_backward(x, [n], *wb, what=f"{name}/{pname} {kind} [{m}, {n}]", rng=rng)


def test_bfloat16_parameter_gradients_stall_as_pytorchs(threads):
    """aten sums the weight and bias gradients' rows in partials of the input's dtype: in bfloat16
    1000 ones add up to 256 (256 + 1 rounds to 256), in PyTorch and in kiln."""
    x = pair(np.random.default_rng(0).standard_normal((1000, 16)), "bfloat16")
    g = pair(np.ones((1000, 16)), "bfloat16")
    for pname in ("bfloat16", "float32"):
        w, b = pair(np.ones(16), pname), pair(np.zeros(16), pname)
        (_, km, kr), (_, tm, tr) = check_forward(x, [16], w, b)
        got = kiln.ops.aten.native_layer_norm_backward(g[0], x[0], [16], km, kr, w[0], b[0], [True, True, True])
        want = torch.ops.aten.native_layer_norm_backward(g[1], x[1], [16], tm, tr, w[1], b[1], [True, True, True])
        assert_same(got[2], want[2], f"{pname} grad_bias")
        if threads == 1:
            assert got[2].tolist() == [256.0] * 16


def fuzz_cases():
    """The fuzz programs that found the double-precision moments (seed 181): (name, x, weights of
    the summed outputs, body)."""
    return [
        ("26604 log1p(layer_norm(x)) of two values", [2.5103447437286377, 2.0992259979248047], [0.3, -0.7],
         lambda M, x: M.log1p(M.nn.functional.layer_norm(x, (2,)))),
        ("26811 layer_norm(x / x + 3), a constant row",
         [-1.1161657571792603, 1.702053189277649, 2.0706584453582764, -1.9444602727890015], [0.5, -0.25, 0.8, -0.6],
         lambda M, x: M.nn.functional.layer_norm(x / x + 3, (4,))),
        ("22811 layer_norm(x + x.sum()), a large offset",
         [[-1.3544342517852783, -2.323676347732544], [0.48756352066993713, -0.5646969079971313]],
         [[0.5, -0.25], [0.8, -0.6]], lambda M, x: M.nn.functional.layer_norm(x + float(x.detach().sum()), (2,))),
        ("19336 layer_norm(-x) of two close values", [-2.505507469177246, -2.7438604831695557], [0.9, -0.4],
         lambda M, x: M.nn.functional.layer_norm(-x, (2,))),
    ]


@pytest.mark.parametrize("case", fuzz_cases(), ids=lambda c: c[0].split()[0])
def test_fuzz_programs(case):
    what, x, w, body = case
    results = []
    for lib in (kiln, torch):
        leaf = lib.tensor(x, requires_grad=True)
        out = body(lib, leaf)
        (out * lib.tensor(w)).sum().backward()
        results.append((out.detach(), leaf.grad))
    assert_same(results[0][0], results[1][0], f"{what}: value")
    assert_same(results[0][1], results[1][1], f"{what}: gradient")


def test_module_training_step(threads):
    """nn.LayerNorm under autograd: the output and every gradient are PyTorch's."""
    rng = np.random.default_rng(5)
    data = (rng.standard_normal((4, 10, 48)) * 3 + 20).astype(np.float32)
    weight = rng.standard_normal(48).astype(np.float32)
    grads = []
    for lib in (kiln, torch):
        norm = lib.nn.LayerNorm(48)
        with lib.no_grad():
            norm.weight.copy_(lib.tensor(weight))
        x = lib.tensor(data, requires_grad=True)
        y = norm(x)
        (y * y.detach().flip(-1)).sum().backward()
        grads.append((y.detach(), x.grad, norm.weight.grad, norm.bias.grad))
    for name, k, t in zip(("y", "x.grad", "weight.grad", "bias.grad"), *grads):
        assert_same(k, t, name)
