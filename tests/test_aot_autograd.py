"""AOTAutograd end to end: compiled forward and backward graphs against eager autograd for
every nn layer and loss (train and eval) under both partitioners, the digits models, graph
invariants (OpOverloads only, no in-place op), what each partitioner saves, input mutations
(batch norm buffers), aliasing outputs, random ops, and the aot_eager Dynamo backend."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
import kiln.nn as nn
import kiln.nn.functional as F
from kiln._functorch.aot_autograd import aot_function, aot_module
from kiln._functorch.compile import (
    default_partition, make_boxed_func, min_cut_rematerialization_partition, nop,
)
from kiln._ops import OpOverload

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
PARTITIONERS = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}


def close(a, b, tol=1e-5):
    if a is None or b is None:
        assert a is None and b is None
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


class Recorder:
    """A compiler that keeps the graphs it was given and runs them as Python."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return make_boxed_func(gm.forward)


def check_graph_invariants(gm):
    import operator

    for node in gm.graph.nodes:
        if node.op == "call_function":
            assert isinstance(node.target, OpOverload) or node.target is operator.getitem, node.target
            if isinstance(node.target, OpOverload):
                assert "!)" not in str(node.target._schema), f"in-place op {node.target} in {gm.code}"
        assert node.op != "call_module" and node.op != "call_method"


@pytest.mark.parametrize("partition", PARTITIONERS)
def test_function_gradients_equal_eager(partition):
    def fn(x, w, b):
        return (F.gelu(x @ w + b) * w.sum(0)).tanh().sum(), x.relu()

    args = [kiln.randn(4, 5).requires_grad_(), kiln.randn(5, 5).requires_grad_(), kiln.randn(5).requires_grad_()]
    fw, bw = Recorder(), Recorder()
    compiled = aot_function(fn, fw, bw, partition_fn=PARTITIONERS[partition])
    loss, r = compiled(*args)
    (loss + r.sum()).backward()
    got = [a.grad.clone() for a in args]
    for a in args:
        a.grad = None
    loss_e, r_e = fn(*args)
    (loss_e + r_e.sum()).backward()
    close(loss, loss_e)
    close(r, r_e)
    for g, a in zip(got, args):
        close(g, a.grad)
    for gm in fw.graphs + bw.graphs:
        check_graph_invariants(gm)


def _layers():
    yield "Linear", lambda: nn.Linear(6, 4), (3, 6)
    yield "Conv2d", lambda: nn.Conv2d(2, 3, 3, padding=1), (2, 2, 5, 5)
    yield "BatchNorm1d", lambda: nn.BatchNorm1d(6), (4, 6)
    yield "BatchNorm2d", lambda: nn.BatchNorm2d(2), (3, 2, 4, 4)
    yield "LayerNorm", lambda: nn.LayerNorm(6), (3, 6)
    yield "GroupNorm", lambda: nn.GroupNorm(2, 4), (2, 4, 3)
    yield "RMSNorm", lambda: nn.RMSNorm(6), (3, 6)
    yield "MaxPool2d", lambda: nn.MaxPool2d(2), (2, 2, 4, 4)
    yield "AvgPool2d", lambda: nn.AvgPool2d(2), (2, 2, 4, 4)
    yield "AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d(2), (2, 2, 5, 5)
    yield "Flatten", lambda: nn.Flatten(), (2, 3, 4)
    yield "Unflatten", lambda: nn.Unflatten(1, (2, 3)), (4, 6)
    yield "MultiheadAttention", lambda: _Attention(), (2, 5, 8)
    yield "Dropout", lambda: _Seeded(nn.Dropout(0.4)), (4, 6)
    yield "Embedding", lambda: _EmbeddingOfFloats(), (3, 4)
    for name in ("ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "ELU", "LeakyReLU", "Hardtanh", "Hardswish",
                 "Hardsigmoid", "Mish", "Softplus", "ReLU6", "Identity"):
        yield name, getattr(nn, name), (3, 6)
    yield "Softmax", lambda: nn.Softmax(dim=1), (3, 6)
    yield "LogSoftmax", lambda: nn.LogSoftmax(dim=1), (3, 6)


