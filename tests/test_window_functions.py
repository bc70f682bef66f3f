"""kiln's window functions and i0 (kiln/_windows.py) against PyTorch 2.13.

hann_window, hamming_window (alpha, beta), blackman_window, bartlett_window and kaiser_window (beta)
over lengths 0, 1, 2, odd and even, periodic and symmetric, in every floating dtype: shape, dtype and
values (float64 to the last bit, Kaiser's to a few ulps; float32 within an ulp: other cosines),
the default dtype, requires_grad, meta tensors, and aten's errors and messages. i0 (kiln.i0,
Tensor.i0, i0_, out=) on both sides of its branch point at 8, very large and non-finite arguments,
strided inputs, integer inputs and 16-bit floats; float64 gradients against torch's i1-based ones
and gradcheck. A compiled program (inductor, aot_eager) that builds windows and applies i0 equals
eager without a graph break.
"""

import numpy as np
import pytest

import kiln
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]
LENGTHS = [0, 1, 2, 3, 4, 7, 16, 101]
FLOATS = ["float32", "float64", "float16", "bfloat16"]
# per dtype: (rtol, atol); float64 is exact
TOLERANCE = {"float64": (0, 0), "float32": (0, 2.5e-7), "float16": (0, 1e-3), "bfloat16": (0, 8e-3)}


def _both(name, *args, **kwargs):
    """(kiln result, torch result) of the same call; dtype keyword given as a name."""
    dtype = kwargs.pop("dtype", None)
    k = getattr(kiln, name)(*args, **kwargs, **({"dtype": getattr(kiln, dtype)} if dtype else {}))
    t = getattr(torch, name)(*args, **kwargs, **({"dtype": getattr(torch, dtype)} if dtype else {}))
    return k, t


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("periodic", [True, False], ids=["periodic", "symmetric"])
@pytest.mark.parametrize("name", WINDOWS)
def test_windows_match_torch(name, periodic, dtype):
    for length in LENGTHS:
        k, t = _both(name, length, periodic, dtype=dtype)
        # kaiser's float64 values: a few ulps (I0's argument, rounded differently, is amplified by
        # I0's condition number x I1(x) / I0(x), up to beta = 12)
        assert_same(k, t, *((1e-14, 0) if (name, dtype) == ("kaiser_window", "float64") else TOLERANCE[dtype]))
        assert not k.requires_grad and k.is_contiguous()


