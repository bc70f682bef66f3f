"""kiln.fx passes: ShapeProp, subgraph_rewriter.replace_pattern (over the C++ SubgraphMatcher) and
the Conv-BN folding example pass, driven as torch.fx users drive them, with torch.fx as the oracle
where it helps.
"""

import numpy as np
import pytest

import kiln
from kiln import fx, nn
from kiln.fx.passes.conv_bn_fold import fuse_conv_bn
from kiln.fx.passes.shape_prop import ShapeProp, TensorMetadata
from kiln.fx.subgraph_rewriter import Match, SubgraphMatcher, replace_pattern, replace_pattern_with_filters
from conftest import requires_torch, torch


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), np.asarray(b.detach().numpy() if hasattr(b, "detach") else b),
                               rtol=tol, atol=tol)


# -- ShapeProp ----------------------------------------------------------------------------------------

def make_net(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(3, 4, 3, stride=2)
            self.fc = lib.nn.Linear(4, 5)

        def forward(self, x):
            h = self.conv(x).relu()
            p = h.mean(dim=(2, 3))
            t = h.transpose(1, 3)
            return self.fc(p), t, lib.split(p, 2, 1)

    return Net()


def test_shape_prop_fills_tensor_meta():
    m = make_net(kiln)
    gm = fx.symbolic_trace(m)
    x = kiln.randn(2, 3, 9, 9)
    out = ShapeProp(gm).propagate(x)
    close(out[0], m(x)[0])
    meta = {n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes}
    conv = meta["conv"]
    assert isinstance(conv, TensorMetadata)
    assert conv.shape == kiln.Size([2, 4, 4, 4]) and conv.dtype == kiln.float32
    assert conv.stride == (64, 16, 4, 1) and conv.requires_grad
    assert conv.memory_format is kiln.contiguous_format and conv.is_quantized is False and conv.qparams == {}
    assert meta["x"].requires_grad is False
    t = meta["transpose"]
    assert t.shape == (2, 4, 4, 4) and t.stride == (64, 1, 4, 16) and t.memory_format is None
    from kiln.fx.passes.shape_prop import _extract_tensor_metadata

    cl = kiln.randn(2, 4, 5, 3).permute(0, 3, 1, 2)
    assert _extract_tensor_metadata(cl).memory_format is kiln.channels_last
    assert _extract_tensor_metadata(kiln.randn(2, 3, 1, 1)).memory_format is kiln.contiguous_format
    split = meta["split"]
    assert isinstance(split, (tuple, list)) and [s.shape for s in split] == [(2, 2), (2, 2)]
    assert meta["output"][1] == t
    nodes = {n.name: n for n in gm.graph.nodes}
    assert nodes["fc"].meta["type"] is kiln.Tensor or issubclass(nodes["fc"].meta["type"], kiln.Tensor)
    assert nodes["mean"].meta["tensor_meta"].shape == (2, 4)


@requires_torch
def test_shape_prop_matches_torch():
    from torch.fx.passes.shape_prop import ShapeProp as TShapeProp

    kgm = fx.symbolic_trace(make_net(kiln))
    tgm = torch.fx.symbolic_trace(make_net(torch))
    ShapeProp(kgm).propagate(kiln.randn(2, 3, 9, 9))
    TShapeProp(tgm).propagate(torch.randn(2, 3, 9, 9))

    def flat(m):
        if isinstance(m, (tuple, list)) and m and not hasattr(m, "_fields"):
            return [y for x in m for y in flat(x)]
        return [(tuple(m.shape), str(m.dtype).split(".")[-1], m.requires_grad, tuple(m.stride))]

    for kn, tn in zip(kgm.graph.nodes, tgm.graph.nodes):
        assert kn.name == tn.name
        assert ("tensor_meta" in kn.meta) == ("tensor_meta" in tn.meta), kn.name
        if "tensor_meta" in kn.meta:
            assert flat(kn.meta["tensor_meta"]) == flat(tn.meta["tensor_meta"]), kn.name


def test_shape_prop_error_names_the_node():
    gm = fx.symbolic_trace(make_net(kiln))
    with pytest.raises(RuntimeError, match="ShapeProp error for: node=%conv"):
        ShapeProp(gm).propagate(kiln.randn(2, 5, 9, 9))


# -- replace_pattern --------------------------------------------------------------------------------

def chain(x, y):
    a = kiln.relu(kiln.add(x, y))
    b = kiln.relu(kiln.add(a, x))
    return kiln.neg(b)


def pattern(a, b):
    return kiln.relu(kiln.add(a, b))


def replacement(a, b):
    return kiln.sigmoid(kiln.sub(a, b))


def test_replace_pattern_rewrites_every_match():
    gm = fx.symbolic_trace(chain)
    matches = replace_pattern(gm, pattern, replacement)
    assert len(matches) == 2
    assert all(isinstance(m, Match) for m in matches)
    # Keys are the pattern's nodes; values the graph's nodes they matched.
    m0 = matches[0]
    assert m0.anchor.op == "call_function" and m0.anchor.target is kiln.relu
    assert sorted(k.name for k in m0.nodes_map) == ["a", "add", "b", "relu"]
    assert m0.nodes_map[m0.anchor].graph is None  # the matched relu was erased
    gm.graph.lint()
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [kiln.sub, kiln.sigmoid, kiln.sub, kiln.sigmoid, kiln.neg]
    x, y = kiln.randn(5), kiln.randn(5)
    close(gm(x, y), -kiln.sigmoid(kiln.sigmoid(x - y) - x))
    assert "kiln.sigmoid" in gm.code and "kiln.relu" not in gm.code


def test_replace_pattern_binds_constants_and_respects_containment():
    def f(x):
        y = kiln.mul(x, 2.0)
        z = kiln.mul(y, y)  # both inputs the same node: `mul(a, b)` cannot bind both placeholders
        return kiln.add(z, 1)

    def pat(a, b):
        return kiln.mul(a, b)

    def rep(a, b):
        return kiln.add(a, b)

    gm = fx.symbolic_trace(f)
    matches = replace_pattern(gm, pat, rep)
    assert len(matches) == 1
    x = kiln.randn(4)
    close(gm(x), (x + 2.0) * (x + 2.0) + 1)

    # An internal node of the pattern used outside it: no match.
    def leaky(x, y):
        s = kiln.add(x, y)
        return kiln.relu(s), s

    gm2 = fx.symbolic_trace(leaky)
    assert replace_pattern(gm2, pattern, replacement) == []
    # Pattern given as a Graph / GraphModule works the same.
    gm3 = fx.symbolic_trace(chain)
    assert len(replace_pattern(gm3, fx.symbolic_trace(pattern), fx.symbolic_trace(replacement).graph)) == 2


def test_replace_pattern_methods_modules_and_multiple_outputs():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            h = self.lin(x)
            return h.sin() + h.cos(), x.sin() * x.cos()

    def pat(a):
        return a.sin(), a.cos()

    def rep(a):
        s = kiln.sin(a)
        return s, kiln.sqrt(1 - s * s)  # a different (not equal for all x) cos: checks the wiring

    m = M()
    gm = fx.symbolic_trace(m)
    matches = replace_pattern(gm, pat, rep)
    assert len(matches) == 2
    gm.graph.lint()
    x = kiln.randn(3, 4)
    h = m.lin(x)
    want0 = kiln.sin(h) + kiln.sqrt(1 - kiln.sin(h) ** 2)
    want1 = kiln.sin(x) * kiln.sqrt(1 - kiln.sin(x) ** 2)
    got = gm(x)
    close(got[0], want0)
    close(got[1], want1)


def test_replace_pattern_with_filters_and_ignore_literals():
    def f(x):
        return kiln.add(kiln.add(x, 1), 2)

    def pat(a):
        return kiln.add(a, 1)

    def rep(a):
        return kiln.sub(a, 1)

    gm = fx.symbolic_trace(f)
    assert len(replace_pattern_with_filters(gm, pat, rep)) == 1  # only the literal 1 matches
    close(gm(kiln.zeros(2)), kiln.full((2,), 1.0))
    gm = fx.symbolic_trace(f)
    res = replace_pattern_with_filters(gm, pat, rep, ignore_literals=True)
    assert len(res) == 2 and all(r.replacements for r in res)
    close(gm(kiln.zeros(2)), kiln.full((2,), -2.0))
    gm = fx.symbolic_trace(f)
    only_last = lambda m, g, p: m.placeholder_nodes[0].op != "placeholder"  # noqa: E731
    assert len(replace_pattern_with_filters(gm, pat, rep, [only_last], ignore_literals=True)) == 1
    close(gm(kiln.zeros(2)), kiln.full((2,), 0.0))


def test_subgraph_matcher_api_and_bad_patterns():
    from kiln.fx.passes.utils.matcher_utils import SubgraphMatcher as AtTorchPath

    assert AtTorchPath is SubgraphMatcher
    gm = fx.symbolic_trace(chain)
    pg = fx.symbolic_trace(pattern).graph
    ms = SubgraphMatcher(pg).match(gm.graph)
    assert len(ms) == 2
    names = [[v.name for v in m.placeholder_nodes] for m in ms]
    assert names == [["x", "y"], ["relu", "x"]]
    assert [m.returning_nodes[0].name for m in ms] == ["relu", "relu_1"]
    dead = fx.Graph()
    a = dead.placeholder("a")
    dead.call_function(kiln.neg, (a,))
    dead.output(a)
    with pytest.raises(ValueError, match="dead code"):
        SubgraphMatcher(dead)
    with pytest.raises(ValueError, match="empty pattern"):
        SubgraphMatcher(fx.Graph())
    with pytest.raises(ValueError, match="the pattern takes 2 inputs but the replacement takes 1"):
        replace_pattern(fx.symbolic_trace(chain), pattern, lambda a: kiln.relu(a))


@requires_torch
def test_replace_pattern_match_counts_agree_with_torch():
    def cases(lib):
        def f1(x, y):
            a = lib.relu(lib.add(x, y))
            b = lib.relu(lib.add(a, x))
            c = lib.relu(lib.add(b, b))
            return lib.neg(c) + a

        def p1(a, b):
            return lib.relu(lib.add(a, b))

        def f2(x):
            y = x.sin().cos()
            z = y.sin().cos()
            return z.sin() + y

        def p2(a):
            return a.sin().cos()

        def f3(x):
            return lib.mul(x, 2) + lib.mul(x, 3) + lib.mul(lib.mul(x, 2), 2)

        def p3(a):
            return lib.mul(a, 2)

        return [(f1, p1), (f2, p2), (f3, p3)]

    for (kf, kp), (tf, tp) in zip(cases(kiln), cases(torch)):
        kgm, tgm = fx.symbolic_trace(kf), torch.fx.symbolic_trace(tf)
        km = replace_pattern(kgm, kp, kp)
        tm = torch.fx.replace_pattern(tgm, tp, tp)
        assert len(km) == len(tm)
        assert [sorted(k.name for k in m.nodes_map) for m in km] == [sorted(k.name for k in m.nodes_map) for m in tm]


# -- Conv-BN folding -----------------------------------------------------------------------------------

class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 4, 3, stride=2, bias=False, groups=2)
        self.bn2 = nn.BatchNorm2d(4)
        self.conv3 = nn.Conv2d(4, 4, 1)
        self.bn3 = nn.BatchNorm2d(4, affine=False)

    def forward(self, x):
        x = kiln.relu(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x))
        return self.bn3(self.conv3(x)) + x


