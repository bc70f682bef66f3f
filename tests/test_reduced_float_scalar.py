"""float16/bfloat16 tensors with a one-element second operand, against PyTorch 2.13 (Note [16-bit
floats times a scalar] in tensor/ops/binary.cc): mul, div and its trunc/floor modes and
floor_divide read a Python number or a 0-d tensor of a wider dtype in float, unrounded; add, sub
and remainder round it to the 16-bit dtype first. Bit-exact, eagerly and compiled. (Fuzz seed 191,
program 27246: fmod's backward divided by a 0-d float64 tensor rounded to bfloat16.)"""

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

OPS = {
    "mul": lambda t, s: t * s,
    "mul_": lambda t, s: t.clone().mul_(s),
    "div": lambda t, s: t / s,
    "div_": lambda t, s: t.clone().div_(s),
    "div_trunc": lambda t, s: t.div(s, rounding_mode="trunc"),
    "div_floor": lambda t, s: t.div(s, rounding_mode="floor"),
    "floor_divide": lambda t, s: t // s,
    "add": lambda t, s: t + s,
    "sub": lambda t, s: t - s,
    "remainder": lambda t, s: t % s,
}
# how the second operand is given: a Python number, or a 0-d tensor of this dtype
WRAPS = [None, "float64", "float32", "same", "int64"]
SCALARS = [0.1234567, -2.7, 3, 1e-3]


def _operand(lib, s, wrap, dtype):
    if wrap is None:
        return s
    if wrap == "int64":
        return lib.tensor(int(s))
    return lib.tensor(s, dtype=dtype if wrap == "same" else getattr(lib, wrap))


def _as_torch(t):
    return torch.from_numpy(t.float().numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("wrap", WRAPS, ids=lambda w: w or "python")
def test_one_element_operand_matches_torch(dtype, op, wrap):
    x = torch.linspace(-300, 300, 997).to(getattr(torch, dtype))  # several vector widths and a tail
    kx = kiln.from_numpy(x.float().numpy()).to(getattr(kiln, dtype))
    for s in SCALARS:
        if wrap == "int64" and not float(s).is_integer():
            continue
        expected = OPS[op](x, _operand(torch, s, wrap, x.dtype))
        got = OPS[op](kx, _operand(kiln, s, wrap, kx.dtype))
        assert str(got.dtype) == str(expected.dtype).replace("torch", "kiln")
        assert torch.equal(_as_torch(got), expected.float()), (op, wrap, s)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_compiled_one_element_operand_matches_eager(backend, dtype):
    def f(x, s64):
        return x * 0.1234567, x / s64, x.div(s64, rounding_mode="trunc"), x.div(-2.7, rounding_mode="floor"), x + 0.1234567

    x = kiln.linspace(-300, 300, 997).to(getattr(kiln, dtype))
    s64 = kiln.tensor(0.1234567, dtype=kiln.float64)
    eager = f(x, s64)
    compiled = kiln.compile(f, backend=backend)(x, s64)
    tx = torch.from_numpy(x.float().numpy()).to(getattr(torch, dtype))
    expected = f(tx, torch.tensor(0.1234567, dtype=torch.float64))
    for e, c, t in zip(eager, compiled, expected):
        assert torch.equal(_as_torch(e), t.float())
        assert torch.equal(_as_torch(c), t.float())


@pytest.mark.parametrize("fn", ["hann_window", "hamming_window", "blackman_window", "bartlett_window"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_windows_round_their_step_like_aten(fn, dtype):
    # aten's window code multiplies by C++ Scalars, rounded to the dtype (unlike a Python number)
    for length in (10, 37, 301):
        expected = getattr(torch, fn)(length, dtype=getattr(torch, dtype))
        assert torch.equal(_as_torch(getattr(kiln, fn)(length, dtype=getattr(kiln, dtype))), expected.float())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_div_trunc_of_two_tensors_rounds_the_quotient_first(dtype):
    # PyTorch's Half/BFloat16 operator/ rounds the float quotient to the 16-bit type before trunc:
    # x / leaky_relu(x, 0.1) is 10 there, not trunc(9.99...) = 9 (fuzz seed 301, program 17650);
    # the floor mode stays in float
    x = kiln.linspace(-3, 3, 601).to(getattr(kiln, dtype))
    tx = torch.from_numpy(x.float().numpy()).to(getattr(torch, dtype))
    for mode in ("trunc", "floor"):
        got = x.div(kiln.nn.functional.leaky_relu(x, 0.1), rounding_mode=mode)
        want = tx.div(torch.nn.functional.leaky_relu(tx, 0.1), rounding_mode=mode)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy(), err_msg=mode)  # 0 / 0 is NaN