@pytest.mark.parametrize("name,args", [
    ("hamming_window", (9, True, 0.3)),
    ("hamming_window", (9, False, 0.3, 0.2)),
    ("hamming_window", (8, True, 1.0, -0.75)),
    ("kaiser_window", (9, True, 5.0)),
    ("kaiser_window", (9, False, 0.0)),  # beta 0: all ones
    ("kaiser_window", (12, False, 30.0)),  # I0 beyond 8: the asymptotic branch
    ("kaiser_window", (2, True, 100.0)),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_window_parameters(name, args, dtype):
    k, t = _both(name, *args, dtype=dtype)
    assert_same(k, t, 0, 2.5e-7 if dtype == "float32" else 1e-15)


def test_keyword_arguments_and_default_dtype():
    assert_same(*_both("kaiser_window", 6, beta=5.0, periodic=False))
    assert_same(*_both("hamming_window", 6, False, alpha=0.5, beta=0.25), 0, 2.5e-7)
    saved = kiln.get_default_dtype()
    kiln.set_default_dtype(kiln.float64)
    try:
        for name in WINDOWS:
            assert getattr(kiln, name)(5).dtype == kiln.float64
    finally:
        kiln.set_default_dtype(saved)


@pytest.mark.parametrize("name", WINDOWS)
def test_requires_grad_and_meta(name):
    for length in (0, 1, 6):
        k, t = _both(name, length, requires_grad=True)
        assert k.requires_grad and k.is_leaf and k.grad_fn is None
        assert_same(k.detach(), t.detach(), 0, 2.5e-7)
    meta = getattr(kiln, name)(6, device="meta")
    assert meta.device.type == "meta" and tuple(meta.shape) == (6,) and meta.dtype == kiln.float32


ERRORS = [
    ("hann_window", (-1,), {}),
    ("kaiser_window", (-2,), {}),
    ("bartlett_window", (-3, False), {}),
    ("hann_window", (5,), {"dtype": "int64"}),
    ("hamming_window", (5,), {"dtype": "bool"}),
    ("blackman_window", (5,), {"dtype": "int32", "requires_grad": True}),
    ("kaiser_window", (5,), {"dtype": "uint8"}),
    ("bartlett_window", (5,), {"dtype": "int16", "pin_memory": True}),
    ("hann_window", (5,), {"dtype": "int8", "layout": "strided"}),
    ("hann_window", (5.0,), {}),
]


@pytest.mark.parametrize("name,args,kwargs", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_errors_match_torch(name, args, kwargs):
    def call(lib):
        kw = {key: getattr(lib, v) if key in ("dtype", "layout") else v for key, v in kwargs.items()}
        return getattr(lib, name)(*args, **kw)

    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(type(expected.value)) as got:
        call(kiln)
    assert str(got.value) == str(expected.value)


# --- i0 ----------------------------------------------------------------------------------------------
I0_POINTS = np.concatenate([np.linspace(-40, 40, 801), [0.0, 1e-300, 7.999999, 8.0, 8.000001, -8.000001, 85.0,
                                                          700.0, 709.0, 713.0, np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("dtype", FLOATS)
def test_i0_values(dtype):
    k = kiln.i0(kiln.tensor(I0_POINTS, dtype=getattr(kiln, dtype)))
    t = torch.i0(torch.tensor(I0_POINTS, dtype=getattr(torch, dtype)))
    rtol = {"float64": 2e-15, "float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}[dtype]
    assert_same(k, t, rtol, 0)  # inf where exp overflows and NaN at +-inf, as torch's


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_i0_of_integers_gives_the_default_float(dtype):
    values = [[0, 1], [1, 0]] if dtype == "bool" else [[-3, 0], [5, 12]]
    k = kiln.i0(kiln.tensor(values, dtype=getattr(kiln, dtype)))
    t = torch.i0(torch.tensor(values, dtype=getattr(torch, dtype)))
    assert_same(k, t, 1e-6, 0)


def test_i0_strided_methods_and_out():
    data = np.linspace(-12, 12, 48).reshape(6, 8)
    k, t = kiln.tensor(data).t()[::2], torch.tensor(data).t()[::2]
    assert not k.is_contiguous()
    assert_same(k.i0(), t.i0(), 2e-15, 0)
    k_out, t_out = kiln.empty(3), torch.empty(3)
    assert kiln.i0(k[0, :3], out=k_out) is k_out
    torch.i0(t[0, :3], out=t_out)
    assert_same(k_out, t_out, 2e-15, 0)
    k2, t2 = kiln.tensor(data), torch.tensor(data)
    assert k2.i0_() is k2
    assert_same(k2, t2.i0_(), 2e-15, 0)
    assert_same(kiln.i0_(kiln.tensor([3.0])), torch.i0_(torch.tensor([3.0])))
    for call in (lambda lib: lib.tensor([1, 2]).i0_(),
                 lambda lib: lib.i0(lib.tensor([1.0]), out=lib.empty(1, dtype=lib.int64))):
        with pytest.raises(RuntimeError) as expected:
            call(torch)
        with pytest.raises(RuntimeError, match=f"^{expected.value}$"):
            call(kiln)


def test_i0_gradient():
    points = np.concatenate([np.linspace(-30, 30, 241), [0.0, 7.99, 8.0, 8.01, -8.01]])
    k, t = kiln.tensor(points, requires_grad=True), torch.tensor(points, requires_grad=True)
    grad_out = np.cos(np.arange(points.size))
    kg, = kiln.autograd.grad(kiln.i0(k), k, kiln.tensor(grad_out))
    tg, = torch.autograd.grad(torch.i0(t), t, torch.tensor(grad_out))
    assert_same(kg, tg, 1e-13, 1e-300)  # torch's: i1(x), a series of its own
    x = kiln.tensor([-9.5, -3.0, 0.5, 7.5, 12.0], dtype=kiln.float64, requires_grad=True)
    assert kiln.autograd.gradcheck(kiln.i0, (x,))


# --- compiled -----------------------------------------------------------------------------------------
def _program(x):
    spectrum = x * kiln.hann_window(x.shape[-1], dtype=x.dtype) + kiln.blackman_window(x.shape[-1], False,
                                                                                         dtype=x.dtype)
    tapered = spectrum * kiln.kaiser_window(x.shape[-1], beta=8.0, dtype=x.dtype)
    return kiln.i0(tapered * 4.0) + kiln.hamming_window(x.shape[-1], dtype=x.dtype) * kiln.bartlett_window(
        x.shape[-1], dtype=x.dtype)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_program_matches_eager(backend):
    import kiln._dynamo as dynamo

    x = kiln.tensor(np.linspace(-3, 3, 3 * 16).reshape(3, 16), requires_grad=True)
    eager = _program(x)
    compiled = kiln.compile(_program, backend=backend)(x)
    assert_same(compiled.detach(), eager.detach(), 1e-13, 1e-13)
    g = kiln.tensor(np.sin(np.arange(48.0)).reshape(3, 16))
    assert_same(kiln.autograd.grad(compiled, x, g)[0], kiln.autograd.grad(eager, x, g)[0], 1e-13, 1e-13)
    assert dynamo.explain(_program)(x).graph_break_count == 0
