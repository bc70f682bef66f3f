"""What kiln.compile does with code it cannot compile (issue 16): clean graph breaks (data-dependent
output shapes, numpy, devices kiln lacks), breaks that must be logged and counted (try blocks,
captured locals), resumes of resumes, internal compiler errors (one warning, eager fallback), and
the memory a released compiled function leaves behind. Oracle: eager kiln (values, gradients,
exception types and messages); graph counts from CompileCounter and explain."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
from kiln._dynamo.exc import BackendCompilerFailed, Unsupported
from kiln._dynamo.testing import CompileCounter, CompileCounterWithBackend
from dynamo_util import close, fresh_dynamo  # noqa: F401 (fresh_dynamo is autouse)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- data-dependent output shapes: a graph break, as PyTorch's default ---------------------------
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("case", ["mask_index", "nonzero", "masked_select"])
def test_dynamic_output_shape_ops_break_cleanly(backend, case):
    def f(x):
        y = x * 2
        if case == "mask_index":
            z = y[y > 0]
        elif case == "nonzero":
            z = kiln.nonzero(y).to(y.dtype)
        else:
            z = kiln.masked_select(y, y > 0)
        return (z * 3).sum() + y.sum()

    kiln.manual_seed(0)
    base = kiln.randn(6)
    x1, x2 = base.clone().requires_grad_(), base.clone().requires_grad_()
    cnt = CompileCounterWithBackend(backend)
    out = kiln.compile(f, backend=cnt)(x1)
    ref = f(x2)
    close(out, ref)
    out.backward()
    ref.backward()
    close(x1.grad, x2.grad)
    assert cnt.frame_count == 2  # before the op, and after it (the op itself runs eagerly)
    explained = dynamo.explain(f)(base)
    assert explained.graph_break_count == 1
    assert "dynamic output shape" in explained.break_reasons[0].reason


def test_capture_dynamic_output_shape_ops_keeps_one_graph(monkeypatch):
    monkeypatch.setattr(dynamo.config, "capture_dynamic_output_shape_ops", True)
    cnt = CompileCounter()
    x = kiln.tensor([1.0, -2.0, 3.0])
    out = kiln.compile(lambda t: kiln.nonzero(t > 0) + 1, backend=cnt)(x)
    close(out, kiln.nonzero(x > 0) + 1)
    assert cnt.frame_count == 1


def test_int_item_under_capture_scalar_outputs_is_not_a_dynamic_shape_break(monkeypatch):
    monkeypatch.setattr(dynamo.config, "capture_scalar_outputs", True)
    cnt = CompileCounter()
    f = lambda x: kiln.arange(4) * x.sum().item()  # noqa: E731
    x = kiln.tensor([1, 2])
    out = kiln.compile(f, backend=cnt)(x)
    assert out.tolist() == f(x).tolist() and out.dtype == f(x).dtype
    assert cnt.frame_count == 1


# --- numpy on a tensor: a graph break, not an internal NotConstant ----------------------------
def test_numpy_calls_are_graph_breaks():
    def f(x):
        y = x + 1
        arr = np.sin(y.numpy())
        return kiln.from_numpy(arr) * 2 + y

    def g(x):
        return (x * 2).numpy()

    x = kiln.tensor([0.5, 1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no internal-error fallback warning either
        close(kiln.compile(f, backend=CompileCounter())(x), f(x))
        np.testing.assert_allclose(kiln.compile(g, backend=CompileCounter())(x), g(x))
    assert dynamo.explain(f)(x).graph_break_count >= 1


# --- resume functions of resume functions ----------------------------------------------------
def helper(x):
    print("helper")  # a graph break inside a function called twice
    return x + 1


def three_breaks(x):
    x = helper(x * 2)
    x = helper(x * 3)
    print("third")
    return x * 4


def test_three_breaks_with_helper_called_twice(capsys):
    x = kiln.ones(2)
    cnt = CompileCounter()
    close(kiln.compile(three_breaks, backend=cnt)(x), three_breaks(x))
    explained = dynamo.explain(three_breaks)(x)
    assert explained.graph_break_count >= 3 and explained.graph_count >= 4
    close(kiln.compile(three_breaks, backend=cnt)(x), three_breaks(x))  # the cached entries run


# --- whole-frame fallbacks are logged and counted ----------------------------------------------
LOGGED = textwrap.dedent("""
    import kiln
    def in_try(x):
        try:
            y = x + 1
            print("inside")
            return y * 2
        except ValueError:
            return x
    def with_cell(x):
        k = 2
        h = lambda t: t * k
        y = h(x)
        print("brk")
        return y + 1
    x = kiln.ones(2)
    assert kiln.compile(in_try, backend="eager")(x).tolist() == [4.0, 4.0]
    assert kiln.compile(with_cell, backend="eager")(x).tolist() == [3.0, 3.0]
    print("COUNTS", kiln._dynamo.explain(in_try)(x).graph_break_count,
          kiln._dynamo.explain(with_cell)(x).graph_break_count)
