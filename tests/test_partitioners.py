"""kiln._functorch.partitioners: joint graphs traced with make_fx (fake mode) are split into a
forward and a backward GraphModule; running forward then backward on real tensors gives eager's
outputs and gradients under both partitioners; what each saves on known cases (gelu, matmul,
dropout, checkpoint policies) and its byte count."""

import operator

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from kiln.fx.experimental.proxy_tensor import make_fx
from kiln._functorch.partitioners import (MinCutOptions, default_partition,
                                          min_cut_rematerialization_partition)
from kiln.utils.checkpoint import CheckpointPolicy

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]


def rand(*shape, seed=0):
    rng = np.random.default_rng(seed * 7 + sum(shape))
    return kiln.tensor(rng.standard_normal(shape).astype(np.float32).tolist())


def close(a, b, tol=1e-5):
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(np.array(a.tolist()), np.array(b.tolist()), rtol=tol, atol=tol)


def trace_joint(f, primals):
    """The joint graph of f as aot_function traces it: placeholders primals_*, tangents_*; output
    (*outs, *grads). Returns (joint module, number of forward outputs)."""
    outs = f(*[p.detach().requires_grad_() for p in primals])
    outs = outs if isinstance(outs, tuple) else (outs,)
    tangents = [kiln.ones_like(o) for o in outs]

    def joint(primals, tangents):
        outs = f(*primals)
        outs = outs if isinstance(outs, tuple) else (outs,)
        grads = kiln.autograd.grad(outs, primals, grad_outputs=tangents)
        return (*outs, *grads)

    ps = [p.detach().requires_grad_() for p in primals]
    return make_fx(joint, tracing_mode="fake")(ps, tangents), len(outs)


def run_partitioned(fw, bw, num_fwd_outputs, primals, tangents):
    with kiln.no_grad():
        fw_out = fw(*primals)
        outs, saved = fw_out[:num_fwd_outputs], fw_out[num_fwd_outputs:]
        grads = bw(*saved, *tangents)
    return outs, grads


def check_against_eager(f, primals, partition, tol=1e-5, **kwargs):
    joint, k = trace_joint(f, primals)
    fw, bw = partition(joint, None, num_fwd_outputs=k, **kwargs)
    ps = [p.detach().requires_grad_() for p in primals]
    outs = f(*ps)
    outs = outs if isinstance(outs, tuple) else (outs,)
    tangents = [rand(*o.shape, seed=5 + i) for i, o in enumerate(outs)]
    grads = kiln.autograd.grad(outs, ps, grad_outputs=tangents)
    got_outs, got_grads = run_partitioned(fw, bw, k, [p.detach() for p in primals], tangents)
    assert len(got_outs) == len(outs) and len(got_grads) == len(grads)
    for a, b in zip(got_outs, outs):
        close(a, b.detach(), tol)
    for a, b in zip(got_grads, grads):
        close(a, b, tol)
    return fw, bw