class _Seeded(nn.Module):
    """Draws from a freshly seeded generator, so eager and compiled runs see the same masks."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        kiln.manual_seed(11)
        return self.inner(x)


class _EmbeddingOfFloats(nn.Module):
    """Embedding rows picked by indices derived from the float input's shape (the input's own
    gradient flows through a sum with the rows)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.register_buffer("idx", kiln.tensor([1, 3, 3]))

    def forward(self, x):
        return self.emb(self.idx) + x


class _Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


def layer_matches_eager(make, shape, training, compile_model, tol=1e-5):
    """A layer from make() run through compile_model(layer) and eagerly from the same weights:
    output, input and parameter gradients, and buffers (running statistics) are equal."""
    kiln.manual_seed(0)
    eager = make()
    kiln.manual_seed(0)
    model = make()
    eager.train(training)
    model.train(training)
    compiled = compile_model(model)
    x = kiln.randn(*shape)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_e, out_c = eager(xe), compiled(xc)
    close(out_c, out_e, tol)
    g = kiln.randn(*out_e.shape)
    out_e.backward(g)
    out_c.backward(g)
    close(xc.grad, xe.grad, tol)
    for (n, pe), (_, pc) in zip(eager.named_parameters(), model.named_parameters()):
        close(pc.grad, pe.grad, tol)
    for (n, be), (_, bc) in zip(eager.named_buffers(), model.named_buffers()):
        close(bc, be)  # running statistics updated exactly as in eager


@pytest.mark.parametrize("partition", PARTITIONERS)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name,make,shape", list(_layers()), ids=[n for n, _, _ in _layers()])
def test_every_layer_train_and_eval(name, make, shape, training, partition):
    fw, bw = Recorder(), Recorder()
    layer_matches_eager(make, shape, training, lambda m: aot_module(m, fw, bw, partition_fn=PARTITIONERS[partition]))
    for gm in fw.graphs + bw.graphs:
        check_graph_invariants(gm)


def _losses():
    yield "CrossEntropyLoss", nn.CrossEntropyLoss(), (4, 5), lambda: kiln.randint(0, 5, (4,))
    yield "CrossEntropyLoss-smoothing", nn.CrossEntropyLoss(label_smoothing=0.1), (4, 5), \
        lambda: kiln.randint(0, 5, (4,))
    yield "NLLLoss", nn.NLLLoss(), (4, 5), lambda: kiln.randint(0, 5, (4,))
    yield "MSELoss", nn.MSELoss(), (4, 5), lambda: kiln.randn(4, 5)
    yield "L1Loss", nn.L1Loss(), (4, 5), lambda: kiln.randn(4, 5)
    yield "SmoothL1Loss", nn.SmoothL1Loss(), (4, 5), lambda: kiln.randn(4, 5)
    yield "HuberLoss", nn.HuberLoss(), (4, 5), lambda: kiln.randn(4, 5)
    yield "BCEWithLogitsLoss", nn.BCEWithLogitsLoss(), (4, 5), lambda: kiln.rand(4, 5)
    yield "BCELoss", nn.BCELoss(), (4, 5), lambda: kiln.rand(4, 5)


@pytest.mark.parametrize("partition", PARTITIONERS)
@pytest.mark.parametrize("name,loss,shape,target", list(_losses()), ids=[n for n, *_ in _losses()])
def test_every_loss(name, loss, shape, target, partition):
    x = kiln.rand(*shape) if name == "BCELoss" else kiln.randn(*shape)
    y = target()
    if name == "NLLLoss":
        x = F.log_softmax(x, dim=1)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled = aot_function(lambda a, b: loss(a, b), nop, nop, partition_fn=PARTITIONERS[partition])
    le, lc = loss(xe, y), compiled(xc, y)
    close(lc, le)
    le.backward()
    lc.backward()
    close(xc.grad, xe.grad)