""")


def test_whole_frame_fallbacks_are_logged_with_location():
    env = dict(os.environ, KILN_LOGS="graph_breaks", PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", LOGGED], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    err = out.stderr
    assert "the whole frame in_try" in err and "try block" in err
    assert "the whole frame with_cell" in err and "cell variables" in err
    assert "<string>:6" in err and "<string>:14" in err  # the user's lines of the two print() calls
    assert "COUNTS 1 1" in out.stdout


# --- internal errors: one warning naming the user's line, then eager -------------------------
def user_fn(x):
    return x.sin() * 2 + 1


def test_backend_error_falls_back_to_eager_with_one_warning():
    calls = []

    def broken_backend(gm, example_inputs):
        calls.append(1)
        raise RuntimeError("backend exploded")

    compiled = kiln.compile(user_fn, backend=broken_backend)
    x = kiln.ones(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            close(compiled(x), user_fn(x))
    mine = [w for w in caught if "kiln.compile" in str(w.message)]
    assert len(mine) == 1 and len(calls) == 1
    text = str(mine[0].message)
    assert "backend exploded" in text and "user_fn" in text
    assert mine[0].filename == __file__ and mine[0].lineno == user_fn.__code__.co_firstlineno + 1


def test_backend_error_raises_under_fullgraph():
    def broken_backend(gm, example_inputs):
        raise RuntimeError("backend exploded")

    with pytest.raises(BackendCompilerFailed, match="backend exploded"):
        kiln.compile(user_fn, backend=broken_backend, fullgraph=True)(kiln.ones(3))


def test_internal_interpreter_error_falls_back(monkeypatch):
    from kiln._dynamo.symbolic_convert import InstructionTranslatorBase

    def broken(self, inst):
        raise KeyError("interpreter bug")

    monkeypatch.setattr(InstructionTranslatorBase, "BINARY_OP", broken)
    x = kiln.ones(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        close(kiln.compile(user_fn, backend=CompileCounter())(x), user_fn(x))
    mine = [w for w in caught if "kiln.compile" in str(w.message)]
    assert len(mine) == 1 and "interpreter bug" in str(mine[0].message)
    assert mine[0].lineno == user_fn.__code__.co_firstlineno + 1
    with pytest.raises(KeyError, match="interpreter bug"):
        dynamo.reset()
        kiln.compile(user_fn, backend=CompileCounter(), fullgraph=True)(x)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_error_while_tracing_at_the_first_call_falls_back(monkeypatch, backend):
    # Note [Internal errors at the first call]: AOT traces when the graph is first called, after
    # Dynamo's own error handling; an internal error there reached the user
    import kiln._functorch.aot_autograd as aot

    def broken(*args, **kwargs):
        raise AssertionError("tracer bug")

    monkeypatch.setattr(aot, "create_runtime", broken)
    x = kiln.ones(3, requires_grad=True)
    compiled = kiln.compile(user_fn, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            out = compiled(x)
            close(out, user_fn(x))
        out.sum().backward()  # the eager run's graph: a real gradient
    assert x.grad.tolist() == (2 * x.detach().cos()).tolist()
    mine = [w for w in caught if "kiln.compile" in str(w.message)]
    assert len(mine) == 1 and "tracer bug" in str(mine[0].message)
    assert mine[0].filename == __file__ and mine[0].lineno == user_fn.__code__.co_firstlineno
    dynamo.reset()
    with pytest.raises(AssertionError, match="tracer bug"):
        kiln.compile(user_fn, backend=backend, fullgraph=True)(x)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_user_error_at_the_first_call_raises_as_eager(monkeypatch, backend):
    # the graph run as written raises the user's own error, with no warning
    import kiln._functorch.aot_autograd as aot

    def broken(*args, **kwargs):
        raise AssertionError("tracer bug")

    monkeypatch.setattr(aot, "create_runtime", broken)

    def f(a, i):
        return a.index_select(0, i) * 2

    a, i = kiln.ones(3), kiln.tensor([5])
    with pytest.raises(IndexError) as eager:
        f(a, i)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(IndexError) as compiled:
            kiln.compile(f, backend=backend)(a, i)
    assert str(compiled.value) == str(eager.value)


def test_user_errors_still_raise_as_eager():
    def f(a, b):
        return (a @ b).sum()

    a, b = kiln.ones(2, 3), kiln.ones(4, 5)
    with pytest.raises(RuntimeError) as eager:
        f(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a user error is not an internal one: no warning
        with pytest.raises(RuntimeError) as compiled:
            kiln.compile(f, backend="inductor")(a, b)
    assert type(compiled.value) is type(eager.value) and str(compiled.value) == str(eager.value)


# --- devices kiln lacks: raise as eager ----------------------------------------------------
@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("how", ["to", "factory"])
def test_unavailable_device_raises_as_eager(backend, how):
    def f(a):
        if how == "to":
            return a.to("cuda") + 1
        return a + kiln.ones(2, device="cuda")

    with pytest.raises(Exception) as eager:
        kiln.ones(2).to("cuda")
    with pytest.raises(type(eager.value)) as compiled:
        kiln.compile(f, backend=backend)(kiln.ones(2))
    assert str(compiled.value) == str(eager.value)


# --- memory: a released compiled function leaves nothing behind ---------------------------------
@pytest.mark.xfail(sys.version_info >= (3, 12), strict=True,
                   reason="under Python 3.12 a released compiled function and its code object are still "
                          "referenced after gc (the 3.11 leak is fixed; 3.12's holder not yet found)")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_released_compiled_functions_are_freed(backend):
    # measured in a fresh interpreter: in the middle of the suite, caches that other tests filled
    # keep growing during the measurement and were counted as the functions' own
    out = subprocess.run([sys.executable, "-c", RELEASED, backend], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert out.returncode == 0, out.stderr
    freed, globals_left, per_function = out.stdout.split()[-3:]
    assert freed == "True"
    assert globals_left == "0"  # compiled graphs and resume functions left the globals
    assert float(per_function) < 4096, f"{float(per_function):.0f} bytes kept per released compiled function"


RELEASED = """
import contextlib, gc, io, sys, tracemalloc, weakref
import kiln

