"""kiln.library: operators defined in Python (custom_op, register_fake, register_autograd, Library),
run eagerly, with fake and meta tensors, differentiated, and compiled by every backend without a
graph break; schemas inferred as torch.library infers them."""

import itertools
import typing

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
from kiln._dynamo.testing import CompileCounterWithBackend
from kiln._inductor.utils import run_and_get_code
from conftest import requires_torch, torch

_names = itertools.count()


def fresh(prefix="op"):
    """A namespace no other test used: the registry keeps operators for the life of the process."""
    return f"kiln_test_{prefix}_{next(_names)}"


def close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=tol, atol=tol)


def scale_add_op(ns):
    @kiln.library.custom_op(f"{ns}::scale_add", mutates_args=())
    def scale_add(x: kiln.Tensor, y: kiln.Tensor, alpha: float) -> kiln.Tensor:
        return x * alpha + y

    @scale_add.register_fake
    def _(x, y, alpha):
        return kiln.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[2]

    def backward(ctx, grad):
        return grad * ctx.alpha, grad, None

    scale_add.register_autograd(backward, setup_context=setup_context)
    return scale_add


def test_a_custom_op_is_an_operator_of_the_registry():
    ns = fresh()
    op = scale_add_op(ns)
    x, y = kiln.randn(3, 4), kiln.randn(3, 4)
    close(op(x, y, 2.5), x * 2.5 + y)
    overload = getattr(getattr(kiln.ops, ns), "scale_add").default
    assert overload is op._opoverload
    close(overload(x, y, alpha=-1.0), y - x)
    assert str(overload._schema) == f"{ns}::scale_add(Tensor x, Tensor y, float alpha) -> Tensor"
    assert repr(op) == f"<CustomOpDef({ns}::scale_add)>"
    with pytest.raises(TypeError):
        op(x, y)  # alpha missing: the schema's parser says so


def test_fake_tensors_and_meta_tensors_use_the_fake_function():
    ns = fresh()
    op = scale_add_op(ns)
    meta = op(kiln.empty(5, 2, device="meta"), kiln.empty(5, 2, device="meta"), 1.0)
    assert meta.device.type == "meta" and list(meta.shape) == [5, 2]
    from kiln._subclasses import FakeTensorMode

    with FakeTensorMode() as mode:
        fx = mode.from_tensor(kiln.randn(2, 7))
        out = op(fx, fx, 3.0)
    assert list(out.shape) == [2, 7]

    @kiln.library.custom_op(f"{ns}::no_fake", mutates_args=())
    def no_fake(x: kiln.Tensor) -> kiln.Tensor:
        return x.clone()

    with pytest.raises(NotImplementedError, match="no_fake"):
        no_fake(kiln.empty(3, device="meta"))


def test_register_autograd_gives_the_gradients_it_computes():
    ns = fresh()
    op = scale_add_op(ns)
    x = kiln.randn(4, 3, requires_grad=True)
    y = kiln.randn(4, 3, requires_grad=True)
    out = op(x, y, -0.75)
    assert out.grad_fn is not None
    g = kiln.randn(4, 3)
    out.backward(g)
    close(x.grad, g * -0.75)
    close(y.grad, g)
    # no grad needed: no node
    with kiln.no_grad():
        assert op(x, y, 2.0).grad_fn is None
    assert op(x.detach(), y.detach(), 2.0).grad_fn is None


def test_an_op_without_autograd_refuses_inputs_that_require_grad():
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::twice", mutates_args=())
    def twice(x: kiln.Tensor) -> kiln.Tensor:
        return x * 2

    x = kiln.randn(3, requires_grad=True)
    with pytest.raises(NotImplementedError, match=f"{ns}::twice"):
        twice(x)
    close(twice(x.detach()), x.detach() * 2)


def test_backward_with_the_wrong_number_of_gradients_is_an_error():
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::mul", mutates_args=())
    def mul(x: kiln.Tensor, y: kiln.Tensor) -> kiln.Tensor:
        return x * y

    mul.register_fake(lambda x, y: kiln.empty_like(x))
    mul.register_autograd(lambda ctx, g: g)  # one gradient for two inputs
    x = kiln.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="2 gradients"):
        mul(x, x.detach()).sum().backward()


def test_python_errors_reach_the_caller_as_themselves():
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::picky", mutates_args=())
    def picky(x: kiln.Tensor) -> kiln.Tensor:
        if x.numel() > 3:
            raise ValueError("picky: at most 3 elements")
        return x + 1

    with pytest.raises(ValueError, match="at most 3 elements"):
        picky(kiln.randn(4))

    @kiln.library.custom_op(f"{ns}::wrong", mutates_args=())
    def wrong(x: kiln.Tensor) -> kiln.Tensor:
        return 3

    with pytest.raises(TypeError, match=f"{ns}::wrong.*returned int"):
        wrong(kiln.randn(2))


