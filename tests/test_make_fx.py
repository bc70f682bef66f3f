"""make_fx (kiln.fx.experimental.proxy_tensor): graphs of aten OpOverloads recorded at the
dispatcher, backward ops included; placeholders named as PyTorch names them; meta values; graphs
rerun on the same and on fresh inputs equal eager; decomposition tables; fake mode."""

import operator

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from kiln.fx.experimental.proxy_tensor import make_fx

from conftest import requires_torch


def rand(*shape, seed=0):
    rng = np.random.default_rng(seed * 7 + sum(shape))
    return kiln.tensor(rng.standard_normal(shape).astype(np.float32).tolist())


def close(a, b, tol=1e-5):
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            close(x, y, tol)
        return
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            close(a[k], b[k], tol)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(np.array(a.tolist()), np.array(b.tolist()), rtol=tol, atol=tol)


def targets(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_small_function_graph():
    def f(x, y):
        return (x + y).relu() * y

    gm = make_fx(f)(rand(3, 4), rand(3, 4, seed=1))
    assert targets(gm) == ["aten.add.Tensor", "aten.relu.default", "aten.mul.Tensor"]
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["x_1", "y_1"]
    for n in gm.graph.nodes:
        if n.op == "call_function":
            assert isinstance(n.target, kiln._ops.OpOverload)
    assert "aten.add.Tensor(x_1, y_1)" in gm.code
    star = make_fx(lambda *a: a[0] + a[1][0])(rand(2), [rand(2)])
    assert [n.name for n in star.graph.nodes if n.op == "placeholder"] == ["arg0_1", "arg1_1"]
    nested = make_fx(lambda x, ys: x + ys[0] + ys[1])(rand(2), [rand(2), rand(2)])
    assert [n.name for n in nested.graph.nodes if n.op == "placeholder"] == ["x_1", "ys_1", "ys_2"]
    x, y = rand(3, 4, seed=2), rand(3, 4, seed=3)
    close(gm(x, y), f(x, y))


def test_output_structure_and_meta_val():
    def f(x):
        a = x.sum(1)
        return {"a": a, "pair": (x.t(), [x * x])}

    x = rand(2, 5)
    gm = make_fx(f)(x)
    close(gm(x), f(x))
    for n in gm.graph.nodes:
        if n.op in ("call_function", "placeholder"):
            val = n.meta["val"]
            assert isinstance(val, kiln.Tensor)
            assert tuple(n.meta["tensor_meta"].shape) == tuple(val.shape)
    sums = [n for n in gm.graph.nodes if str(n.target) == "aten.sum.dim_IntList"]
    assert tuple(sums[0].meta["val"].shape) == (2,)
    assert sums[0].args[1] == [1]


def test_python_numbers_and_constants():
    w = rand(4)

    def f(x):
        return x * 3 + w

    gm = make_fx(f)(rand(2, 4))
    assert [t.split(".")[1] for t in targets(gm)] == ["mul", "add"]
    mul = [n for n in gm.graph.nodes if n.op == "call_function"][0]
    assert mul.args[1] == 3  # the Python number itself, not a tensor constant
    get_attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert [n.target for n in get_attrs] == ["_tensor_constant0"]
    close(gm._tensor_constant0, w)
    x = rand(2, 4, seed=4)
    close(gm(x), f(x))


def test_inplace_ops_are_recorded_in_order():
    def f(x):
        y = x.clone()
        y.add_(1)
        y.mul_(2)
        return y

    gm = make_fx(f)(rand(3))
    assert [t.rsplit(".", 1)[0] for t in targets(gm)] == ["aten.clone", "aten.add_", "aten.mul_"]
    x = rand(3, seed=5)
    close(gm(x), f(x))


def test_multi_output_ops_use_getitem():
    def f(x):
        values, indices = x.max(1)
        return values * 2, indices

    gm = make_fx(f)(rand(3, 4))
    getitems = [n for n in gm.graph.nodes if n.target is operator.getitem]
    assert [n.args[1] for n in getitems] == [0, 1]
    x = rand(3, 4, seed=6)
    close(gm(x), f(x))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.l2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 10))


