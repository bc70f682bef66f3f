"""The lazy layers against PyTorch 2.13 (issue 17): LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d,
LazyBatchNorm1d/2d/3d, LazyInstanceNorm1d/2d/3d and nn.UninitializedBuffer.

Before the first forward each prints as torch's and holds the same uninitialized parameters and
buffers; the first input materializes them (the module then becomes its eager class with torch's
shapes, dtype and initialisation); loading torch's state dict materializes them too, after which
outputs and float64 gradients (input and parameters) equal torch's, buffers included. Bad first
inputs raise torch's errors. A model of lazy layers, once initialized, compiles (inductor and
aot_eager) to the eager results.
"""

import copy

import numpy as np
import pytest

import kiln
import kiln.nn as knn
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

if torch is not None:
    import torch.nn as tnn

RNG = np.random.default_rng(11)

# (constructor over an nn namespace, input shape, the eager class it becomes)
LAYERS = [
    (lambda nn, **kw: nn.LazyConv1d(4, 3, **kw), (2, 3, 9), "Conv1d"),
    (lambda nn, **kw: nn.LazyConv1d(4, 3, stride=2, padding=1, groups=2, bias=False, **kw), (6, 8), "Conv1d"),
    (lambda nn, **kw: nn.LazyConv2d(6, (3, 2), padding="same", padding_mode="reflect", **kw), (2, 3, 5, 6), "Conv2d"),
    (lambda nn, **kw: nn.LazyConv2d(4, 3, dilation=2, **kw), (2, 7, 7), "Conv2d"),
    (lambda nn, **kw: nn.LazyConv3d(2, (2, 1, 3), stride=(1, 2, 1), **kw), (1, 3, 4, 5, 6), "Conv3d"),
    (lambda nn, **kw: nn.LazyConvTranspose1d(3, 3, stride=2, output_padding=1, **kw), (2, 4, 5), "ConvTranspose1d"),
    (lambda nn, **kw: nn.LazyConvTranspose2d(4, (2, 3), groups=2, dilation=(1, 2), **kw), (2, 4, 3, 4),
     "ConvTranspose2d"),
    (lambda nn, **kw: nn.LazyConvTranspose3d(2, 2, padding=1, bias=False, **kw), (3, 3, 4, 3), "ConvTranspose3d"),
    (lambda nn, **kw: nn.LazyBatchNorm1d(**kw), (4, 3), "BatchNorm1d"),
    (lambda nn, **kw: nn.LazyBatchNorm1d(momentum=None, **kw), (4, 3, 5), "BatchNorm1d"),
    (lambda nn, **kw: nn.LazyBatchNorm2d(eps=1e-3, affine=False, **kw), (2, 3, 4, 5), "BatchNorm2d"),
    (lambda nn, **kw: nn.LazyBatchNorm3d(track_running_stats=False, bias=False, **kw), (2, 3, 2, 3, 4), "BatchNorm3d"),
    (lambda nn, **kw: nn.LazyInstanceNorm1d(**kw), (2, 3, 6), "InstanceNorm1d"),
    (lambda nn, **kw: nn.LazyInstanceNorm2d(affine=True, track_running_stats=True, **kw), (2, 3, 4, 5),
     "InstanceNorm2d"),
    (lambda nn, **kw: nn.LazyInstanceNorm3d(affine=True, **kw), (2, 3, 2, 3, 4), "InstanceNorm3d"),
]
IDS = [f"{i}-{c[2]}" for i, c in enumerate(LAYERS)]