@pytest.mark.parametrize("partition", PARTITIONERS)
@pytest.mark.parametrize("model_name", ["mlp", "cnn"])
def test_digits_models_train_steps_equal_eager(model_name, partition):
    import digits
    from training_util import assert_training_matches_eager

    assert_training_matches_eager(lambda: getattr(digits, model_name)(kiln),
                                  lambda m: aot_module(m, nop, nop, partition_fn=PARTITIONERS[partition]),
                                  lambda params: kiln.optim.SGD(params, lr=0.05, momentum=0.9), steps=4)


def test_what_each_partitioner_saves():
    """(gelu(x) * w).sum(): the default partitioner saves gelu's output, min-cut recomputes it."""

    def fn(x, w):
        return (F.gelu(x) * w).sum()

    x, w = kiln.randn(8, 8).requires_grad_(), kiln.randn(8, 8).requires_grad_()
    saved = {}
    for name, partition in PARTITIONERS.items():
        fw, bw = Recorder(), Recorder()
        aot_function(fn, fw, bw, partition_fn=partition)(x, w).backward()
        bw_inputs = [n for n in bw.graphs[0].graph.nodes if n.op == "placeholder"]
        fw_out = fw.graphs[0].graph.output_node().args[0]
        saved[name] = [str(getattr(v, "target", v)) for v in fw_out[1:]]
        bw_ops = [str(n.target) for n in bw.graphs[0].graph.nodes if n.op == "call_function"]
        if name == "default":
            assert any("gelu.default" in s for s in saved[name]), saved
        else:
            assert not any("gelu.default" in s for s in saved[name]), saved
            assert any("gelu.default" in op for op in bw_ops), bw_ops
        assert len(bw_inputs) == len(fw_out) - 1 + 1  # saved values + one tangent


def test_batch_norm_buffers_and_user_mutations():
    bn = nn.BatchNorm1d(3)
    ref = nn.BatchNorm1d(3)
    compiled = aot_module(bn, nop, nop)
    for _ in range(3):
        x = kiln.randn(5, 3)
        compiled(x.clone().requires_grad_()).sum().backward()
        ref(x.clone().requires_grad_()).sum().backward()
    close(bn.running_mean, ref.running_mean)
    close(bn.running_var, ref.running_var)
    assert int(bn.num_batches_tracked) == int(ref.num_batches_tracked) == 3

    def fn(x, counter):
        counter.add_(1)
        return x * 2

    counter = kiln.zeros(2)
    c = aot_function(fn, nop, nop)
    x = kiln.randn(2).requires_grad_()
    c(x, counter).sum().backward()
    c(x, counter)
    close(counter, kiln.full((2,), 2.0))


def test_outputs_that_alias_inputs_are_views():
    def fn(x):
        return x.view(-1), x[0], x * 2

    x = kiln.randn(3, 4).requires_grad_()
    flat, row, doubled = aot_function(fn, nop, nop)(x)
    assert flat._storage_id() == x._storage_id() and row._storage_id() == x._storage_id()
    close(flat, x.view(-1))
    (flat.sum() + row.sum() + doubled.sum()).backward()
    expected = kiln.full((3, 4), 3.0)
    expected[0] += 1
    close(x.grad, expected)


def test_inference_graph_without_grad():
    inference = Recorder()

    def fn(x, w):
        return (x @ w).relu()

    x, w = kiln.randn(3, 4), kiln.randn(4, 2).requires_grad_()
    with kiln.no_grad():
        out = aot_function(fn, nop, nop, inference_compiler=inference)(x, w)
    close(out, fn(x, w))
    assert len(inference.graphs) == 1
    check_graph_invariants(inference.graphs[0])