@pytest.mark.parametrize("make", [MLP, cnn], ids=["mlp", "cnn"])
def test_module_forward(make):
    kiln.manual_seed(0)
    model = make().eval()
    shape = (5, 8) if make is MLP else (3, 1, 8, 8)
    x = kiln.randn(*shape)
    gm = make_fx(model)(x)
    close(gm(x), model(x))
    fresh = kiln.randn(*shape)
    close(gm(fresh), model(fresh))


def test_forward_backward_records_backward_ops():
    kiln.manual_seed(0)
    model = cnn()
    params = list(model.parameters())

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss, [p.grad for p in params]

    x, y = kiln.randn(4, 1, 8, 8), kiln.tensor([1, 2, 3, 0])
    gm = make_fx(step)(x, y)
    t = targets(gm)
    for op in ["aten.convolution_backward.default", "aten.threshold_backward.default",
               "aten.native_batch_norm_backward.default", "aten.max_pool2d_with_indices_backward.default",
               "aten.nll_loss_backward.default", "aten._log_softmax_backward_data.default"]:
        assert op in t, op
    for p in params:
        p.grad = None
    loss_eager, grads_eager = step(x, y)
    with kiln.no_grad():  # the graph holds the backward ops already
        loss_graph, grads_graph = gm(x, y)
    close(loss_graph, loss_eager, 1e-4)
    close(grads_graph, grads_eager, 1e-4)


def test_autograd_grad_inside():
    def f(x):
        y = (x.sin() * x).sum()
        (g,) = kiln.autograd.grad(y, [x])
        return g

    x = rand(5).requires_grad_()
    gm = make_fx(f)(x)
    assert "aten.cos.default" in targets(gm)
    x2 = rand(5, seed=9).requires_grad_()
    close(gm(x2), f(x2))


def test_decomposition_table():
    def relu_decomp(x):
        return kiln.where(x > 0, x, 0.0)

    def f(x):
        return F.relu(x) + 1

    gm = make_fx(f, decomposition_table={kiln.ops.aten.relu.default: relu_decomp})(rand(6))
    t = targets(gm)
    assert "aten.relu.default" not in t
    assert "aten.gt.Scalar" in t
    x = rand(6, seed=10)
    close(gm(x), f(x))


def test_bad_tracing_mode():
    with pytest.raises(AssertionError, match="tracing"):
        make_fx(lambda x: x, tracing_mode="bogus")


def test_symbolic_trace_runs_at_other_sizes():
    def f(x, y):
        z = x.view(x.shape[0] * 2, -1)
        return (z @ y).relu().sum(0), x.shape[0] + 1, x.shape[1] // 2

    gm = make_fx(f, tracing_mode="symbolic")(rand(4, 6), rand(3, 5))
    t = targets(gm)
    assert t.count("aten.sym_size.int") == 2  # one per input dimension used, created once
    sizes = [n for n in gm.graph.nodes if n.target is kiln.ops.aten.sym_size.int]
    assert [n.args[1] for n in sizes] == [0, 1]
    assert all(isinstance(n.meta["val"], kiln.Tensor) for n in gm.graph.nodes if n.target is kiln.ops.aten.mm.default)
    for n, m in [(4, 6), (8, 6), (6, 10), (2, 4)]:
        x, y = rand(n, m, seed=n), rand(m // 2, 5, seed=m)
        got, want = gm(x, y), f(x, y)
        close(got[0], want[0])
        assert got[1:] == want[1:]


def test_symbolic_trace_of_a_training_step():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 10))
    params = dict(model.named_parameters())

    def step(x, target, *ps):
        out = kiln.func.functional_call(model, dict(zip(params, ps)), (x,))
        loss = F.cross_entropy(out, target)
        return (loss,) + kiln.autograd.grad(loss, ps)

    import kiln.func  # noqa: F401
    ps = [p.detach().requires_grad_() for p in params.values()]
    # the batch-norm buffers stay real module state, as with torch's make_fx
    gm = make_fx(step, tracing_mode="symbolic", _allow_non_fake_inputs=True)(
        rand(6, 1, 8, 8), kiln.randint(0, 10, (6,)), *ps)
    assert "aten.sym_size.int" in targets(gm) and "aten.convolution_backward.default" in targets(gm)
    for batch in (6, 3, 11):
        x, tgt = rand(batch, 1, 8, 8, seed=batch), kiln.randint(0, 10, (batch,))
        with kiln.no_grad():  # the graph holds the backward ops themselves
            got = gm(x, tgt, *ps)
        want = step(x, tgt, *ps)
        for a, b in zip(got, want):
            close(a, b, tol=1e-4)