def test_results_must_not_alias_arguments():
    # as PyTorch's custom operators: Inductor and functionalization take a result as new memory
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::same", mutates_args=())
    def same(x: kiln.Tensor) -> kiln.Tensor:
        return x

    @kiln.library.custom_op(f"{ns}::row", mutates_args=())
    def row(x: kiln.Tensor) -> kiln.Tensor:
        return x[0]

    for op in (same, row):
        with pytest.raises(RuntimeError, match="must not alias its inputs"):
            op(kiln.randn(3, 2))


def test_several_results_and_keyword_arguments():
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::split_scale", mutates_args=())
    def split_scale(x: kiln.Tensor, *, scale: float = 2.0) -> typing.Tuple[kiln.Tensor, kiln.Tensor]:
        return x[:1] * scale, x[1:] * scale

    @split_scale.register_fake
    def _(x, *, scale=2.0):
        return x.new_empty((1, *x.shape[1:])), x.new_empty((x.shape[0] - 1, *x.shape[1:]))

    x = kiln.randn(3, 2)
    a, b = split_scale(x)
    close(a, x[:1] * 2)
    close(b, x[1:] * 2)
    a, b = split_scale(x, scale=-1.0)
    close(b, -x[1:])
    assert "float scale=2." in str(split_scale._opoverload._schema)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled_code_keeps_a_custom_op_as_one_node(backend):
    # no graph break around the op, and compiled forward and gradients equal eager's
    ns = fresh(backend)
    op = scale_add_op(ns)

    def f(x, y):
        h = kiln.relu(x) * 3
        return (op(h, y, 0.5).sin() + 1).sum()

    x0, y0 = kiln.randn(4, 5), kiln.randn(4, 5)
    xe, ye = x0.clone().requires_grad_(), y0.clone().requires_grad_()
    f(xe, ye).backward()
    dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    xc, yc = x0.clone().requires_grad_(), y0.clone().requires_grad_()
    out = kiln.compile(f, backend=counter, fullgraph=True)(xc, yc)
    out.backward()
    assert counter.frame_count == 1
    assert any(str(n.target).endswith(f"{ns}.scale_add.default") or getattr(n.target, "__name__", "") == "scale_add"
               for n in counter.graphs[0].graph.nodes if n.op == "call_function"), counter.graphs[0].graph
    close(out, f(x0, y0), tol=1e-5)
    close(xc.grad, xe.grad, tol=1e-5)
    close(yc.grad, ye.grad, tol=1e-5)


def test_inductor_calls_a_custom_op_between_its_kernels():
    ns = fresh()
    op = scale_add_op(ns)

    def f(x, y):
        return (op(x.exp(), y, 2.0) * 3).relu()

    x, y = kiln.randn(8, 3), kiln.randn(8, 3)
    dynamo.reset()
    out, codes = run_and_get_code(kiln.compile(f), x, y)
    close(out, f(x, y), tol=1e-5)
    code = "\n".join(codes)
    assert f"{ns}.scale_add" in code or f"{ns}::scale_add" in code, code
    assert code.count("cpp_fused") >= 2, code  # exp before it, mul+relu after it


def test_a_mutating_custom_op():
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::add_one_", mutates_args=("x",))
    def add_one_(x: kiln.Tensor) -> None:
        x.add_(1)

    @add_one_.register_fake
    def _(x):
        return None

    assert str(add_one_._opoverload._schema) == f"{ns}::add_one_(Tensor(a0!) x) -> ()"
    x = kiln.zeros(3)
    version = x._version
    assert add_one_(x) is None
    close(x, kiln.ones(3))
    assert x._version > version

    def f(x):
        y = x * 2
        add_one_(y)
        add_one_(x)
        return y

    for backend in ("eager", "aot_eager", "inductor"):
        dynamo.reset()
        xe, xc = kiln.arange(4.0), kiln.arange(4.0)
        want = f(xe)
        got = kiln.compile(f, backend=backend)(xc)
        close(got, want)
        close(xc, xe)