def test_dropout_masks_match_eager_for_the_same_seed():
    def fn(x):
        return F.dropout(x, 0.5, training=True) * 3

    x = kiln.randn(64, 32)
    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    for partition in PARTITIONERS.values():
        compiled = aot_function(fn, nop, nop, partition_fn=partition)
        kiln.manual_seed(7)
        ye = fn(xe)
        kiln.manual_seed(7)
        yc = compiled(xc)
        close(yc, ye)
        ye.sum().backward()
        yc.sum().backward()
        close(xc.grad, xe.grad)
        xe.grad = xc.grad = None


def test_keep_inference_input_mutations_and_dynamic_flag():
    def fn(x, counter):
        counter.add_(1)
        return x * 2

    inference = Recorder()
    counter = kiln.zeros(2)
    with kiln.no_grad():
        aot_function(fn, nop, inference_compiler=inference, keep_inference_input_mutations=True)(kiln.ones(2), counter)
    close(counter, kiln.ones(2))
    assert any("copy_" in op for op in _ops_of(inference.graphs[0]))
    with pytest.raises(NotImplementedError, match="dynamic"):
        aot_function(fn, nop, dynamic=True)


def test_make_boxed_func_and_cache():
    calls = []

    def compiler(gm, example_inputs):
        calls.append(gm)
        return make_boxed_func(gm.forward)

    boxed = make_boxed_func(lambda a, b: a + b)
    assert boxed._boxed_call and boxed([1, 2]) == 3
    f = aot_function(lambda x: x.sin(), compiler)
    x = kiln.randn(3).requires_grad_()
    f(x)
    f(x)
    assert len(calls) == 2  # forward and backward compiled once
    f(kiln.randn(4).requires_grad_())  # a new layout traces again
    assert len(calls) == 4


def test_aot_eager_backend_training_matches_eager():
    import digits
    from training_util import assert_training_matches_eager

    assert_training_matches_eager(lambda: digits.cnn(kiln), lambda m: kiln.compile(m, backend="aot_eager"),
                                  lambda params: kiln.optim.Adam(params, lr=1e-3), batch=8)
    dynamo.reset()


def test_aot_autograd_backend_with_custom_compilers():
    from kiln._dynamo.backends.common import aot_autograd

    fw, bw = Recorder(), Recorder()
    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw, partition_fn=min_cut_rematerialization_partition)
    w = kiln.randn(4, 4).requires_grad_()
    out = kiln.compile(lambda x: (x @ w).sigmoid().sum(), backend=backend)(kiln.randn(2, 4))
    out.backward()
    assert len(fw.graphs) == 1 and len(bw.graphs) == 1
    dynamo.reset()


