"""Inductor's layout optimization (kiln/_inductor/layout.py, Note [Layout optimization]):
inference graphs with 2-d convolutions compute channels-last (training graphs too when forced);
compiled conv nets against eager kiln and PyTorch, in eval and training mode with gradients,
with the compiled function's output strides equal to eager's, and graphs it must leave alone."""

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
from kiln._inductor import compile_fx
from kiln._inductor import config
from kiln._inductor.layout import is_channels_last

torch = pytest.importorskip("torch")


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a.detach().double().numpy(), b.detach().double().numpy(), rtol=tol, atol=tol)


def to_torch(t):
    return torch.tensor(t.detach().numpy())


class Net:
    """A conv net written once for both libraries: `build(lib)` returns a module."""

    def __init__(self, build):
        self.build = build

    def pair(self):
        kiln.manual_seed(0)
        k = self.build(kiln)
        t = self.build(torch)
        t.load_state_dict({name: to_torch(v) for name, v in k.state_dict().items()})
        return k, t


def resnet_block(lib, c=8):
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, c, 3, 1, 1, bias=False)
            self.bn0 = nn.BatchNorm2d(c)
            self.conv1 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 1, 2, bias=False), nn.BatchNorm2d(2 * c))
            self.conv3 = nn.Conv2d(c, 2 * c, 3, 2, 1)
            self.pool = nn.MaxPool2d(3, 2, 1)
            self.fc = nn.Linear(2 * c, 5)

        def forward(self, x):
            x = self.pool(lib.relu(self.bn0(self.stem(x))))
            y = lib.relu(self.bn2(self.conv2(lib.relu(self.bn1(self.conv1(x))))) + x)
            z = lib.relu(self.conv3(y) + self.down(y))
            return self.fc(lib.flatten(lib.nn.functional.adaptive_avg_pool2d(z, 1), 1))

    return Block()


def flatten_classifier(lib):
    """conv, pool, conv, then a view to (N, C * H * W) for a Linear: the view cannot be taken of a
    channels-last value, so it reads a contiguous copy."""
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(16 * 8 * 8, 10))


def conv_pool_features(lib):
    """Returns a feature map (the compiled graph's output is a convolution's result)."""
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.AvgPool2d(2),
                         nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Sigmoid())


def graphs_of(fn, *args):
    """(result, the GraphLowerings compiled while fn ran)."""
    graphs = []
    compile_fx.graph_sinks.append(graphs)
    try:
        return fn(*args), graphs
    finally:
        compile_fx.graph_sinks.remove(graphs)


def optimized(graph):
    return graph.output_strides is not None


def conv_results_channels_last(graph):
    """Whether the convolutions with N * oh * ow >= 128 (those oneDNN runs) produced channels-last
    values and the others nchw ones."""
    convs = [n for n in graph.gm.graph.nodes if n.op == "call_function" and "aten.convolution.default" in str(n.target)]

    def big(n):
        shape = n.meta["val"].shape
        return shape[0] * shape[2] * shape[3] >= 128

    return any(big(n) for n in convs) and \
        all(is_channels_last(n.meta["val"]) == big(n) or n.meta["val"].shape[2] * n.meta["val"].shape[3] == 1
            for n in convs)


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()


