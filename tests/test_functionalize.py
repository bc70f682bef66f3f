"""kiln.func.functionalize: in-place- and view-heavy programs give f's results and mutate f's inputs
the same way; traced with make_fx, the functionalized graph holds no in-place op except the copy_
epilogue into mutated inputs, and reruns equal eager on fresh inputs."""

import numpy as np
import pytest

import kiln
from kiln.func import functionalize


def rand(*shape, seed=0):
    rng = np.random.default_rng(seed + sum(shape))
    return kiln.tensor(rng.standard_normal(shape).astype(np.float32).tolist() if shape else 0.5)


def same(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(np.array(a.tolist()), np.array(b.tolist()), rtol=1e-6, atol=1e-6)


def slice_add(x):
    y = x.clone()
    y[:, 1:3].add_(1.0)
    return y * 2


def transpose_mul(x):
    y = x + 0
    y.t().mul_(3.0)
    z = y.t()
    z[0].sub_(1.0)
    return y, z.sum()


def view_chain(x):
    y = x.clone()
    v = y.view(-1)
    w = v[2:10].view(2, 4)
    w.mul_(-1.0)
    w[1, 1:].fill_(7.0)
    return y, v.sum(), w


def index_masked(x):
    y = x.clone()
    y[y > 0.5] = 0.0
    y.masked_fill_(y < -1.0, -1.0)
    idx = kiln.tensor([0, 2])
    y.index_put_((idx,), kiln.ones(x.shape[1]), accumulate=True)
    return y


def mutate_input(x, y):
    x.add_(y)
    x[0].mul_(2.0)
    return x * y


def mutate_input_through_view(x):
    x[1:, :2].zero_()
    x.diagonal().add_(10.0)
    return x.sum(0)


def aliasing_outputs(x):
    y = x * 1
    a = y[0]
    b = y[:, 0]
    a.add_(5.0)
    return a, b, y


def running_stats(x, mean, var):
    m = x.mean(0)
    v = x.var(0)
    mean.mul_(0.9).add_(m * 0.1)
    var.mul_(0.9).add_(v * 0.1)
    return (x - mean) / (var + 1e-5).sqrt()


def batch_norm_train(x, w, b, rm, rv):
    return kiln.nn.functional.batch_norm(x, rm, rv, w, b, training=True, momentum=0.1)


def out_and_copy(x):
    out = kiln.empty(x.shape)
    kiln.mul(x, 2.0, out=out)
    z = kiln.zeros(x.shape)
    z.copy_(out)
    z[0] = x[1]
    return z


PROGRAMS = [
    (slice_add, lambda: (rand(3, 4),)),
    (transpose_mul, lambda: (rand(3, 3),)),
    (view_chain, lambda: (rand(3, 4),)),
    (index_masked, lambda: (rand(4, 5),)),
    (mutate_input, lambda: (rand(2, 3), rand(2, 3, seed=1))),
    (mutate_input_through_view, lambda: (rand(3, 3),)),
    (aliasing_outputs, lambda: (rand(3, 4),)),
    (running_stats, lambda: (rand(6, 3), kiln.zeros(3), kiln.ones(3))),
    (batch_norm_train, lambda: (rand(6, 3), rand(3, seed=2), rand(3, seed=3), kiln.zeros(3), kiln.ones(3))),
    (out_and_copy, lambda: (rand(2, 3),)),
]
IDS = [p[0].__name__ for p in PROGRAMS]


def clone_all(args):
    return tuple(a.clone() for a in args)


@pytest.mark.parametrize("f,make", PROGRAMS, ids=IDS)
def test_results_and_input_mutations_match(f, make):
    args = make()
    eager_args, func_args = clone_all(args), clone_all(args)
    expected = f(*eager_args)
    got = functionalize(f)(*func_args)
    same(got, expected)
    same(func_args, eager_args)  # inputs mutated exactly as f mutates them


@pytest.mark.parametrize("f,make", PROGRAMS, ids=IDS)
def test_outputs_are_plain_tensors(f, make):
    out = functionalize(f)(*make())
    for t in out if isinstance(out, tuple) else (out,):
        assert not kiln._C._is_functional_tensor(t)


def inplace_nodes(gm):
    bad = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, kiln._ops.OpOverload):
            continue
        mutable = "!" in str(node.target._schema)
        if kiln._ops.Tag.inplace in node.target.tags or mutable:
            bad.append(node)
    return bad


