"""Resume functions and liveness (dynamo/resume.h, dynamo/bytecode_analysis.h) through kiln._C._dynamo.

Each case breaks a function after its n-th call, builds the resume code for the next instruction,
feeds it the locals and value stack the original frame had there, and checks that it finishes
with what the original returns (or raises). Runs under CPython 3.11 and 3.12.
"""

import dis
import inspect
import sys
import traceback
import types

import pytest

from kiln._C import _dynamo as D


def after_call(fn, nth):
    """Byte offset of the instruction just after fn's nth CALL (0-based)."""
    ins = list(dis.get_instructions(fn))
    calls = [k for k, i in enumerate(ins) if i.opname == "CALL"]
    return ins[calls[nth] + 1].offset


def offset_of(fn, opname, nth=0, argval=None):
    hits = [i for i in dis.get_instructions(fn) if i.opname == opname and (argval is None or i.argval == argval)]
    return hits[nth].offset


def resume(fn, target, null_mask, stack, local_values, name=None):
    """Calls fn's resume code at `target` with the given state; locals not live are deleted."""
    code = fn.__code__
    live = D._live_locals(code, target)
    assert set(live) <= set(local_values), f"live {live} but only given {sorted(local_values)}"
    dead = [v for v in code.co_varnames if v not in live]
    rc = D._make_resume_code(code, target, null_mask, dead, name or f"resume_in_{fn.__name__}")
    f = types.FunctionType(rc, fn.__globals__, rc.co_name, None, fn.__closure__)
    args = [local_values[v] if v in live else None for v in code.co_varnames]
    return f(*args, tuple(stack))


def h(x):
    return x * 3


def straight(a, b):
    c = a + b
    d = h(c)
    e = d * 2
    return e + a


def test_straight_line():
    target = after_call(straight, 0)
    assert D._live_locals(straight.__code__, target) == ["a"]
    assert resume(straight, target, [False], [h(5 + 7)], {"a": 5}) == straight(5, 7)


def looped(x, n):
    total = 0
    for i in range(n):
        total = total + h(i)
    return total + x


def test_inside_for_loop_with_iterator_on_stack():
    target = after_call(looped, 1)  # after h(i): stack [iterator, total, h(i)]
    assert D._live_locals(looped.__code__, target) == ["x"]
    it = iter(range(6))
    total = 0
    for i in it:
        if i == 2:
            break
        total += h(i)
    assert resume(looped, target, [False, False, False], [it, total, h(2)], {"x": 1}) == looped(1, 6)


def pair(p, q):
    return p, q


def nested(x, y):
    return pair(x, h(y)) + (x,)


def test_inside_nested_expression_with_null_below_callable():
    target = after_call(nested, 0)  # after h(y): stack [NULL, pair, x, h(y)]
    assert D._live_locals(nested.__code__, target) == ["x"]
    got = resume(nested, target, [True, False, False, False], [pair, 4, h(9)], {"x": 4})
    assert got == nested(4, 9)


def make_closure(k):
    def inner(x):
        nonlocal k
        y = h(x)
        k = k + y
        return k

    return inner


def test_with_free_variables():
    inner = make_closure(10)
    assert inner.__code__.co_freevars == ("k",)
    target = after_call(inner, 0)
    got = resume(inner, target, [False], [h(2)], {})
    assert got == 16 and inner.__closure__[0].cell_contents == 16  # STORE_DEREF reached the cell
    assert make_closure(10)(2) == 16


def guarded(x):
    try:
        y = h(x)
        z = 30 // y
    except ZeroDivisionError:
        z = -1
    return z + x


def test_try_except_around_target():
    target = after_call(guarded, 0)
    assert D._live_locals(guarded.__code__, target) == ["x"]
    assert resume(guarded, target, [False], [h(2)], {"x": 2}) == guarded(2)
    assert resume(guarded, target, [False], [h(0)], {"x": 0}) == guarded(0) == -1


def varargs(a, *args, k=1, **kw):
    s = h(a)
    return s, args, k, kw


def test_varargs_become_plain_arguments():
    target = after_call(varargs, 0)
    rc = D._make_resume_code(varargs.__code__, target, [False], ["s"], "r")
    assert rc.co_varnames == ("a", "k", "args", "kw", "s", "___stack")
    assert rc.co_argcount == 6 and not rc.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    f = types.FunctionType(rc, globals())
    assert f(1, 5, (2,), {"z": 1}, None, (h(1),)) == varargs(1, 2, k=5, z=1)


def raiser(x):
    y = h(x)
    z = y + 1
    w = z / 0
    return w