@pytest.mark.parametrize("build", [resnet_block, conv_pool_features, flatten_classifier])
def test_eval_conv_net_matches_eager_and_pytorch(build):
    k, t = Net(build).pair()
    k.eval(), t.eval()
    x = kiln.randn(2, 3, 16, 16)
    with kiln.no_grad():
        out, graphs = graphs_of(kiln.compile(k), x)
        eager = k(x)
    with torch.no_grad():
        want = t(to_torch(x))
    assert len(graphs) == 1 and optimized(graphs[0]) and conv_results_channels_last(graphs[0])
    assert out.stride() == eager.stride() == want.stride()
    close(out, eager)
    close(out, want)


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setattr(config, "force_layout_optimization", True)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("build", [resnet_block, conv_pool_features, flatten_classifier])
def test_training_gradients_match_eager_and_pytorch(build, train, forced):
    k, t = Net(build).pair()
    ck, _ = Net(build).pair()
    for m in (k, t, ck):
        m.train(train)
    x = kiln.randn(2, 3, 16, 16)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    xt = to_torch(x).requires_grad_(True)
    compiled = kiln.compile(ck)

    def step():
        out = compiled(xs[0])
        (out * out).sum().backward()
        return out

    out, graphs = graphs_of(step)
    eager = k(xs[1])
    (eager * eager).sum().backward()
    want = t(xt)
    (want * want).sum().backward()
    # the forward, the backward (and one specialised to the running statistics' absent tangents)
    assert len(graphs) >= 2 and all(optimized(g) for g in graphs)
    assert out.stride() == eager.stride()
    close(out, eager)
    close(out, want)
    assert xs[0].grad.stride() == xs[1].grad.stride() == xt.grad.stride()
    close(xs[0].grad, xs[1].grad)
    close(xs[0].grad, xt.grad)
    params = dict(t.named_parameters())
    for (name, p), e in zip(ck.named_parameters(), k.parameters()):
        # a size-1 dim's stride is free: a fresh gradient becomes .grad as it is (Note [Stealing
        # gradients]), as in PyTorch, whose layout contract looks only at the other dims
        assert [st for st, n in zip(p.grad.stride(), p.shape) if n != 1] == \
            [st for st, n in zip(e.grad.stride(), p.shape) if n != 1], name
        close(p.grad, e.grad, 1e-3)
        close(p.grad, params[name].grad, 1e-3)
    if train and build is not flatten_classifier:  # the running statistics were updated as eager's
        close(ck.state_dict()["bn0.running_var" if build is resnet_block else "1.running_var"],
              k.state_dict()["bn0.running_var" if build is resnet_block else "1.running_var"])


def test_training_graphs_keep_nchw_unless_forced():
    # measured slower channels-last (Note [Layout optimization]); an eval-mode batch norm too
    k, _ = Net(resnet_block).pair()
    k.eval()
    x = kiln.randn(2, 3, 16, 16, requires_grad=True)
    (_, graphs) = graphs_of(lambda: kiln.compile(k)(x).sum().backward())
    assert len(graphs) == 2 and not any(optimized(g) for g in graphs)
    close(x.grad, kiln.autograd.grad(k(x).sum(), x)[0])


def test_train_mode_batch_norm_under_no_grad_keeps_nchw():
    k, t = Net(resnet_block).pair()
    x = kiln.randn(2, 3, 16, 16)
    with kiln.no_grad():
        out, graphs = graphs_of(kiln.compile(k), x)
    assert len(graphs) == 1 and not optimized(graphs[0])
    close(out, t(to_torch(x)))


def test_backward_reads_saved_activations_in_the_layout_the_forward_made(monkeypatch, forced):
    # the forward's saved values stay channels-last and the backward's placeholders say so: no
    # input of the backward is copied into another layout on each call (compile_fx's
    # Note [Input layouts])
    relaid = []
    real = compile_fx._in_layout
    monkeypatch.setattr(compile_fx, "_in_layout", lambda *a: relaid.append(a[1:]) or real(*a))
    k, _ = Net(resnet_block).pair()
    x = kiln.randn(2, 3, 16, 16)
    (_, graphs) = graphs_of(lambda: kiln.compile(k)(x).sum().backward())
    forward, backward = graphs[:2]
    assert optimized(forward) and optimized(backward)
    saved = [n for n in backward.gm.graph.nodes if n.op == "placeholder" and is_channels_last(n.meta["val"])]
    assert saved and not relaid