@pytest.mark.parametrize("f,make", PROGRAMS, ids=IDS)
def test_traced_graph_has_no_mutation_but_the_epilogue(f, make):
    from kiln.fx.experimental.proxy_tensor import make_fx
    args = make()
    gm = make_fx(functionalize(f))(*clone_all(args))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in inplace_nodes(gm):
        # Only copy_ into an input, after every other op that reads it.
        assert str(node.target) == "aten.copy_.default", gm.code
        assert node.args[0] in placeholders, gm.code
    # The graph on fresh inputs does what f does, mutations of inputs included.
    fresh = tuple(a * 1.5 if a.is_floating_point() else a for a in args)
    eager_args, graph_args = clone_all(fresh), clone_all(fresh)
    same(gm(*graph_args), f(*eager_args))
    same(graph_args, eager_args)


def test_graph_uses_scatter_ops_for_view_writes():
    from kiln.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(functionalize(slice_add))(rand(3, 4))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "aten.slice_scatter.default" in targets
    assert not any(t.endswith("add_.Tensor") or t.endswith("add_.Scalar") for t in targets)
    gm = make_fx(functionalize(mutate_input))(rand(2, 3), rand(2, 3))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "aten.select_scatter.default" in targets
    assert targets.count("aten.copy_.default") == 1  # only x is mutated
    gm = make_fx(functionalize(transpose_mul))(rand(3, 3))
    targets = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert "aten.as_strided_scatter.default" not in targets  # t()'s inverse is t()


def test_no_epilogue_without_input_mutation():
    from kiln.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(functionalize(slice_add))(rand(3, 4))
    assert not inplace_nodes(gm)


def test_functionalize_under_autograd():
    x = rand(3, 4).requires_grad_()

    def f(x):
        y = x * 2
        y[:, 0].mul_(3.0)
        return y.sum()

    functionalize(f)(x).backward()
    expected = kiln.full((3, 4), 2.0)
    expected[:, 0] = 6.0
    same(x.grad, expected)


def test_bad_remove_argument():
    with pytest.raises(RuntimeError, match="remove"):
        functionalize(slice_add, remove="views")


def test_scatter_ops_match_torch():
    torch = pytest.importorskip("torch")
    x, s = rand(4, 5), rand(4, 2)
    got = kiln.slice_scatter(x, s, 1, 1, 5, 2)
    exp = torch.slice_scatter(torch.tensor(x.tolist()), torch.tensor(s.tolist()), 1, 1, 5, 2)
    np.testing.assert_allclose(np.array(got.tolist()), exp.numpy())
    r = rand(5)
    got = kiln.select_scatter(x, r, 0, -1)
    exp = torch.select_scatter(torch.tensor(x.tolist()), torch.tensor(r.tolist()), 0, -1)
    np.testing.assert_allclose(np.array(got.tolist()), exp.numpy())
    d = rand(4)
    got = kiln.diagonal_scatter(x, d, 1)
    exp = torch.diagonal_scatter(torch.tensor(x.tolist()), torch.tensor(d.tolist()), 1)
    np.testing.assert_allclose(np.array(got.tolist()), exp.numpy())
    a = rand(2, 2)
    got = kiln.as_strided_scatter(x, a, (2, 2), (5, 1), 3)
    exp = torch.as_strided_scatter(torch.tensor(x.tolist()), torch.tensor(a.tolist()), (2, 2), (5, 1), 3)
    np.testing.assert_allclose(np.array(got.tolist()), exp.numpy())
    with pytest.raises(RuntimeError, match="slice_scatter"):
        kiln.slice_scatter(x, rand(3, 2), 1, 1, 5, 2)