def test_traceback_keeps_original_lines():
    target = after_call(raiser, 0)
    code = raiser.__code__
    rc = D._make_resume_code(code, target, [False], ["y", "z", "w"], "resume_in_raiser")
    assert rc.co_name == rc.co_qualname == "resume_in_raiser"
    assert rc.co_firstlineno == code.co_firstlineno
    f = types.FunctionType(rc, globals())
    with pytest.raises(ZeroDivisionError) as info:
        f(1, None, None, None, (3,))
    frame, line = list(traceback.walk_tb(info.value.__traceback__))[-1]
    assert frame.f_code is rc
    assert line == code.co_firstlineno + 3  # `w = z / 0`
    # Every body instruction keeps its line; the prologue has none.
    body = {i.offset: i.positions for i in dis.get_instructions(code)}
    shift = next(i.offset for i in dis.get_instructions(rc) if i.opname == "JUMP_FORWARD") + 2
    for i in dis.get_instructions(rc):
        if i.offset < shift:
            assert i.positions.lineno is None
        elif i.offset - shift in body:
            assert i.positions == body[i.offset - shift]


# ---- liveness ----

def branches(a, b, c):
    if a:
        return b
    return c


def loop_locals(n):
    s = 0
    for i in range(n):
        s += i
    return s


def handler_reads(a, b):
    try:
        a = h(a)
    except ValueError:
        return a + b
    return a


def deleting(x):
    y = x
    del y
    return 1


def test_liveness():
    assert D._live_locals(branches.__code__, 0) == ["a", "b", "c"]
    assert D._live_locals(branches.__code__, offset_of(branches, "LOAD_FAST", argval="b")) == ["b"]
    for_iter = offset_of(loop_locals, "FOR_ITER")
    assert D._live_locals(loop_locals.__code__, for_iter) == ["s"]
    # The handler reads `a` (the value before the failed store) and `b`.
    assert D._live_locals(handler_reads.__code__, after_call(handler_reads, 0)) == ["a", "b"]
    assert D._live_locals(deleting.__code__, offset_of(deleting, "DELETE_FAST")) == ["y"]  # del reads
    assert D._live_locals(deleting.__code__, offset_of(deleting, "DELETE_FAST") + 2) == []


def comprehension(xs):
    out = [x + 1 for x in xs]
    return out, h(0)


def shadowed(xs):
    x = 5
    n = h(len(xs))
    ys = [x * 2 for x in xs]
    return x, ys, n


def test_liveness_comprehension_and_resume_around_it():
    # 3.12 inlines comprehensions: LOAD_FAST_AND_CLEAR saves the outer `x` (a read, though unbound
    # here: callers leave such locals unbound through dead_locals) and STORE_FAST restores it.
    inlined = ["x"] if sys.version_info >= (3, 12) else []
    assert D._live_locals(comprehension.__code__, 0) == ["xs"] + inlined
    target = after_call(comprehension, -1)
    assert D._live_locals(comprehension.__code__, target) == []  # `out` is already on the stack
    assert resume(comprehension, target, [False, False], [[1], h(0)], {}) == ([1], 0)
    # The outer `x` survives the comprehension, so it is live before it on both versions.
    target = after_call(shadowed, 1)
    assert D._live_locals(shadowed.__code__, target) == ["xs", "x"]
    assert resume(shadowed, target, [False], [h(2)], {"xs": [1, 2], "x": 5}) == shadowed([1, 2])


# ---- errors ----

def cells(x):
    return lambda: x


def gen(x):
    yield x


def test_errors_name_the_argument():
    code = straight.__code__
    with pytest.raises(TypeError, match="code must be a code object"):
        D._make_resume_code(straight, 0, [], [], "r")
    with pytest.raises(TypeError, match="target_offset"):
        D._make_resume_code(code, "0", [], [], "r")
    with pytest.raises(ValueError, match="target_offset 3 starts no instruction"):
        D._make_resume_code(code, 3, [], [], "r")
    with pytest.raises(TypeError, match="null_mask must hold bools"):
        D._make_resume_code(code, 0, [1], [], "r")
    with pytest.raises(TypeError, match="dead_locals must hold str"):
        D._make_resume_code(code, 0, [], [1], "r")
    with pytest.raises(ValueError, match="dead_locals names 'nope'"):
        D._make_resume_code(code, 0, [], ["nope"], "r")
    with pytest.raises(TypeError, match="name must be a str"):
        D._make_resume_code(code, 0, [], [], None)
    with pytest.raises(ValueError, match="cell variables"):
        D._make_resume_code(cells.__code__, 0, [], [], "r")
    with pytest.raises(ValueError, match="generator"):
        D._make_resume_code(gen.__code__, 0, [], [], "r")
    with pytest.raises(TypeError, match="_live_locals: code must be a code object"):
        D._live_locals(1, 0)
    with pytest.raises(ValueError, match="offset 1 starts no instruction"):
        D._live_locals(code, 1)


# ---- EXTENDED_ARG: long bodies, many locals, many constants ----

def make(source, name, **ns):
    ns = dict(ns, h=h)
    exec(source, ns)
    return ns[name]


