"""The PEP 523 frame hook (dynamo/eval_frame.h): code replacement, guards, the cache, skipping.

The hook is driven directly through kiln._C._dynamo: a callback sees each frame's code and
arguments at entry and answers None (run as written) or (guard, code); the hook then runs `code`
with the same arguments whenever the guard accepts them. Runs under CPython 3.11 and 3.12.
"""

import asyncio
import contextlib
import threading

import pytest

from kiln._C import _dynamo as D


@contextlib.contextmanager
def hook(callback):
    prev = D.set_eval_frame(callback)
    try:
        yield
    finally:
        D.set_eval_frame(prev)


def replacing(target_fn, new_fn, guard=lambda L: True, seen=None):
    """A callback that swaps target_fn's code for new_fn's, recording the arguments it sees."""
    def callback(code, f_locals, f_globals, f_builtins, fn):
        if code is target_fn.__code__:
            if seen is not None:
                seen.append(dict(f_locals))
            return guard, new_fn.__code__
        return None
    return callback


def sig_orig(x, y=2, *args, k=3, **kw):
    return ("orig", x, y, args, k, kw)


def sig_new(x, y=2, *args, k=3, **kw):
    return ("new", x, y, args, k, kw)


@pytest.fixture(autouse=True)
def clean_cache():
    yield
    for fn in (sig_orig, sig_new):
        D.reset_code(fn.__code__)


def test_replacement_receives_every_argument_form():
    seen = []
    with hook(replacing(sig_orig, sig_new, seen=seen)):
        assert sig_orig(1, 5, 6, 7, k=9, z=1) == ("new", 1, 5, (6, 7), 9, {"z": 1})
        assert sig_orig(2) == ("new", 2, 2, (), 3, {})
    assert seen == [{"x": 1, "y": 5, "args": (6, 7), "k": 9, "kw": {"z": 1}}]  # second call hit the cache
    assert sig_orig(1) == ("orig", 1, 2, (), 3, {})  # hook off: as written


def test_failed_guard_asks_again_and_newest_entry_wins():
    seen = []
    with hook(replacing(sig_orig, sig_new, guard=lambda L: L["x"] > 0, seen=seen)):
        assert sig_orig(1)[0] == "new"
        assert sig_orig(2)[0] == "new"  # hit
        assert sig_orig(-1)[0] == "new"  # miss: a second entry
        assert sig_orig(-2)[0] == "new"  # the second entry's guard also says x > 0: miss again
    assert [s["x"] for s in seen] == [1, -1, -2]
    entries = D._debug_get_cache_entry_list(sig_orig.__code__)
    assert len(entries) == 3 and all(code is sig_new.__code__ for _, code in entries)


def test_none_runs_as_written_and_skip_code_stops_asking():
    asked = []

    def callback(code, f_locals, *rest):
        if code is sig_orig.__code__:
            asked.append(1)
        return None

    with hook(callback):
        assert sig_orig(1)[0] == "orig"
        assert sig_orig(1)[0] == "orig"
        assert len(asked) == 2
        D.skip_code(sig_orig.__code__)
        assert sig_orig(1)[0] == "orig"
        assert len(asked) == 2
        D.reset_code(sig_orig.__code__)
        sig_orig(1)
        assert len(asked) == 3


def test_closures_keep_the_original_cells():
    def make_add(a):
        def inner(x):
            return x + a
        return inner

    def make_mul(a):
        def inner(x):
            return x * a
        return inner

    add10, add20, mul = make_add(10), make_add(20), make_mul(0)
    with hook(replacing(add10, mul)):
        assert add10(3) == 30 and add20(3) == 60  # same code object, each with its own cell
    assert add10(3) == 13


def test_methods_and_recursion_through_the_cache():
    class A:
        def __init__(self, scale):
            self.scale = scale

        def f(self, n):
            return "orig"

    def f_new(self, n):
        return self.scale if n == 0 else self.f(n - 1) + self.scale

    with hook(replacing(A.f, f_new)):
        assert A(2).f(3) == 8  # recursive calls run the cached replacement too
    D.reset_code(A.f.__code__)


def test_generators_and_coroutines_run_as_written():
    def gen(n):
        yield from range(n)

    async def coro():
        return 5

    def callback(code, *rest):
        if code in (gen.__code__, coro.__code__):
            raise AssertionError("generator frames must not reach the callback")
        return None

    with hook(callback):
        assert list(gen(3)) == [0, 1, 2]
        assert asyncio.run(coro()) == 5