def test_library_define_and_impl():
    ns = fresh("lib")
    lib = kiln.library.Library(ns, "DEF")
    assert lib.define("cube(Tensor x) -> Tensor") == "cube"
    lib.impl("cube", lambda x: x * x * x, "CPU")
    lib._register_fake("cube", lambda x: kiln.empty_like(x))
    x = kiln.randn(5)
    close(getattr(kiln.ops, ns).cube(x), x ** 3, tol=1e-5)
    meta = getattr(kiln.ops, ns).cube.default(kiln.empty(2, device="meta"))
    assert meta.device.type == "meta" and list(meta.shape) == [2]
    with pytest.raises(RuntimeError, match="Only a single"):
        kiln.library.Library(ns, "DEF")
    frag = kiln.library.Library(ns, "FRAGMENT")
    frag.define("cube.scaled(Tensor x, float s) -> Tensor")
    kiln.library.impl(f"{ns}::cube.scaled", "cpu", lambda x, s: x * x * x * s)
    close(getattr(kiln.ops, ns).cube.scaled(x, 2.0), x ** 3 * 2, tol=1e-5)
    with pytest.raises(RuntimeError, match="already defined"):
        frag.define("cube(Tensor x) -> Tensor")
    with pytest.raises(ValueError, match="aten"):
        kiln.library.Library("aten", "DEF")
    with pytest.raises(ValueError, match="unsupported device"):
        kiln.library.register_kernel(f"{ns}::cube", "tpu", lambda x: x)
    kiln.library.define(f"{ns}::neg2", "(Tensor x) -> Tensor")
    kiln.library.register_kernel(f"{ns}::neg2", "cpu", lambda x: -2 * x)
    close(getattr(kiln.ops, ns).neg2(x), -2 * x)
    lib._destroy()


# --- schema inference, against torch.library.infer_schema -----------------------------------------
def _prototypes(T, dtype, device):
    Opt, Seq = typing.Optional, typing.Sequence

    def plain(x: T, n: int, s: float = 1.0, *, flag: bool = False, name: str = "a", o: Opt[T] = None) -> T:
        pass

    def lists(xs: Seq[T], ints: Seq[int], fl: typing.List[float], maybe: Seq[Opt[T]],
              oi: Opt[Seq[int]] = None) -> typing.List[T]:
        pass

    def scalars(x: T, sc: typing.Union[int, float, bool], dt: dtype, dev: device, od: Opt[dtype] = None,
                i: int = -3, e: float = 1e-5, b: Opt[bool] = None) -> typing.Tuple[T, T]:
        pass

    def mutating(x: T, y: T, z: Opt[T] = None) -> None:
        pass

    def one(x: T) -> typing.Tuple[T]:
        pass

    def number(x: T) -> int:
        pass

    return [(plain, ()), (lists, ()), (scalars, ()), (mutating, ("x",)), (mutating, "unknown"),
            (mutating, ("x", "y")), (one, ()), (number, ())]


@requires_torch
def test_infer_schema_matches_pytorch():
    ours = _prototypes(kiln.Tensor, kiln._C.dtype, kiln.device)
    theirs = _prototypes(torch.Tensor, torch.dtype, torch.device)
    for (fk, mk), (ft, mt) in zip(ours, theirs):
        want = torch.library.infer_schema(ft, mutates_args=mt)
        assert kiln.library.infer_schema(fk, mutates_args=mk) == want, fk.__name__
        assert kiln.library.infer_schema(fk, mutates_args=mk, op_name="foo") == "foo" + want


def test_infer_schema_refuses_what_it_cannot_type():
    def untyped(x):
        pass

    def bad_mutates(x: kiln.Tensor) -> kiln.Tensor:
        pass

    def bad_type(x: dict) -> kiln.Tensor:
        pass

    def mutates_int(n: int) -> None:
        pass

    def varargs(*xs: kiln.Tensor) -> None:
        pass

    with pytest.raises(ValueError, match="must have a type annotation"):
        kiln.library.infer_schema(untyped, mutates_args=())
    with pytest.raises(ValueError, match="were not found"):
        kiln.library.infer_schema(bad_mutates, mutates_args=("y",))
    with pytest.raises(ValueError, match="unsupported type"):
        kiln.library.infer_schema(bad_type, mutates_args=())
    with pytest.raises(ValueError, match="only Tensors"):
        kiln.library.infer_schema(mutates_int, mutates_args=("n",))
    with pytest.raises(ValueError, match="varargs"):
        kiln.library.infer_schema(varargs, mutates_args=())
    with pytest.raises(ValueError, match="mutates_args must"):
        kiln.library.infer_schema(bad_mutates, mutates_args="all")