def targets(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def placeholders(gm):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def gelu_mul(x, w):
    return (F.gelu(x) * w).sum()


def test_gelu_default_saves_gelu_output():
    fw, bw = check_against_eager(gelu_mul, [rand(4, 8), rand(4, 8, seed=1)], default_partition)
    info = fw.meta["partition"]
    assert info.saved_values == ["primals_1", "primals_2", "gelu"]
    assert info.saved_bytes == 3 * 4 * 8 * 4
    assert placeholders(bw) == ["primals_1", "primals_2", "gelu", "tangents_1"]
    assert "aten.gelu.default" not in targets(bw)
    assert placeholders(fw) == ["primals_1", "primals_2"]


def test_gelu_min_cut_recomputes_gelu():
    fw, bw = check_against_eager(gelu_mul, [rand(4, 8), rand(4, 8, seed=1)], min_cut_rematerialization_partition)
    info = fw.meta["partition"]
    assert info.saved_values == ["primals_1", "primals_2"]  # x, not gelu(x)
    assert info.recomputed == ["gelu"]
    assert info.saved_bytes == 2 * 4 * 8 * 4
    assert "aten.gelu.default" in targets(bw)
    # Forward outputs: the loss, then the saved values.
    assert len(fw.graph.output_node().args[0]) == 1 + 2


def reciprocal_erf(x):
    r = kiln.reciprocal(x)
    return r.erf(), r.abs()


def test_min_cut_saves_only_inputs_eager_saves():
    # Note [Saving only the inputs eager saves]: no backward node reads x (reciprocal saves its
    # result), so min-cut saves the reciprocal rather than x and recomputing it: a saved x would
    # make a later x.zero_() raise in backward where eager trains on (fuzz seed 101, program 1545)
    fw, bw = check_against_eager(reciprocal_erf, [rand(4, 8)], min_cut_rematerialization_partition)
    info = fw.meta["partition"]
    assert info.saved_values == ["reciprocal"]
    # gelu's backward reads x: x is an input eager saves, and min-cut may keep it
    fw, _ = check_against_eager(gelu_mul, [rand(4, 8), rand(4, 8, seed=1)], min_cut_rematerialization_partition)
    assert fw.meta["partition"].saved_values == ["primals_1", "primals_2"]


def negate_then_invert(x):
    v = x * -1
    return v, 2 / v  # v returned: the user may change it in place afterwards


def test_min_cut_saves_only_outputs_eager_saves():
    # no backward node reads the returned v (2 / v is a reciprocal, which saves its result): v
    # saved (the cheaper cut) made the user's later v.fill_(-1.5) raise in the compiled backward
    # where eager trains on (fuzz seed 211, program 4860)
    fw, _ = check_against_eager(negate_then_invert, [rand(4, 8)], min_cut_rematerialization_partition)
    saved = fw.meta["partition"].saved_values
    assert "mul" not in saved and len(saved) == 1  # v is `mul`: a value computed from it instead

    def program(c):
        x = rand(4, 8).requires_grad_()
        v, w = c(negate_then_invert)(x)
        v.fill_(-1.5)
        w.sum().backward()
        return x.grad

    kiln._dynamo.reset()
    close(program(lambda f: kiln.compile(f, backend="inductor")), program(lambda f: f))


def tanh_mm(x, w):
    return kiln.tanh(x @ w).sum()


@pytest.mark.parametrize("partition", PARTITIONERS)
def test_matmul_is_never_recomputed(partition):
    fw, bw = check_against_eager(tanh_mm, [rand(4, 8), rand(8, 6, seed=1)], partition)
    fw_mms = [n.name for n in fw.graph.nodes if str(n.target) == "aten.mm.default"]
    assert len(fw_mms) == 1
    assert not set(fw_mms) & {n.name for n in bw.graph.nodes if n.op == "call_function"}
    if partition is min_cut_rematerialization_partition:
        info = fw.meta["partition"]
        assert fw_mms[0] in info.saved_values and "tanh" in info.recomputed


def test_checkpoint_policies():
    joint, k = trace_joint(gelu_mul, [rand(4, 8), rand(4, 8, seed=1)])
    gelu = next(n for n in joint.graph.nodes if n.name == "gelu")
    gelu.meta["recompute"] = CheckpointPolicy.MUST_SAVE
    fw, bw = min_cut_rematerialization_partition(joint, None, num_fwd_outputs=k)
    assert "gelu" in fw.meta["partition"].saved_values
    assert "aten.gelu.default" not in targets(bw)

    joint, k = trace_joint(tanh_mm, [rand(4, 8), rand(8, 6, seed=1)])
    mm = next(n for n in joint.graph.nodes if str(n.target) == "aten.mm.default")
    mm.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
    for partition in PARTITIONERS:  # default_partition hands annotated graphs to min-cut
        fw, bw = partition(joint, None, num_fwd_outputs=k)
        info = fw.meta["partition"]
        assert mm.name in info.recomputed and mm.name not in info.saved_values
        assert info.saved_values == ["primals_1", "primals_2"]
        x, w, t = rand(4, 8), rand(8, 6, seed=1), kiln.tensor(1.5)
        outs, grads = run_partitioned(fw, bw, k, [x, w], [t])
        xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
        ge = kiln.autograd.grad(tanh_mm(xe, we), [xe, we], grad_outputs=t)
        close(grads[0], ge[0]), close(grads[1], ge[1])


@pytest.mark.parametrize("partition", PARTITIONERS)
def test_mlp_layer_norm_and_multiple_outputs(partition):
    def f(x, w1, b1, w2, g, beta):
        h = F.relu(F.linear(x, w1, b1))
        h = F.layer_norm(h, (16,), g, beta)
        y = F.linear(h, w2)
        return y.sum(), (h * h).mean()

    prim = [rand(5, 8), rand(16, 8, seed=1), rand(16, seed=2), rand(3, 16, seed=3), rand(16, seed=4),
            rand(16, seed=6)]
    fw, bw = check_against_eager(f, prim, partition, tol=1e-4)
    assert all("tangents" not in n for n in placeholders(fw))


@pytest.mark.parametrize("partition", PARTITIONERS)
def test_conv_relu_pool(partition):
    def f(x, w, b):
        return F.max_pool2d(F.relu(F.conv2d(x, w, b, padding=1)), 2).sum()

    fw, bw = check_against_eager(f, [rand(2, 3, 6, 6), rand(4, 3, 3, 3, seed=1), rand(4, seed=2)], partition,
                                 tol=1e-4)
    fw_convs = {n.name for n in fw.graph.nodes if str(n.target) == "aten.convolution.default"}
    assert fw_convs and not fw_convs & {n.name for n in bw.graph.nodes}


def test_dropout_mask_is_saved_not_redrawn():
    def f(x, w):
        return (F.dropout(x, 0.5, training=True) * w).sum()

    joint, k = trace_joint(f, [rand(4, 8), rand(4, 8, seed=1)])
    random_ops = ("aten.native_dropout.", "aten.bernoulli", "aten.rand")
    assert any(any(t.startswith(r) for r in random_ops) for t in targets(joint))
    for partition in PARTITIONERS:
        fw, bw = partition(joint, None, num_fwd_outputs=k)
        assert not any(any(t.startswith(r) for r in random_ops) for t in targets(bw)), bw.code


def test_options_and_errors():
    joint, k = trace_joint(gelu_mul, [rand(4, 8), rand(4, 8, seed=1)])
    relaxed = MinCutOptions(ban_if_not_in_allowlist=False, ban_if_materialized_backward=False,
                            ban_if_reduction=False)
    fw, bw = min_cut_rematerialization_partition(joint, None, num_fwd_outputs=k, _options=relaxed)
    assert fw.meta["partition"].saved_values == ["primals_1", "primals_2"]
    with pytest.raises(ValueError):
        default_partition(joint, None, num_fwd_outputs=7)


def test_hand_built_joint_graph():
    # The contract without make_fx: a kiln.fx.Graph built by hand, meta['val'] from real tensors.
    g = kiln.fx.Graph()
    x = g.placeholder("primals_1")
    t = g.placeholder("tangents_1")
    aten = kiln.ops.aten
    sin = g.call_function(aten.sin.default, (x,))
    cos = g.call_function(aten.cos.default, (x,))
    d = g.call_function(aten.mul.Tensor, (t, cos))
    g.output((sin, d))
    xv = rand(3)
    for n, v in [(x, xv), (t, xv), (sin, xv), (cos, xv), (d, xv)]:
        n.meta["val"] = v
    joint = kiln.fx.GraphModule({}, g)
    for partition in PARTITIONERS:
        fw, bw = partition(joint, None, num_fwd_outputs=1)
        info = fw.meta["partition"]
        assert info.saved_values == ["primals_1"], info  # cos is in the backward: x is what it reads
        assert info.saved_bytes == 12
        (out,), (grad,) = run_partitioned(fw, bw, 1, [xv], [kiln.ones(3)])
        close(out, kiln.sin(xv)), close(grad, kiln.cos(xv))


@pytest.mark.parametrize("partition", PARTITIONERS)
def test_symbolic_sizes_are_saved_as_size_nodes(partition):
    def joint(primals, tangents):
        (x,) = primals
        out = (x * 2).sum()
        return (out, *kiln.autograd.grad(out, [x], grad_outputs=tangents))

    gm = make_fx(joint, tracing_mode="symbolic")([rand(4, 8).requires_grad_()], [kiln.ones(())])
    fw, bw = partition(gm, None, num_fwd_outputs=1)
    info = fw.meta["partition"]
    # The backward reads only x's sizes: the sizes are saved, x is not.
    assert info.saved_values == [] and info.saved_sym_nodes == ["sym_size", "sym_size_1"]
    assert placeholders(bw) == ["sym_size", "sym_size_1", "tangents_1"]
    out, *saved = fw(rand(6, 5))
    assert saved == [6, 5]
    (grad,) = bw(*saved, kiln.tensor(1.0))
    close(grad, kiln.full((6, 5), 2.0))


@pytest.mark.parametrize("partition", PARTITIONERS)
def test_saved_order_says_where_the_forward_saved_each_backward_input(partition):
    """The forward returns (*outs, *saved_values, *saved_sym_nodes); the backward takes
    (*saved_sym_nodes, *saved_values, *tangents): Partition.saved_order maps one onto the other,
    so the runtime never matches them by name."""
    def joint(primals, tangents):
        x, y = primals
        out = (x * 2).sum() + y.sin().sum()  # x's gradient needs its sizes, y's needs y
        return (out, *kiln.autograd.grad(out, [x, y], grad_outputs=tangents))

    gm = make_fx(joint, tracing_mode="symbolic")([rand(4, 8).requires_grad_(), rand(3).requires_grad_()],
                                                 [kiln.ones(())])
    fw, bw = partition(gm, None, num_fwd_outputs=1)
    info = fw.meta["partition"]
    assert info.saved_values == ["primals_2"] and len(info.saved_sym_nodes) == 2
    saved_outputs = [a.name for a in fw.graph.output_node().args[0][1:]]
    assert saved_outputs == [*info.saved_values, *info.saved_sym_nodes]
    backward_inputs = [name for name in placeholders(bw) if not name.startswith("tangents")]
    assert backward_inputs == [*info.saved_sym_nodes, *info.saved_values]
    assert info.saved_order == [1, 2, 0]
    assert [saved_outputs[k] for k in info.saved_order] == backward_inputs
    x, y = rand(6, 5), rand(7)
    out, *saved = fw(x, y)
    gx, gy = bw(*[saved[k] for k in info.saved_order], kiln.tensor(1.0))
    close(gx, kiln.full((6, 5), 2.0))
    close(gy, kiln.cos(y))


def test_joint_inputs_say_which_placeholders_are_tangents():
    """Note [The joint graph's contract] (aot/joint.h): given joint_inputs = (primals, tangents),
    as AOTAutograd passes them, the partitioners count the tangents and never read the
    placeholders' names; without them, PyTorch's names (tangents_*) decide."""
    joint, k = trace_joint(gelu_mul, [rand(4, 8), rand(4, 8, seed=1)])
    inputs = [n for n in joint.graph.nodes if n.op == "placeholder"]
    vals = [n.meta["val"] for n in inputs]
    for n, name in zip(inputs, ["x_in", "w_in", "grad_out"]):
        n.name = name
    joint.recompile()
    for partition in PARTITIONERS:
        fw, bw = partition(joint, (vals[:2], vals[2:]), num_fwd_outputs=k)
        assert placeholders(fw) == ["x_in", "w_in"]
        assert placeholders(bw)[-1] == "grad_out"
        x, w, t = rand(4, 8), rand(4, 8, seed=1), kiln.tensor(0.5)
        outs, grads = run_partitioned(fw, bw, k, [x, w], [t])
        xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
        ge = kiln.autograd.grad(gelu_mul(xe, we), [xe, we], grad_outputs=t)
        close(grads[0], ge[0]), close(grads[1], ge[1])
        # none given and no tangent by name: grad_out counts as a primal, which the default
        # partition does not save (the forward never reads it) and min-cut saves
        if partition is default_partition:
            with pytest.raises(RuntimeError, match="needs the input 'grad_out'"):
                partition(joint, None, num_fwd_outputs=k)
        else:
            assert "grad_out" in partition(joint, None, num_fwd_outputs=k)[0].meta["partition"].saved_values
        with pytest.raises(TypeError, match="joint_inputs"):
            partition(joint, vals, num_fwd_outputs=k)
    with pytest.raises(ValueError, match="placeholders"):
        kiln._C._aot.JointGraph(joint.graph, 2, 2, 1)