def test_extended_args_in_prologue_and_jump():
    # 300 locals (LOAD_FAST ___stack needs a prefix), 300 constants (so does LOAD_CONST), and a
    # target past byte 512 (JUMP_FORWARD needs one too).
    body = "".join(f"    v{i} = {i + 1000}\n" for i in range(300))
    f = make(f"def f(a):\n{body}    r = h(a)\n    return r + v0 + v299 + a\n", "f")
    target = after_call(f, 0)
    assert target > 512 and len(f.__code__.co_varnames) == 302
    values = {f"v{i}": i + 1000 for i in range(300)} | {"a": 2}
    assert resume(f, target, [False], [h(2)], values) == f(2)
    rc = D._make_resume_code(f.__code__, target, [False], [], "r")
    ops = [i.opname for i in dis.get_instructions(rc)][:8]
    assert "EXTENDED_ARG" in ops


def test_free_variable_past_255_is_refused():
    # 255 locals put the free variable's slot at 255; the new local would need an EXTENDED_ARG.
    names = ", ".join(f"v{i}" for i in range(253))
    src = f"def outer(k):\n    def inner(x, {names}):\n        y = h(x)\n        return y + k\n    return inner\n"
    inner = make(src, "outer")(1)
    assert inner.__code__.co_nlocals == 255  # x, v0..v252, y
    with pytest.raises(ValueError, match="EXTENDED_ARG"):
        D._make_resume_code(inner.__code__, after_call(inner, 0), [False], [], "r")
    # One more local and the slot already has its prefix (256 -> 257): that works.
    names = ", ".join(f"v{i}" for i in range(254))
    src = f"def outer(k):\n    def inner(x, {names}):\n        y = h(x)\n        return y + k\n    return inner\n"
    inner = make(src, "outer")(1)
    assert resume(inner, after_call(inner, 0), [False], [h(2)], {}) == inner(2, *range(254)) == 7


class Base:
    def m(self, x):
        return x + 1


class Derived(Base):
    def m(self, x):
        y = h(x)
        return super().m(y)


def test_zero_argument_super_keeps_self_live():
    fn = Derived.m
    target = after_call(fn, 0)
    assert D._live_locals(fn.__code__, target) == ["self"]  # explicit on 3.12, implicit on 3.11
    assert resume(fn, target, [False], [h(2)], {"self": Derived()}) == Derived().m(2) == 7


class Recorder:
    def __init__(self):
        self.exits = []

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        self.exits.append(kind)
        return True  # swallow


def within(cm, x):
    z = -1
    with cm:
        y = h(x)
        z = 6 // y
    return z


def test_inside_with_block():
    target = after_call(within, 0)  # after h(x): stack [cm.__exit__, h(x)]
    assert D._live_locals(within.__code__, target) == ["z"]  # the handler path keeps the old z
    for x, expected in [(1, 2), (0, -1)]:
        cm = Recorder()
        got = resume(within, target, [False, False], [cm.__exit__, h(x)], {"z": -1})
        assert got == expected == within(Recorder(), x)
        assert cm.exits == [None if x else ZeroDivisionError]


def all_code_objects(module):
    """Every plain function code object under a module (nested ones included)."""
    out, todo = [], [v.__code__ for v in vars(module).values() if isinstance(v, types.FunctionType)]
    for cls in (v for v in vars(module).values() if isinstance(v, type)):
        todo += [v.__code__ for v in vars(cls).values() if isinstance(v, types.FunctionType)]
    while todo:
        code = todo.pop()
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        out.append(code)
    return out


def test_body_is_unchanged_across_the_stdlib():
    """Resume code at every instruction: the body's instructions, positions and handlers are the
    original's, shifted by the prologue."""
    import argparse, json.decoder, textwrap

    checked = 0
    for module in (dis, argparse, json.decoder, textwrap, traceback):
        for code in all_code_objects(module):
            generator_like = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
            if code.co_cellvars or code.co_flags & generator_like:
                continue
            orig = list(dis.get_instructions(code))
            orig_table = dis._parse_exception_table(code)
            for target in {orig[0].offset, orig[len(orig) // 2].offset, orig[-1].offset}:
                D._live_locals(code, target)
                rc = D._make_resume_code(code, target, [False, True], [], "r")
                new = list(dis.get_instructions(rc))
                jump = next(i for i in new if i.opname == "JUMP_FORWARD")
                shift = jump.offset + 2
                assert jump.argval == target + shift
                body = [i for i in new if i.offset >= shift]
                assert [(i.opname, i.offset - shift, i.positions) for i in body] == [
                    (i.opname, i.offset, i.positions) for i in orig]
                # Same arguments (free variables by name); jump targets move with the body.
                assert [i.argval - shift if i.opcode in dis.hasjrel else i.argval for i in body] == [
                    i.argval for i in orig]
                assert [(e.start - shift, e.end - shift, e.target - shift, e.depth, e.lasti)
                        for e in dis._parse_exception_table(rc)] == [
                    (e.start, e.end, e.target, e.depth, e.lasti) for e in orig_table]
                checked += 1
    assert checked > 300