@requires_torch
def test_compiled_custom_op_equals_pytorchs():
    # the same operator defined in both libraries, compiled by both: equal results and gradients
    ns = fresh("vs_torch")

    def define(lib, T):
        @lib.library.custom_op(f"{ns}::softclip", mutates_args=())
        def softclip(x: T, limit: float) -> T:
            return limit * (x / limit).tanh()

        softclip.register_fake(lambda x, limit: x.new_empty(x.shape))

        def setup(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.limit = inputs[1]

        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (1 - (x / ctx.limit).tanh() ** 2), None

        softclip.register_autograd(backward, setup_context=setup)
        return softclip

    k_op, t_op = define(kiln, kiln.Tensor), define(torch, torch.Tensor)
    data = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32) * 3

    def f(lib, op):
        return lambda x: (op(x * 2, 1.5) * x).sum()

    xk = kiln.tensor(data, requires_grad=True)
    xt = torch.tensor(data, requires_grad=True)
    dynamo.reset()
    kiln.compile(f(kiln, k_op))(xk).backward()
    torch.compile(f(torch, t_op), backend="aot_eager")(xt).backward()
    np.testing.assert_allclose(xk.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_opcheck_passes_a_correct_definition_and_names_what_is_wrong():
    ns = fresh("opcheck")
    op = scale_add_op(ns)
    x, y = kiln.randn(3, 4, requires_grad=True), kiln.randn(3, 4)
    assert kiln.library.opcheck(op, (x, y, 1.5)) == {t: "SUCCESS" for t in
                                                     ("test_schema", "test_autograd_registration",
                                                      "test_faketensor", "test_aot_dispatch_dynamic")}

    @kiln.library.custom_op(f"{ns}::sneaky", mutates_args=())
    def sneaky(x: kiln.Tensor) -> kiln.Tensor:
        x.add_(1)  # writes an argument its schema calls read-only
        return x * 2

    sneaky.register_fake(lambda x: kiln.empty_like(x))
    with pytest.raises(RuntimeError, match="changed its argument 'x'"):
        kiln.library.opcheck(sneaky, (kiln.randn(3),))

    @kiln.library.custom_op(f"{ns}::bad_fake", mutates_args=())
    def bad_fake(x: kiln.Tensor) -> kiln.Tensor:
        return x.sum(0)

    bad_fake.register_fake(lambda x: kiln.empty_like(x))  # the wrong shape
    got = kiln.library.opcheck(bad_fake, (kiln.randn(3, 2),), raise_exception=False)
    assert got["test_schema"] == "SUCCESS"
    assert isinstance(got["test_faketensor"], RuntimeError) and "shape" in str(got["test_faketensor"])

    @kiln.library.custom_op(f"{ns}::no_grad_op", mutates_args=())
    def no_grad_op(x: kiln.Tensor) -> kiln.Tensor:
        return x * 3

    no_grad_op.register_fake(lambda x: kiln.empty_like(x))
    with pytest.raises(RuntimeError, match="register_autograd"):
        kiln.library.opcheck(no_grad_op, (kiln.randn(2, requires_grad=True),), test_utils="test_autograd_registration")
    with pytest.raises(ValueError, match="unknown tests"):
        kiln.library.opcheck(no_grad_op, (kiln.randn(2),), test_utils=("test_everything",))


def test_python_kernels_run_as_written_under_a_compile():
    # Note [Python kernels run as written]: while a frame hook is on (a kiln.compile around the
    # call), the op's kernel, fake function, setup_context and backward are never offered to it as
    # frames of their own: a compile would capture them (and fullgraph=True refuse dict.update on ctx)
    ns = fresh("hook")

    @kiln.library.custom_op(f"{ns}::logged", mutates_args=())
    def user_kernel(x: kiln.Tensor) -> kiln.Tensor:
        return x * 2

    def user_fake(x):
        return kiln.empty_like(x)

    def user_setup(ctx, inputs, out):
        ctx.__dict__.update(k=2.0)

    def user_backward(ctx, g):
        return g * ctx.k

    user_kernel.register_fake(user_fake)
    user_kernel.register_autograd(user_backward, setup_context=user_setup)
    offered = []

    def hook(code, *rest):
        offered.append(code.co_name)
        return None

    x = kiln.randn(5, requires_grad=True)
    previous = kiln._C._dynamo.set_eval_frame(hook)
    try:
        y = user_kernel(x.cos())
        user_kernel(kiln.empty(2, device="meta"))
        y.sum().backward()
    finally:
        kiln._C._dynamo.set_eval_frame(previous)
    assert offered, "the hook saw no frame at all: the test tests nothing"
    assert not {"user_kernel", "user_fake", "user_setup", "user_backward"} & set(offered), offered
    close(x.grad, -2 * x.detach().sin(), tol=1e-5)

    counter = CompileCounterWithBackend("inductor")
    dynamo.reset()
    x.grad = None
    kiln.compile(lambda x: user_kernel(x.cos()).sum(), backend=counter, fullgraph=True)(x).backward()
    assert counter.frame_count == 1
    close(x.grad, -2 * x.detach().sin(), tol=1e-5)
    assert kiln.library.opcheck(user_kernel, (kiln.randn(3, requires_grad=True),)) == {
        t: "SUCCESS" for t in ("test_schema", "test_autograd_registration", "test_faketensor",
                               "test_aot_dispatch_dynamic")}