def randomise_bn(m, seed=0):
    g = kiln.Generator().manual_seed(seed)
    with kiln.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.copy_(kiln.randn(mod.num_features, generator=g))
                mod.running_var.copy_(kiln.rand(mod.num_features, generator=g) + 0.5)
                if mod.weight is not None:
                    mod.weight.copy_(kiln.randn(mod.num_features, generator=g))
                    mod.bias.copy_(kiln.randn(mod.num_features, generator=g))


def test_conv_bn_fold_equals_unfused_and_follows_updates():
    m = ConvNet()
    randomise_bn(m)
    m.eval()
    gm = fuse_conv_bn(fx.symbolic_trace(m))
    mods = [n.target for n in gm.graph.nodes if n.op == "call_module"]
    assert mods == []
    attrs = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    assert {"conv1.weight", "conv1.bias", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
            "conv2.weight", "bn2.running_var", "bn3.running_mean"} <= attrs
    assert "conv2.bias" not in attrs and "bn3.weight" not in attrs
    for shape in [(2, 3, 8, 8), (1, 3, 5, 7)]:
        x = kiln.randn(*shape)
        close(gm(x), m(x), tol=1e-4)

    # Mutating running statistics and conv weights in place: the fused module follows.
    with kiln.no_grad():
        m.bn1.running_mean.add_(0.5)
        m.bn2.running_var.mul_(3.0)
        m.conv1.weight.mul_(-2.0)
        m.bn3.running_mean.sub_(1.0)
    x = kiln.randn(2, 3, 8, 8)
    close(gm(x), m(x), tol=1e-4)
    # So does load_state_dict with new values.
    other = ConvNet()
    randomise_bn(other, seed=1)
    m.load_state_dict(other.state_dict())
    close(gm(x), other.eval()(x), tol=1e-4)
    # The folded weight and bias are computed from parameters: gradients reach conv and bn.
    gm(x).sum().backward()
    assert m.conv1.weight.grad is not None and m.bn1.weight.grad is not None


