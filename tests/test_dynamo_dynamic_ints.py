"""Automatic dynamic ints (dynamic_ints.py): an int argument that changes between calls compiles
once more as a symbol, then serves every value; uses that need the value add guards; 0 and 1 stay
constants; dynamic=False recompiles per value. Oracle: eager results, and torch.compile's frame
count on the same programs."""

import pytest

import kiln
from kiln._dynamo.testing import CompileCounter
from conftest import requires_torch
from dynamo_util import close, fresh_dynamo  # noqa: F401 (fresh_dynamo is autouse)


def scale(x, n):
    return x * n + n


def branch(x, n):
    if n > 5:
        return x + n
    return x - n


def unrolled(x, n):
    for i in range(n):
        x = x + i
    return x


def prefix(x, n):
    return x[:n] * n


def run(fn, calls, **compile_kwargs):
    counter = CompileCounter()
    compiled = kiln.compile(fn, backend=counter, **compile_kwargs)
    for args in calls:
        close(compiled(*args), fn(*args))
    return counter.frame_count


X = kiln.arange(12).float()


def test_second_value_makes_the_int_a_symbol():
    assert run(scale, [(X, n) for n in range(2, 12)]) == 2


def test_guards_on_the_symbol_recompile_where_the_value_matters():
    assert run(branch, [(X, n) for n in (2, 3, 4, 7, 8, 9, 3)]) == 3  # 2; then n <= 5; then n > 5
    assert run(unrolled, [(X, n) for n in (2, 3, 4, 5)]) == 4  # range(n) specialises each value


def test_zero_and_one_stay_constants():
    assert run(scale, [(X, 0), (X, 1), (X, 0)]) == 2


def test_dynamic_false_and_true():
    assert run(scale, [(X, n) for n in range(2, 6)], dynamic=False) == 4
    assert run(scale, [(X, n) for n in range(2, 6)], dynamic=True) == 1


def test_with_dynamic_tensor_sizes():
    calls = [(kiln.arange(size).float(), n) for size, n in [(5, 2), (6, 3), (7, 4), (8, 5), (4, 4), (9, 2)]]
    assert run(prefix, calls) == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_backends_take_the_int_input(backend):
    compiled = kiln.compile(scale, backend=backend)
    for n in range(2, 8):
        close(compiled(X, n), scale(X, n))


def test_recompile_log_names_the_int():
    import kiln._dynamo.dynamic_ints as dynamic_ints

    counter = CompileCounter()
    compiled = kiln.compile(scale, backend=counter)
    compiled(X, 2)
    compiled(X, 3)
    state = kiln._dynamo.convert_frame.frame_states[scale.__code__]
    assert state[(dynamic_ints._INT, "L['n']")] == (None, None)  # varied: compiled as a symbol


@requires_torch
def test_frame_counts_match_pytorch():
    import torch
    import torch._dynamo.testing

    for fn, values in [(scale, range(2, 12)), (branch, (2, 3, 4, 7, 8, 9, 3))]:
        torch._dynamo.reset()
        counter = torch._dynamo.testing.CompileCounter()
        compiled = torch.compile(fn, backend=counter)
        for n in values:
            compiled(torch.arange(12).float(), n)
        kiln._dynamo.reset()
        assert run(fn, [(X, n) for n in values]) == counter.frame_count, fn.__name__
