"""Integer division of the one quotient that does not fit its dtype, INT_MIN / -1: x86's idiv
traps on it (undefined behaviour in C++), and it killed the process with SIGFPE; the quotient now
wraps to INT_MIN and the remainder is 0, as PyTorch's remainder, floor_divide and fmod give (its
trunc division still traps). Eager and compiled, every integer dtype."""

import pytest

import kiln

LOWEST = {"int64": -2**63, "int32": -2**31, "int16": -2**15, "int8": -2**7}


def _wrap(v, dtype):
    bits = {"int64": 64, "int32": 32, "int16": 16, "int8": 8}[dtype]
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


CASES = {
    "remainder": (lambda a, b: kiln.remainder(a, b), lambda a, b: a - b * (a // b)),
    "floor_divide": (lambda a, b: kiln.floor_divide(a, b), lambda a, b: a // b),
    "fmod": (lambda a, b: kiln.fmod(a, b), lambda a, b: a - b * int(a / b) if abs(a) < 2**53 else 0),
    "div_trunc": (lambda a, b: kiln.div(a, b, rounding_mode="trunc"), lambda a, b: -a if b == -1 else int(a / b)),
    "div_floor": (lambda a, b: kiln.div(a, b, rounding_mode="floor"), lambda a, b: a // b),
    "operators": (lambda a, b: (a // b) + (a % b), lambda a, b: a // b + (a - b * (a // b))),
}


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("dtype", sorted(LOWEST))
@pytest.mark.parametrize("name", sorted(CASES))
def test_lowest_divided_by_minus_one(name, dtype, compiled):
    fn, oracle = CASES[name]
    values, divisors = [LOWEST[dtype], 7, -7, LOWEST[dtype] + 1], [-1, -1, 2, -1]
    a, b = kiln.tensor(values, dtype=getattr(kiln, dtype)), kiln.tensor(divisors, dtype=getattr(kiln, dtype))
    run = kiln.compile(fn, backend="inductor") if compiled else fn
    got = run(a, b)
    assert got.tolist() == [_wrap(oracle(x, y), dtype) for x, y in zip(values, divisors)]
    # by the number -1 (a constant in a compiled kernel)
    assert run(a, -1).tolist() == [_wrap(oracle(x, -1), dtype) for x in values]
