"""Helpers the autograd suites share: run a check on kiln and on torch and compare the outcomes."""

import re

import kiln
from conftest import assert_same, torch


def both(fn):
    """fn(lib) for kiln and torch; returns (kiln result, torch result)."""
    return fn(kiln), fn(torch)


def outcome(fn, lib):
    """fn(lib)'s result, or ("raises", builtin exception class, message)."""
    try:
        return fn(lib)
    except Exception as e:  # noqa: BLE001
        cls = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
        return ("raises", cls, str(e))


def assert_like_torch(fn, match=None):
    """kiln and torch agree on fn: both raise the same builtin class (message matching `match`
    when given), or both return the same values."""
    k, t = outcome(fn, kiln), outcome(fn, torch)
    k_raised = isinstance(k, tuple) and len(k) == 3 and k[0] == "raises"
    t_raised = isinstance(t, tuple) and len(t) == 3 and t[0] == "raises"
    assert k_raised == t_raised, f"kiln: {k}\ntorch: {t}"
    if t_raised:
        assert k[1] is t[1], f"kiln raised {k}, torch {t}"
        if match:
            assert re.search(match, t[2]), f"torch message changed: {t[2]}"
            assert re.search(match, k[2]), f"kiln message: {k[2]}"
        return
    assert_same(k, t)



def t64(lib, data, rg=True):
    return lib.tensor(data, dtype=lib.float64, requires_grad=rg)