def test_output_strides_follow_eager_for_channels_last_and_sliced_inputs():
    k, t = Net(conv_pool_features).pair()
    k.eval(), t.eval()
    base = kiln.randn(2, 3, 20, 18)
    inputs = {"channels_last": base[:, :, :16, :16].contiguous(memory_format=kiln.channels_last),
              "sliced": base[:, :, 2:18, 1:17],
              "transposed": base[:, :, :16, :16].transpose(2, 3)}
    for name, x in inputs.items():
        dynamo.reset()
        with kiln.no_grad():
            out = kiln.compile(k)(x)
            eager = k(x)
        with torch.no_grad():
            want = t(to_torch(x))
        assert out.stride() == eager.stride(), name
        close(out, eager)
        close(out, want)


def test_conv_returned_with_an_intermediate_keeps_eager_strides():
    # a convolution's result leaves the graph next to values computed from it
    def f(lib, x, w):
        y = lib.nn.functional.conv2d(x, w, padding=1)
        return y, lib.relu(y) * 2, y.sum(dim=(2, 3))

    x, w = kiln.randn(2, 4, 8, 8), kiln.randn(6, 4, 3, 3)
    with kiln.no_grad():
        got, graphs = graphs_of(kiln.compile(lambda x, w: f(kiln, x, w)), x, w)
    assert optimized(graphs[0]) and graphs[0].gm.meta["output_strides"]
    for g, e, r in zip(got, f(kiln, x, w), f(torch, to_torch(x), to_torch(w))):
        assert g.stride() == e.stride() == r.stride()
        close(g, e)
        close(g, r)


def test_conv1d_and_float64_graphs_keep_their_layouts():
    x1, w1 = kiln.randn(2, 4, 16), kiln.randn(6, 4, 3)
    out, graphs = graphs_of(kiln.compile(lambda x, w: kiln.relu(kiln.nn.functional.conv1d(x, w))), x1, w1)
    assert not optimized(graphs[0])
    close(out, torch.relu(torch.nn.functional.conv1d(to_torch(x1), to_torch(w1))))
    x2, w2 = kiln.randn(2, 4, 8, 8, dtype=kiln.float64), kiln.randn(6, 4, 3, 3, dtype=kiln.float64)
    out, graphs = graphs_of(kiln.compile(lambda x, w: kiln.relu(kiln.nn.functional.conv2d(x, w))), x2, w2)
    assert not optimized(graphs[0])
    close(out, torch.relu(torch.nn.functional.conv2d(to_torch(x2), to_torch(w2))), 1e-10)


def test_layout_optimization_off(monkeypatch, forced):
    monkeypatch.setattr(config, "layout_optimization", False)
    k, t = Net(resnet_block).pair()
    ck, _ = Net(resnet_block).pair()
    x = kiln.randn(2, 3, 16, 16)
    out, graphs = graphs_of(lambda: kiln.compile(ck)(x))
    out.sum().backward()
    want = t(to_torch(x))
    want.sum().backward()
    assert graphs and not any(optimized(g) for g in graphs)
    assert not any(is_channels_last(n.meta["val"]) for g in graphs for n in g.gm.graph.nodes
                   if isinstance(n.meta.get("val"), kiln.Tensor) and n.meta["val"].dim() == 4 and n.meta["val"].shape[1] > 1 and
                   n.meta["val"].shape[2] * n.meta["val"].shape[3] > 1)
    close(out, want)
    params = dict(t.named_parameters())
    for name, p in ck.named_parameters():
        close(p.grad, params[name].grad, 1e-3)


def test_graph_without_convolutions_is_unaffected():
    def f(x):
        return kiln.relu(x * 2 + 1).sum(dim=1), x.transpose(0, 1) * 3

    x = kiln.randn(4, 6, 5, 5)
    codes = []
    for on in (True, False):
        config.layout_optimization = on
        try:
            dynamo.reset()
            got, graphs = graphs_of(kiln.compile(f), x)
            codes.append(graphs[0].wrapper_code())
        finally:
            config.layout_optimization = True
        assert not optimized(graphs[0])
        for g, e in zip(got, f(x)):
            assert g.stride() == e.stride()
            close(g, e)
    assert codes[0] == codes[1]