LAYOUTS = {
    "contiguous": lambda lib: lib.arange(12.0).view(3, 4),
    "transposed": lambda lib: lib.arange(12.0).view(4, 3).t(),
    "strided": lambda lib: lib.arange(24.0).view(3, 8)[:, ::2],
    "offset": lambda lib: lib.arange(15.0).view(5, 3)[1:].t(),
    "expanded": lambda lib: lib.arange(4.0).expand(3, 4),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_keeping_functional_ops_match_torch(layout):
    # as_strided_scatter's view addresses storage positions, and the functionalized write-back of
    # a mutated input reads copy's and fill's results through such views: all three keep self's
    # strides (PyTorch: clone_preserve_strides, empty_like). Made contiguous, a transposed
    # input's gradient came out transposed under kiln.compile.
    torch = pytest.importorskip("torch")
    results = []
    for lib in (kiln, torch):
        x = LAYOUTS[layout](lib)
        src = lib.arange(100.0, 106.0).view(2, 3)
        a = lib.ops.aten
        outs = [a.copy.default(x, src[0, :1]), a.fill.Scalar(x, 7.0)]
        if layout != "expanded":  # a view written into an overlapping self has no one answer
            outs.append(lib.as_strided_scatter(x, src, (2, 3), (1, 2), x.storage_offset() + 1))
        for out in outs:
            results.append((lib, out.tolist(), tuple(out.stride())))
    half = len(results) // 2
    for (_, kv, ks), (_, tv, ts) in zip(results[:half], results[half:]):
        assert kv == tv
        assert ks == ts


def test_scatter_op_gradients():
    x = rand(4, 5).double().requires_grad_()
    s = rand(4, 2).double().requires_grad_()
    assert kiln.autograd.gradcheck(lambda a, b: kiln.slice_scatter(a, b, 1, 1, 5, 2), (x, s))
    r = rand(5).double().requires_grad_()
    assert kiln.autograd.gradcheck(lambda a, b: kiln.select_scatter(a, b, 0, 2), (x, r))
    d = rand(4).double().requires_grad_()
    assert kiln.autograd.gradcheck(lambda a, b: kiln.diagonal_scatter(a, b, 0), (x, d))


def test_functional_call_swaps_and_restores():
    from kiln.func import functional_call
    kiln.manual_seed(0)
    lin = kiln.nn.Linear(3, 2)
    w, b = kiln.ones(2, 3), kiln.zeros(2)
    x = rand(4, 3)
    out = functional_call(lin, {"weight": w, "bias": b}, (x,))
    same(out, x.sum(1, keepdim=True).expand(4, 2))
    assert lin.weight is not w and isinstance(lin.weight, kiln.nn.Parameter)
    with pytest.raises(AttributeError, match="nope"):
        functional_call(lin, {"nope": w}, (x,))


def test_inplace_view_op_on_an_input():
    # t_ changes the input's layout, not its data: the functionalized program computes with the
    # transposed view of the same storage, and the epilogue replays t_ on the input before writing
    # its values back.
    def f(x, y):
        x.mul_(2)
        x.t_()
        x[0].add_(1)
        y.transpose_(0, 1)
        return x * 3, y.sum(1)

    x, y = kiln.arange(6.0).view(2, 3), kiln.arange(4.0).view(2, 2)
    ex, ey = x.clone(), y.clone()
    want = f(ex, ey)
    got = functionalize(f)(x, y)
    for g, w in zip(got, want):
        assert g.tolist() == w.tolist()
    assert x.shape == ex.shape and x.stride() == ex.stride() and x.tolist() == ex.tolist()
    assert y.shape == ey.shape and y.stride() == ey.stride() and y.tolist() == ey.tolist()