def test_conv_bn_fold_leaves_train_mode_and_unfoldable_graphs():
    m = ConvNet()
    m.train()
    gm = fx.symbolic_trace(m)
    before = str(gm.graph)
    code = gm.code
    assert fuse_conv_bn(gm) is gm
    assert str(gm.graph) == before and gm.code == code

    # The conv output also used elsewhere: that pair stays, the others fold.
    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3)
            self.conv2 = nn.Conv2d(3, 3, 1)
            self.bn2 = nn.BatchNorm2d(3)

        def forward(self, x):
            c = self.conv(x)
            return self.bn2(self.conv2(self.bn(c) + c))

    s = Shared().eval()
    randomise_bn(s)
    gs = fuse_conv_bn(s)  # a module is traced first
    assert [n.target for n in gs.graph.nodes if n.op == "call_module"] == ["conv", "bn"]
    x = kiln.randn(2, 3, 6, 6)
    close(gs(x), s(x), tol=1e-4)
    with pytest.raises(TypeError, match="fuse_conv_bn expects"):
        fuse_conv_bn(lambda x: x)


@requires_torch
def test_conv_bn_fold_matches_torch_eval():
    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 6, 3, padding=1)
            self.bn1 = torch.nn.BatchNorm2d(6)
            self.conv2 = torch.nn.Conv2d(6, 4, 3, stride=2, bias=False, groups=2)
            self.bn2 = torch.nn.BatchNorm2d(4)
            self.conv3 = torch.nn.Conv2d(4, 4, 1)
            self.bn3 = torch.nn.BatchNorm2d(4, affine=False)

        def forward(self, x):
            x = torch.relu(self.bn1(self.conv1(x)))
            x = self.bn2(self.conv2(x))
            return self.bn3(self.conv3(x)) + x

    k = ConvNet()
    randomise_bn(k)
    t = TNet()
    t.load_state_dict({n: torch.tensor(v.detach().numpy()) for n, v in k.state_dict().items()})
    k.eval()
    t.eval()
    gm = fuse_conv_bn(k)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    close(gm(kiln.tensor(x)), t(torch.tensor(x)).detach().numpy(), tol=1e-4)


def test_replace_pattern_with_an_input_or_a_constant():
    def f(x):
        return kiln.relu(kiln.neg(x)) + 1

    gm = fx.symbolic_trace(f)
    assert len(replace_pattern(gm, lambda a: kiln.neg(a), lambda a: a)) == 1  # the replacement is its input
    assert [n.op for n in gm.graph.nodes] == ["placeholder", "call_function", "call_function", "output"]
    x = kiln.randn(4)
    close(gm(x), kiln.relu(x) + 1)

    def g(x):
        return kiln.mul(kiln.add(x, 3.0), 2)

    gm = fx.symbolic_trace(g)
    # `b` binds the constant 3.0, which the replacement returns: mul reads 3.0 directly.
    assert len(replace_pattern(gm, lambda a, b: kiln.add(a, b), lambda a, b: b)) == 1
    mul = next(n for n in gm.graph.nodes if n.op == "call_function")
    assert mul.args == (3.0, 2)
    close(gm(kiln.ones(2)), kiln.tensor(6.0))