def test_logs_aot_graphs():
    code = ("import kiln\n"
            "from kiln._functorch.aot_autograd import aot_function\n"
            "from kiln._functorch.compile import nop\n"
            "aot_function(lambda x: x.sin().sum(), nop)(kiln.randn(3).requires_grad_()).backward()\n")
    env = dict(os.environ, KILN_LOGS="aot_graphs", PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert "Forward graph" in out.stderr and "Backward graph" in out.stderr
    assert "kiln.ops.aten.sin.default" in out.stderr and "kiln.ops.aten.cos.default" in out.stderr


# --- activation checkpointing ------------------------------------------------------------------------
def _ops_of(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_checkpoint_eager_matches_plain_gradients():
    from kiln.utils.checkpoint import checkpoint

    lin = nn.Linear(6, 6)
    x = kiln.randn(4, 6).requires_grad_()

    def block(h):
        return F.dropout(F.gelu(lin(h)), 0.3, training=True) * 2

    kiln.manual_seed(3)
    plain = block(x).sum()
    plain.backward()
    expected = [x.grad.clone(), lin.weight.grad.clone(), lin.bias.grad.clone()]
    x.grad = lin.weight.grad = lin.bias.grad = None
    kiln.manual_seed(3)
    out = checkpoint(block, x, use_reentrant=True)
    close(out.sum(), plain)
    out.sum().backward()  # recomputed with the same dropout mask (RNG state restored)
    for got, want in zip([x.grad, lin.weight.grad, lin.bias.grad], expected):
        close(got, want)


def test_checkpointed_region_is_recomputed_by_min_cut():
    from kiln.utils.checkpoint import checkpoint

    def fn(x, w):
        h = checkpoint(lambda a: (a @ w).tanh().sin(), x, use_reentrant=False)
        return (h * h).sum()

    x, w = kiln.randn(4, 4).requires_grad_(), kiln.randn(4, 4).requires_grad_()
    fw, bw = Recorder(), Recorder()
    aot_function(fn, fw, bw, partition_fn=min_cut_rematerialization_partition)(x, w).backward()
    bw_ops = _ops_of(bw.graphs[0])
    assert any("aten.mm" in op for op in bw_ops) and any("aten.tanh.default" in op for op in bw_ops), bw_ops
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    ((x @ w).tanh().sin() ** 2).sum().backward()
    close(gx, x.grad)
    close(gw, w.grad)


def test_selective_checkpoint_policy_saves_matmuls():
    import functools

    from kiln.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if "mm" in str(op) else CheckpointPolicy.PREFER_RECOMPUTE

    def fn(x, w):
        h = checkpoint(lambda a: (a @ w).tanh().sin(), x, use_reentrant=False,
                       context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
        return (h * h).sum()

    x, w = kiln.randn(4, 4).requires_grad_(), kiln.randn(4, 4).requires_grad_()
    fw, bw = Recorder(), Recorder()
    aot_function(fn, fw, bw, partition_fn=min_cut_rematerialization_partition)(x, w).backward()
    bw_ops = _ops_of(bw.graphs[0])
    assert not any("aten.mm.default" == op.split("kiln.ops.")[-1] for op in bw_ops[:1])
    saved = [getattr(v, "name", "") for v in fw.graphs[0].graph.output_node().args[0][1:]]
    assert any(name.startswith("mm") for name in saved), saved
    assert any("aten.tanh.default" in op for op in bw_ops), bw_ops


def test_checkpoint_under_kiln_compile_with_aot_eager():
    from kiln.utils.checkpoint import checkpoint

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 2)

        def forward(self, x):
            h = checkpoint(lambda a: F.silu(self.fc1(a)), x, use_reentrant=False)
            return self.fc2(h)

    kiln.manual_seed(0)
    eager = Net()
    kiln.manual_seed(0)
    model = Net()
    x = kiln.randn(5, 8)
    fw, bw = Recorder(), Recorder()
    from kiln._dynamo.backends.common import aot_autograd

    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw, partition_fn=min_cut_rematerialization_partition)
    kiln.compile(model, backend=backend)(x).sum().backward()
    eager(x).sum().backward()
    for (n, pe), (_, pc) in zip(eager.named_parameters(), model.named_parameters()):
        close(pc.grad, pe.grad)
    assert any("silu" in op for op in _ops_of(bw.graphs[0]))  # the region is recomputed in the backward
    dynamo.reset()


def test_create_graph_gives_first_order_gradients_and_refuses_double_backward():
    """As PyTorch's compiled functions: autograd.grad(create_graph=True) through a compiled graph
    returns the right gradient, still attached; differentiating it again raises."""
    x = kiln.randn(5).requires_grad_()
    compiled = aot_function(lambda x: (x.sin() * x).sum(), nop, nop)
    (g,) = kiln.autograd.grad(compiled(x), x, create_graph=True)
    close(g, x.cos() * x + x.sin())
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="does not currently support double backward"):
        g.sum().backward()
    compiled(x).backward()  # a plain backward still works
    close(x.grad, x.cos() * x + x.sin())