def test_symbolic_size_expressions_become_operator_nodes():
    """Sizes returned by f and sizes built from several symbols (a product, a floor division, a
    remainder, a square, a minimum) become operator nodes over the inputs' sym_size nodes, built
    from the expressions' trees; the graph recomputes them at other sizes."""
    def f(x, y):
        n, m = x.shape
        k = y.shape[0]
        return (x.reshape(n * m), n * m + k, (n + k) // 2, (n * k) % 3, n * n, kiln.sym_min(n, k),
                kiln.sym_max(m, k) - 1)

    gm = make_fx(f, tracing_mode="symbolic")(rand(4, 6), rand(5))
    assert targets(gm).count("aten.sym_size.int") == 3
    for n, m, k in [(4, 6, 5), (2, 3, 7), (7, 2, 2)]:
        x, y = rand(n, m, seed=n), rand(k, seed=k)
        got, want = gm(x, y), f(x, y)
        close(got[0], want[0])
        assert got[1:] == want[1:]


def test_symbolic_sizes_that_come_from_no_input_are_refused():
    def f(x):
        return x.nonzero()

    with pytest.raises(Exception):
        make_fx(f, tracing_mode="symbolic")(rand(5))


@requires_torch
def test_graph_matches_torch_make_fx():
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    def f(lib):
        def g(x, y):
            z = lib.mm(x, y).relu()
            return z.sum(0), lib.cat([z, x], 1)
        return g

    kx, ky = rand(3, 3), rand(3, 3, seed=1)
    ours = make_fx(f(kiln))(kx, ky)
    theirs = torch_make_fx(f(torch))(torch.tensor(kx.tolist()), torch.tensor(ky.tolist()))
    assert targets(ours) == [str(n.target) for n in theirs.graph.nodes if n.op == "call_function"]
    assert [n.name for n in ours.graph.nodes] == [n.name for n in theirs.graph.nodes]


def test_fake_mode_records_without_compute():
    fake_tensor = pytest.importorskip("kiln._subclasses.fake_tensor")

    def f(x, w):
        return (x @ w).relu().sum(1)

    x, w = rand(4, 3), rand(3, 5)
    gm = make_fx(f, tracing_mode="fake")(x, w)
    assert targets(gm) == ["aten.mm.default", "aten.relu.default", "aten.sum.dim_IntList"]
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "call_function"):
            assert isinstance(n.meta["val"], fake_tensor.FakeTensor)
    assert tuple(gm.graph.nodes[-2].meta["val"].shape) == (4,)
    close(gm(x, w), f(x, w))