backend = sys.argv[1]
x = kiln.ones(4)
namespace = {"kiln": kiln}


def make_and_run(i):
    exec(f"def f{i}(x):\\n    y = x * {i} + 1\\n    print('break')\\n    return y.sin()\\n", namespace)
    fn = namespace.pop(f"f{i}")
    compiled = kiln.compile(fn, backend=backend)
    compiled(x)
    compiled(x)
    return weakref.ref(fn), weakref.ref(fn.__code__)


with contextlib.redirect_stdout(io.StringIO()):
    for i in range(5):  # warm up caches that are legitimately shared (kernels, decompositions)
        make_and_run(i)
    gc.collect()
    globals_before = len(namespace)
    tracemalloc.start()
    # the growth from a first batch to a second one is what each function keeps (one-off growth,
    # a cache's first fill or a dict's resize, stays in the first batch)
    refs = [make_and_run(i + 100) for i in range(40)]
    gc.collect()
    first = tracemalloc.get_traced_memory()[0]
    refs += [make_and_run(i + 200) for i in range(40)]
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - first
    tracemalloc.stop()
print(all(f() is None and c() is None for f, c in refs), len(namespace) - globals_before, grown / 40)
"""


def test_whole_frame_fallback_is_translated_once(monkeypatch, capsys):
    from kiln._dynamo import convert_frame

    translations = []
    original = convert_frame._translate

    def counting(*args):
        translations.append(args[1].co_name)
        return original(*args)

    monkeypatch.setattr(convert_frame, "_translate", counting)

    def in_try(x):
        try:
            y = x + 1
            print("inside")
            return y * 2
        except ValueError:
            return x

    compiled = kiln.compile(in_try, backend=CompileCounter())
    for _ in range(3):
        close(compiled(kiln.ones(2)), kiln.full((2,), 4.0))
    assert translations.count("in_try") == 1  # then the code is marked skip: no translation per call
    assert capsys.readouterr().out.count("inside") == 3


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_dead_locals_do_not_leave_the_graph_at_a_break(backend):
    # v2 is dead after the break: as a graph output it joined the backward with a zero tangent,
    # and 0 * its NaN derivative (sqrt of a negative) made the input's gradient NaN (fuzz seed 11)
    def f(x):
        v1 = x.reciprocal()
        v2 = kiln.sqrt(v1)  # noqa: F841 - dead: the point of the test
        if v1.mean().item() > 0:
            return v1 * 2
        return v1 - 1

    grads = []
    for fn in (f, kiln.compile(f, backend=backend)):
        x = kiln.tensor([-1.5, 0.5, -2.0], requires_grad=True)
        fn(x).sum().backward()
        grads.append(x.grad)
    close(grads[1], grads[0])
    assert not grads[1].isnan().any()


def test_super_init_chain_at_a_graph_break_calls_the_base_methods():
    # super().__init__(a) rebuilt after a graph break as `self.__init__` called the subclass's
    # __init__ again (a TypeError, or endless recursion), and a frame value not yet looked at could
    # not be rebuilt at all: every nn.Module.__init__ of a module made in a compiled function fell
    # back to eager with an internal-error warning
    class Base(kiln.nn.Module):
        def __init__(self, a):
            super().__init__()
            self.a = a

    class Child(Base):
        def __init__(self, a, b):
            super().__init__(a)
            self.b = b

    def f(x):
        c = Child(2, 3)
        return x * c.a + c.b

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert kiln.compile(f, backend=CompileCounter())(kiln.ones(2)).tolist() == [5.0, 5.0]


@pytest.mark.parametrize("container", ["numpy", "argument_dict"])
def test_breaking_store_runs_in_python_and_the_rest_compiles(container):
    # `target[key] = value` that breaks the graph runs in the replacement code, as a breaking
    # call does; resumed at the store, the store was traced again in the resume function: there
    # it broke before any tensor op and the rest of the frame ran eagerly (and an in-place change
    # of a split piece stored into went through its synthetic base, fuzz seed 171, program 27365)
    def f(x, target):
        a = x * 2
        target[0] = a.shape[0]
        return a + 1

    counter = CompileCounter()
    compiled = kiln.compile(f, backend=counter)
    target = np.zeros(2) if container == "numpy" else {}
    close(compiled(kiln.ones(3), target), kiln.full((3,), 3.0))
    assert target[0] == 3
    assert counter.frame_count == 2 and counter.op_count == 2  # x * 2, then a + 1 after the store


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_breaking_store_into_a_split_piece_raises_as_in_eager(backend):
    def f(x):
        v = x.log()
        p = v.split(1, 1)[-1]
        p[..., 0] = 0.5
        return v.softmax(-1)

    errors = []
    for fn in (f, kiln.compile(f, backend=backend)):
        with pytest.raises(RuntimeError) as info:
            fn(kiln.rand(4, 3, requires_grad=True).add(1))
        errors.append(str(info.value))
    assert errors[1] == errors[0] and errors[0].startswith("Output 0 of Select is a view and is being modified")