def test_callback_code_is_not_intercepted():
    seen_codes = []

    def helper(v):
        return v + 1

    def callback(code, *rest):
        seen_codes.append(code)
        helper(1)  # runs with the hook off for this thread
        return None

    def f():
        return 1

    with hook(callback):
        f()
    assert helper.__code__ not in seen_codes and f.__code__ in seen_codes


def test_errors_propagate():
    def failing_callback(code, *rest):
        if code is sig_orig.__code__:
            raise ValueError("compile failed")
        return None

    with hook(failing_callback):
        with pytest.raises(ValueError, match="compile failed"):
            sig_orig(1)

    def bad_guard(L):
        raise KeyError("guard")

    with hook(replacing(sig_orig, sig_new, guard=bad_guard)):
        sig_orig(1)  # the first call runs the fresh entry without checking its guard
        with pytest.raises(KeyError):
            sig_orig(1)
    D.reset_code(sig_orig.__code__)

    def raising(x, y=2, *args, k=3, **kw):
        raise RuntimeError("inside replacement")

    with hook(replacing(sig_orig, raising)):
        with pytest.raises(RuntimeError, match="inside replacement"):
            sig_orig(1)
    D.reset_code(sig_orig.__code__)

    with hook(lambda code, *rest: "nonsense" if code is sig_orig.__code__ else None):
        with pytest.raises(TypeError, match=r"None or a \(guard, code\) tuple"):
            sig_orig(1)
    with pytest.raises(TypeError):
        D.set_eval_frame(42)
    with pytest.raises(TypeError):
        D.skip_code("not code")


def test_callback_is_per_thread():
    results = {}

    def other():
        results["other"] = sig_orig(1)[0]

    with hook(replacing(sig_orig, sig_new)):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        results["main"] = sig_orig(1)[0]
    assert results == {"other": "orig", "main": "new"}


def test_set_eval_frame_returns_previous():
    def cb(*a):
        return None

    assert D.set_eval_frame(cb) is None
    assert D.set_eval_frame(None) is cb
    assert D.set_eval_frame(None) is None


# -- bytecode decoding (dynamo/bytecode.h) against the dis module ---------------------------------

import dis  # noqa: E402


def _sample_functions():
    def loops(xs, n):
        total = 0
        for i, x in enumerate(xs):
            if x > n:
                continue
            while total < 1000 and x:
                total += x * i
                x -= 1
        return total

    def exceptions(f):
        try:
            return f()
        except (ValueError, KeyError) as e:
            return str(e)
        finally:
            f = None

    def comprehension(xs, k=3, *args, **kw):
        return [y for y in xs if y % k] + [a for a in args] + list(kw)

    def closure(a):
        def inner(b):
            nonlocal a
            a += b
            return a
        return inner

    def many_constants():
        # enough names and constants that some arguments need EXTENDED_ARG prefixes
        return [globals()] + [i for i in range(300)]

    def with_block(path):
        with open(path) as fh:
            return fh.read()

    many = "def big(x):\n" + "".join(f"    v{i} = x + {i}\n" for i in range(300)) + \
        "    if x:\n        return v0\n    return v299\n"
    ns = {}
    exec(many, ns)
    return [loops, exceptions, comprehension, closure, closure(1), many_constants, with_block, ns["big"],
            dis.dis, test_replacement_receives_every_argument_form]


@pytest.mark.parametrize("fn", _sample_functions(), ids=lambda f: f.__name__)
def test_decode_matches_dis(fn):
    code = fn.__code__
    ours = D._decode(code)
    everything = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    theirs = [i for i in everything if i.opname != "EXTENDED_ARG"]
    assert len(ours) == len(theirs)
    # a jump to an instruction with EXTENDED_ARG prefixes lands on its first prefix
    offset_to_index, prefix, index = {}, [], 0
    for t in everything:
        prefix.append(t.offset)
        if t.opname != "EXTENDED_ARG":
            offset_to_index.update((off, index) for off in prefix)
            index, prefix = index + 1, []
    for (op, arg, offset, start, line, target, is_target), t in zip(ours, theirs):
        assert (op, offset) == (t.opcode, t.offset), t
        assert arg == (t.arg if t.arg is not None else 0), t
        if t.starts_line is not None:
            assert line == t.starts_line
        if t.opcode in dis.hasjrel or t.opcode in dis.hasjabs:
            assert target == offset_to_index[t.argval], t
        else:
            assert target == -1
        if not is_target:
            assert not t.is_jump_target, t