# --- overloads: the ones PyTorch's tracer records ---------------------------------------------
OVERLOAD_CALLS = [
    ("sum all", lambda T, x: x.sum()), ("sum dtype", lambda T, x: T.sum(x, dtype=T.float64)),
    ("sum dim", lambda T, x: x.sum(0)), ("sum dims keepdim", lambda T, x: x.sum((0, 1), keepdim=True)),
    ("mean all", lambda T, x: x.mean()), ("mean dim", lambda T, x: x.mean(-1)),
    ("std", lambda T, x: x.std()), ("var dim", lambda T, x: x.var(0, unbiased=False)),
    ("amax", lambda T, x: x.amax()), ("max all", lambda T, x: x.max()), ("max dim", lambda T, x: x.max(1)[0]),
    ("prod all", lambda T, x: x.prod()), ("argmax", lambda T, x: x.argmax()), ("any", lambda T, x: (x > 0).any()),
    ("mul tensor", lambda T, x: x * x), ("pow scalar", lambda T, x: x ** 2), ("rpow", lambda T, x: 2 ** x),
    ("clamp", lambda T, x: x.clamp(min=0.5)), ("softmax", lambda T, x: x.softmax(-1)),
    ("transpose", lambda T, x: x.transpose(0, 1)), ("t", lambda T, x: x.t()), ("view", lambda T, x: x.view(-1)),
    ("reshape", lambda T, x: x.reshape(4, 3)), ("flatten", lambda T, x: x.flatten()),
    ("squeeze", lambda T, x: x.unsqueeze(0).squeeze(0)), ("getitem", lambda T, x: x[1:, 0]),
    ("cat", lambda T, x: T.cat([x, x])), ("remainder", lambda T, x: x % 2), ("eq", lambda T, x: x == 1),
    ("lerp", lambda T, x: x.lerp(x, 0.5)), ("masked_fill", lambda T, x: x.masked_fill(x > 0, 1.0)),
    ("rsub", lambda T, x: 1 - x), ("and scalar", lambda T, x: (x > 0) & True),
    # a Python number in add, sub, mul and div binds their Tensor overload as a wrapped number,
    # which the graph records as the number itself (PyTorch has no Python binding of add.Scalar)
    ("add scalar", lambda T, x: x + 1), ("radd", lambda T, x: 1.5 + x), ("add alpha", lambda T, x: x.add(2, alpha=3)),
    ("sub", lambda T, x: x - 1), ("mul", lambda T, x: x * 0.5), ("rmul", lambda T, x: 2 * x),
    ("mul bool", lambda T, x: T.mul(x, True)), ("div", lambda T, x: x / 4), ("true_divide", lambda T, x: T.true_divide(x, 2)),
    ("div mode", lambda T, x: x.div(2, rounding_mode="floor")), ("rdiv", lambda T, x: 2 / x),
    ("floordiv", lambda T, x: x // 2), ("int add", lambda T, x: x.long() + 1), ("int add float", lambda T, x: x.long() + 1.5),
    ("add_", lambda T, x: x.add_(1)), ("sub_", lambda T, x: x.sub_(2)), ("mul_", lambda T, x: x.mul_(2)),
    ("div_", lambda T, x: x.div_(2)), ("rand", lambda T, x: True & (x > 0)),
    # where with numbers: scalar_tensor of the result dtype, the tensor converted to it, where.self
    ("where", lambda T, x: T.where(x > 0, x, 0.0)), ("where self", lambda T, x: T.where(x > 0, 1.0, x)),
    ("where scalars", lambda T, x: T.where(x > 0, 1.0, 0.0)), ("where ints", lambda T, x: T.where(x > 0, 1, 0)),
    ("where promotes", lambda T, x: T.where(x > 0, x.long(), 0.5)), ("where bool", lambda T, x: T.where(x > 0, True, x > 1)),
    ("rfloordiv", lambda T, x: 2 // x),
    # a number first, and the operators: remainder.Scalar_Tensor, __lshift__.Scalar,
    # bitwise_left_shift.Scalar_Tensor, xlogy.Scalar_Other / Scalar_Self, copysign.Scalar / .Tensor
    ("rmod", lambda T, x: 2 % x), ("lshift", lambda T, x: x.long() << 1), ("rlshift", lambda T, x: 1 << x.long()),
    ("rshift", lambda T, x: x.long() >> 1), ("rrshift", lambda T, x: 64 >> x.long().abs()),
    ("lshift tensor", lambda T, x: x.long() << x.long().abs()), ("shifts in place", lambda T, x: x.long().__ilshift__(2)),
    ("xlogy", lambda T, x: T.xlogy(x, 2)), ("rxlogy", lambda T, x: T.xlogy(2, x)),
    ("copysign", lambda T, x: T.copysign(x, -1.0)), ("copysign tensor", lambda T, x: T.copysign(x, x - 1)),
    ("xlogy_", lambda T, x: x.clone().xlogy_(3.0)), ("copysign_", lambda T, x: x.clone().copysign_(-2)),
    ("outer", lambda T, x: T.outer(x[0], x[:, 1])),  # reshape's view of the first vector, as PyTorch's
    # square is PyTorch's composite pow(x, 2); new_* are ops of their own; a tensor literal is a
    # constant followed by lift_fresh_copy (torch.tensor lifts it)
    ("square", lambda T, x: x.square()), ("square_", lambda T, x: x.clone().square_()),
    ("new_zeros", lambda T, x: x.new_zeros(2, 3)), ("new_ones", lambda T, x: x.new_ones((2,), dtype=T.int64)),
    ("new_full", lambda T, x: x.new_full((2, 2), 3.5)), ("new_empty", lambda T, x: x.new_empty(3).fill_(2.0)),
    ("tensor literal", lambda T, x: x + T.tensor([1.0, 2.0, 3.0, 4.0])),
    ("index literal", lambda T, x: x.index_select(0, T.tensor([0, 2]))),
    ("setitem number", lambda T, x: (lambda y: y.__setitem__(0, 1.0) or y)(x.clone())),
]
KNOWN_OVERLOAD_GAPS = {}


def _calls(graph, fx):
    """(target, positional arguments) of each call, a node argument shown as "%"."""
    def arg(a):
        if isinstance(a, fx.Node):
            return "%"
        if isinstance(a, (list, tuple)):
            return [arg(b) for b in a]
        return a if isinstance(a, (bool, int, float)) else str(a)

    return [(str(n.target), [arg(a) for a in n.args]) for n in graph.nodes if n.op == "call_function"]


@requires_torch
@pytest.mark.parametrize("name,fn", [
    pytest.param(n, f, marks=pytest.mark.xfail(strict=True, reason=KNOWN_OVERLOAD_GAPS[n]))
    if n in KNOWN_OVERLOAD_GAPS else (n, f) for n, f in OVERLOAD_CALLS], ids=[c[0] for c in OVERLOAD_CALLS])
def test_traced_overloads_match_pytorch(name, fn):
    # x.sum() is aten.sum.default in PyTorch's graphs, not sum.dim_IntList (issue 17: fidelity):
    # an overload whose optional parameter has no default is not taken when it is left out
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    data = np.arange(12.0).reshape(3, 4) - 5
    gm = make_fx(lambda x: fn(kiln, x))(kiln.tensor(data.tolist()))
    got = _calls(gm.graph, kiln.fx)
    want = _calls(torch_make_fx(lambda x: fn(torch, x))(torch.tensor(data)).graph, torch.fx)
    assert got == want
    # and the graph computes what eager does
    x = kiln.tensor(data.tolist())
    close(gm(x.clone()), fn(kiln, x.clone()))


@requires_torch
@pytest.mark.parametrize("call", [
    "x.var()", "x.var(0)", "x.var(True)", "x.var(False)", "x.var(0, True)", "x.var(dim=0)", "x.var(correction=0)",
    "x.var(unbiased=False)", "x.var(0, False, True)", "x.var([0, 1])", "x.var(0, correction=2, keepdim=True)",
    "x.var(None, True)", "x.std()", "x.std(1)", "T.var(x, 1)", "T.std(x, unbiased=False)", "T.var_mean(x)",
    "T.std_mean(x, 0)", "T.var_mean(x, True)", "T.std_mean(x, dim=1, correction=0)", "x.max(1)", "x.max(1)[1]",
    "T.nn.functional.layer_norm(x, (4,))", "x.topk(2)[1]", "x.split(1)[2]", "x.unbind(1)[0].exp()", "1 - x", "2.5 - x.sum(0)"])
def test_traced_calls_match_pytorch_node_for_node(call):
    # the overload, its arguments and every output's getitem, as PyTorch's tracer records them:
    # `x.var()` is var.correction(x) with no correction (issue 17: fidelity), and a multi-output op
    # gets a getitem per output in output order, also for outputs nothing reads
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx as torch_make_fx

    def nodes(graph):
        return [(n.name, str(n.target), str(n.args), str(n.kwargs)) for n in graph.nodes if n.op == "call_function"]

    data = np.arange(12.0).reshape(3, 4) - 5
    got = nodes(make_fx(lambda x: eval(call, {"x": x, "T": kiln}))(kiln.tensor(data.tolist())).graph)
    want = nodes(torch_make_fx(lambda x: eval(call, {"x": x, "T": torch}))(torch.tensor(data)).graph)
    assert got == want