def _state(module):
    return {k: (v if knn.parameter.is_lazy(v) else v.detach().numpy().copy()) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("ctor, shape, becomes", LAYERS, ids=IDS)
def test_materializes_at_first_forward_as_torch(ctor, shape, becomes):
    k_mod, t_mod = ctor(knn), ctor(tnn)
    assert repr(k_mod) == repr(t_mod)
    k_state, t_state = k_mod.state_dict(), t_mod.state_dict()
    assert list(k_state) == list(t_state)
    assert [repr(v) for v in k_state.values()] == [repr(v) for v in t_state.values()]
    assert k_mod.has_uninitialized_params() and t_mod.has_uninitialized_params()
    out = k_mod(kiln.randn(*shape))
    t_out = t_mod(torch.randn(*shape))
    assert type(k_mod) is getattr(knn, becomes) and repr(k_mod) == repr(t_mod)
    assert tuple(out.shape) == tuple(t_out.shape)
    assert not k_mod._forward_pre_hooks and not any(knn.parameter.is_lazy(t) for t in k_mod.state_dict().values())
    for (kn, kp), (tn, tp) in zip(k_mod.state_dict(keep_vars=True).items(), t_mod.state_dict(keep_vars=True).items()):
        assert kn == tn and tuple(kp.shape) == tuple(tp.shape) and kp.requires_grad == tp.requires_grad
        assert type(kp) is (knn.Parameter if isinstance(tp, tnn.Parameter) else kiln.Tensor)
    if "Norm" in becomes:  # deterministic initialisation: ones, zeros, and the updated statistics
        for (kn, kv), tv in zip(_state(k_mod).items(), _state(t_mod).values()):
            if kn not in ("running_mean", "running_var"):
                np.testing.assert_array_equal(kv, tv.numpy() if hasattr(tv, "numpy") else tv)
    else:  # kaiming_uniform(a=sqrt(5)) and the bias: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        fan_in = k_mod.weight.shape[1] * int(np.prod(k_mod.kernel_size))
        for p in k_mod.parameters():
            v = p.detach().numpy()
            assert np.abs(v).max() <= 1 / np.sqrt(fan_in) and np.abs(v).max() > 0.1 / np.sqrt(fan_in)


@pytest.mark.parametrize("ctor, shape, becomes", LAYERS, ids=IDS)
def test_loaded_state_matches_torch_with_float64_gradients(ctor, shape, becomes):
    t_mod = ctor(tnn, dtype=torch.float64)
    t_mod(torch.randn(*shape, dtype=torch.float64))  # torch's materialized (and once-updated) state
    k_mod = ctor(knn, dtype=kiln.float64)
    if "InstanceNorm" in becomes:  # loading leaves num_features 0, which forward refuses (as torch's)
        k_mod(kiln.randn(*shape, dtype=kiln.float64))
    k_mod.load_state_dict({k: kiln.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    assert not any(knn.parameter.is_lazy(t) for t in k_mod.state_dict().values())
    x = RNG.standard_normal(shape)
    k_in, t_in = kiln.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    k_out, t_out = k_mod(k_in), t_mod(t_in)
    assert type(k_mod) is getattr(knn, becomes)
    assert_same(k_out, t_out.detach(), 1e-10, 1e-12)
    g = RNG.standard_normal(tuple(t_out.shape))
    k_params, t_params = list(k_mod.parameters()), list(t_mod.parameters())
    k_grads = kiln.autograd.grad(k_out, [k_in] + k_params, kiln.tensor(g))
    t_grads = torch.autograd.grad(t_out, [t_in] + t_params, torch.tensor(g))
    for kg, tg in zip(k_grads, t_grads):
        assert_same(kg, tg, 1e-9, 1e-11)
    for (kn, kv), (tn, tv) in zip(k_mod.state_dict().items(), t_mod.state_dict().items()):
        assert kn == tn
        assert_same(kv, tv, 1e-10, 1e-12)


def test_loading_keeps_the_feature_count_zero_as_torch():
    """PyTorch's load hook materializes the tensors but leaves num_features 0: a lazy batch norm
    then prints 0 features, a lazy affine instance norm refuses its input."""
    for lib in (kiln, torch):
        bn = lib.nn.LazyBatchNorm2d()
        bn.load_state_dict(lib.nn.BatchNorm2d(3).state_dict())
        bn(lib.randn(2, 3, 4, 5))
        assert repr(bn) == "BatchNorm2d(0, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"
        inorm = lib.nn.LazyInstanceNorm2d()
        inorm.load_state_dict(lib.nn.InstanceNorm2d(3, affine=True, track_running_stats=True).state_dict())
        with pytest.raises(ValueError, match=r"expected input's size at dim=1 to match num_features \(0\), but got: 3"):
            inorm(lib.randn(2, 3, 4, 5))


def test_uninitialized_buffer_as_torch():
    for lib in (kiln, torch):
        buf = lib.nn.UninitializedBuffer(dtype=lib.float64, persistent=False)
        assert repr(buf) == "<UninitializedBuffer>" and not buf.requires_grad and not buf.persistent
        with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter or buffer"):
            buf.shape
        m = lib.nn.Module()
        m.stat = buf  # an uninitialized buffer registers as a (here non-persistent) buffer
        assert [n for n, _ in m.named_buffers()] == ["stat"] and list(m.state_dict()) == []
        buf.materialize((2, 3))
        assert type(buf) is lib.Tensor and tuple(buf.shape) == (2, 3) and buf.dtype == lib.float64
        with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
            copy.deepcopy(lib.nn.LazyBatchNorm1d())
    assert knn.parameter.is_lazy(knn.UninitializedBuffer())


ERRORS = [
    ("conv2d-rank", lambda nn: nn.LazyConv2d(4, 3), (2, 3)),
    ("conv1d-rank", lambda nn: nn.LazyConv1d(4, 3), (1, 2, 3, 4)),
    ("conv-groups", lambda nn: nn.LazyConv2d(4, 3, groups=2), (1, 3, 5, 5)),
    ("conv-transpose-groups", lambda nn: nn.LazyConvTranspose1d(4, 3, groups=2), (3, 5)),
    ("batchnorm2d-rank", lambda nn: nn.LazyBatchNorm2d(), (2, 3, 4)),
    ("instancenorm1d-rank", lambda nn: nn.LazyInstanceNorm1d(), (2, 3, 4, 5)),
]


@pytest.mark.parametrize("desc, ctor, shape", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_first_input_raises_like_torch(desc, ctor, shape):
    with pytest.raises(Exception) as want:
        ctor(tnn)(torch.randn(*shape))
    with pytest.raises(Exception) as got:
        ctor(knn)(kiln.randn(*shape))
    assert type(got.value).__name__ == type(want.value).__name__
    assert str(got.value) == str(want.value).replace("torch.Size", "kiln.Size")


def _model(nn):
    return nn.Sequential(nn.LazyConv2d(4, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU(),
                         nn.LazyConvTranspose2d(3, 2, stride=2), nn.LazyInstanceNorm2d(affine=True), nn.Flatten(),
                         nn.LazyLinear(5))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_lazy_model_matches_eager(backend):
    kiln._dynamo.reset()
    kiln.manual_seed(0)
    model = _model(knn)
    x = kiln.tensor(RNG.standard_normal((2, 3, 4, 4)), dtype=kiln.float32)
    model(x)  # materialize
    assert not any(knn.parameter.is_lazy(p) for p in model.parameters())
    reference = copy.deepcopy(model)
    eager = reference(x)
    compiled = kiln.compile(model, backend=backend)(x)
    assert_same(compiled, eager.detach(), 1e-4, 1e-5)
    eager.square().sum().backward()
    compiled.square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert_same(p.grad, q.grad, 1e-4, 1e-5)
    kiln._dynamo.reset()
