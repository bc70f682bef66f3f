"""kiln.nn.init's orthogonal_, dirac_, eye_, sparse_ and the deprecated aliases, and kiln.nn.utils'
parametrize, parametrizations.weight_norm / spectral_norm and the older hook-based weight_norm /
spectral_norm, against PyTorch 2.13.

kiln's random stream is not PyTorch's (kiln.manual_seed(0) draws other normals), so orthogonal_ is
checked in two parts: its QR step (kiln.linalg_qr and PyTorch's sign fix) gives PyTorch's signed Q
for the same normal matrix to rounding, and the initialiser itself yields
(semi-)orthogonal matrices scaled by gain, reproducible from a generator. dirac_/eye_ are exact.
Parametrized modules load torch's state dict (same keys) and must give torch's values, buffers and
float64 gradients in train and eval mode; one weight-normed model is compiled against eager.
"""

import warnings

import numpy as np
import pytest

import kiln
import kiln.nn as knn
from conftest import requires_torch, torch
from kiln.nn import init as kinit

pytestmark = requires_torch

if torch is not None:
    import torch.nn as tnn

RNG = np.random.default_rng(1707)


def k_of(t):
    return kiln.from_numpy(t.detach().numpy().copy())


def load_into(k_mod, t_mod):
    t_state = t_mod.state_dict()
    assert list(k_mod.state_dict()) == list(t_state)
    k_mod.load_state_dict({k: k_of(v) for k, v in t_state.items()})


# --- init ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6, 4), (5, 5), (9, 1), (1, 1), (20, 7)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_orthogonal_qr_step_matches_torch(shape, dtype):
    """PyTorch's orthogonal_ is linalg.qr then Q times sign(diag(R)); kiln's of the same matrix."""
    a = RNG.standard_normal(shape)
    q, r = torch.linalg.qr(torch.tensor(a, dtype=getattr(torch, dtype)))
    want = (q * torch.diag(r).sign()).numpy()
    got = kinit._signed_q(kiln.tensor(a, dtype=getattr(kiln, dtype)))
    assert got.dtype == getattr(kiln, dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-13 if dtype == "float64" else 2e-6)


@pytest.mark.parametrize("shape,gain", [((8, 5), 1.0), ((5, 8), 1.0), ((6, 6), 2.5), ((4, 3, 2, 2), 0.5),
                                        ((3, 10, 2), 1.0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_orthogonal_properties(shape, gain, dtype):
    w = kiln.empty(shape, dtype=getattr(kiln, dtype))
    out = kinit.orthogonal_(w, gain=gain)
    assert out is w and w.dtype == getattr(kiln, dtype) and tuple(w.shape) == shape
    flat = w.reshape(shape[0], -1).numpy().astype(np.float64) / gain
    rows, cols = flat.shape
    gram = flat.T @ flat if rows >= cols else flat @ flat.T
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(gram, np.eye(min(rows, cols)), atol=tol)
    # torch's on the same shape is orthogonal the same way (the property, not the draw)
    t = tnn.init.orthogonal_(torch.empty(shape, dtype=getattr(torch, dtype)), gain=gain)
    t_flat = t.reshape(shape[0], -1).numpy().astype(np.float64) / gain
    t_gram = t_flat.T @ t_flat if rows >= cols else t_flat @ t_flat.T
    np.testing.assert_allclose(t_gram, np.eye(min(rows, cols)), atol=tol)


def test_orthogonal_generator_and_edge_cases():
    a, b = kiln.empty(5, 3), kiln.empty(5, 3)
    kinit.orthogonal_(a, generator=kiln.Generator().manual_seed(7))
    kinit.orthogonal_(b, generator=kiln.Generator().manual_seed(7))
    assert kiln.equal(a, b)
    # the matrix is uniformly distributed: the signed Q of a normal matrix, so columns are not always
    # positive on the diagonal (a fixed sign convention would be detectable)
    signs = set()
    for seed in range(8):
        w = kinit.orthogonal_(kiln.empty(3, 3), generator=kiln.Generator().manual_seed(seed))
        signs.add(tuple(np.sign(np.diag(w.numpy()))))
    assert len(signs) > 1
    empty = kiln.empty(0, 3)
    assert kinit.orthogonal_(empty) is empty
    p = knn.Parameter(kiln.empty(4, 4))
    kinit.orthogonal_(p)
    assert p.requires_grad and p.grad_fn is None
    for k_call, t_call in [(lambda: kinit.orthogonal_(kiln.empty(3)), lambda: tnn.init.orthogonal_(torch.empty(3)))]:
        _same_error(k_call, t_call)


@pytest.mark.parametrize("shape,groups", [((4, 4, 3), 1), ((6, 3, 3, 3), 1), ((6, 2, 3, 3), 2), ((4, 3, 2, 3, 5), 1),
                                          ((8, 2, 4, 4), 4), ((2, 5, 3, 3), 1)])
def test_dirac_exact(shape, groups):
    for dtype in ("float32", "float64"):
        w = kiln.full(shape, 7.0, dtype=getattr(kiln, dtype))
        assert kinit.dirac_(w, groups) is w
        want = tnn.init.dirac_(torch.full(shape, 7.0, dtype=getattr(torch, dtype)), groups)
        assert np.array_equal(w.numpy(), want.numpy())
    # what it is for: a convolution with a dirac weight passes its input channels through
    w = kinit.dirac_(kiln.empty(3, 3, 3, 3))
    x = kiln.randn(2, 3, 5, 5)
    np.testing.assert_allclose(knn.functional.conv2d(x, w, padding=1).numpy(), x.numpy(), atol=1e-6)


def test_eye_exact():
    for shape in [(3, 3), (2, 5), (5, 2)]:
        w = kinit.eye_(kiln.full(shape, 3.0))
        assert np.array_equal(w.numpy(), tnn.init.eye_(torch.full(shape, 3.0)).numpy())


def test_sparse():
    w = kiln.empty(10, 6)
    assert kinit.sparse_(w, 0.3, std=0.5) is w
    zeros = (w == 0).sum(0)
    assert zeros.tolist() == [3] * 6  # ceil(0.3 * 10) per column, as torch
    t = tnn.init.sparse_(torch.empty(10, 6), 0.3, std=0.5)
    assert (t == 0).sum(0).tolist() == zeros.tolist()
    big = kinit.sparse_(kiln.empty(400, 50), 0.1, std=0.5).numpy()
    nonzero = big[big != 0]
    assert abs(nonzero.std() - 0.5) < 0.02 and abs(nonzero.mean()) < 0.02


def _same_error(k_call, t_call):
    with pytest.raises(Exception) as t_info:
        t_call()
    with pytest.raises(type(t_info.value)) as k_info:
        k_call()
    assert str(k_info.value) == str(t_info.value).replace("torch.", "kiln.")


def test_init_errors_and_deprecated_names():
    _same_error(lambda: kinit.dirac_(kiln.empty(3, 3)), lambda: tnn.init.dirac_(torch.empty(3, 3)))
    _same_error(lambda: kinit.dirac_(kiln.empty(3, 3, 3), groups=2), lambda: tnn.init.dirac_(torch.empty(3, 3, 3), 2))
    _same_error(lambda: kinit.sparse_(kiln.empty(3), 0.1), lambda: tnn.init.sparse_(torch.empty(3), 0.1))
    _same_error(lambda: kinit.eye_(kiln.empty(3)), lambda: tnn.init.eye_(torch.empty(3)))
    for name in ["uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
                 "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"]:
        assert hasattr(tnn.init, name)
        with pytest.warns(FutureWarning, match=f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`"):
            args = {"constant": (0.5,), "sparse": (0.2,)}.get(name, ())
            shape = (3, 3, 3) if name == "dirac" else (4, 3)
            getattr(kinit, name)(kiln.empty(shape), *args)


# --- parametrize ----------------------------------------------------------------------------------
def _parametrization_classes(nn, lib):
    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    class Scale(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c = c

        def forward(self, X):
            return X * self.c

        def right_inverse(self, X):
            return X / self.c

    class Sum(nn.Module):  # two originals
        def forward(self, A, B):
            return A + B

        def right_inverse(self, X):
            return X * 0.25, X * 0.75

    return Symmetric, Scale, Sum


def test_register_parametrization_against_torch():
    k_sym, k_scale, k_sum = _parametrization_classes(knn, kiln)
    t_sym, t_scale, t_sum = _parametrization_classes(tnn, torch)
    P = knn.utils.parametrize
    tP = tnn.utils.parametrize
    t_lin, k_lin = tnn.Linear(4, 4, dtype=torch.float64), knn.Linear(4, 4, dtype=kiln.float64)
    load_into(k_lin, t_lin)
    k_weight = k_lin.weight
    for mod, Pm, sym, scale in [(t_lin, tP, t_sym, t_scale), (k_lin, P, k_sym, k_scale)]:
        Pm.register_parametrization(mod, "weight", sym())
        Pm.register_parametrization(mod, "weight", scale(2.0))
    assert k_lin.parametrizations.weight.original is k_weight  # the same parameter object (optimizers)
    assert type(k_lin).__name__ == "ParametrizedLinear" and repr(k_lin) == repr(t_lin)
    load_into(k_lin, t_lin)
    np.testing.assert_allclose(k_lin.weight.detach().numpy(), t_lin.weight.detach().numpy(), rtol=1e-15)
    w = k_lin.weight.detach().numpy()
    np.testing.assert_allclose(w, w.T)
    x = RNG.standard_normal((3, 4))
    t_out, k_out = t_lin(torch.tensor(x)), k_lin(kiln.tensor(x))
    np.testing.assert_allclose(k_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-14)
    t_out.square().sum().backward()
    k_out.square().sum().backward()
    np.testing.assert_allclose(k_lin.parametrizations.weight.original.grad.numpy(),
                               t_lin.parametrizations.weight.original.grad.numpy(), rtol=1e-12)
    # assignment goes through right_inverse (Symmetric has none: the error is PyTorch's)
    with pytest.raises(RuntimeError, match="parametrization Symmetric does not implement right_inverse."):
        k_lin.weight = kiln.zeros(4, 4, dtype=kiln.float64)
    # cached(): one evaluation per block
    calls = []
    k_lin.parametrizations.weight[0].register_forward_hook(lambda *a: calls.append(1))
    with P.cached():
        a, b = k_lin.weight, k_lin.weight
    assert a is b and len(calls) == 1
    assert P.is_parametrized(k_lin) and P.is_parametrized(k_lin, "weight") and not P.is_parametrized(k_lin, "bias")
    assert P.type_before_parametrizations(k_lin) is knn.Linear
    for mod, Pm in [(t_lin, tP), (k_lin, P)]:
        Pm.remove_parametrizations(mod, "weight", leave_parametrized=True)
    assert type(k_lin) is knn.Linear and not hasattr(k_lin, "parametrizations")
    assert k_lin.weight is k_weight and isinstance(k_lin.weight, knn.Parameter)
    np.testing.assert_allclose(k_lin.weight.detach().numpy(), t_lin.weight.detach().numpy(), rtol=1e-15)
    assert list(k_lin.state_dict()) == list(t_lin.state_dict())


def test_parametrization_with_two_originals_and_buffers():
    _, _, k_sum = _parametrization_classes(knn, kiln)
    _, _, t_sum = _parametrization_classes(tnn, torch)
    P, tP = knn.utils.parametrize, tnn.utils.parametrize
    t_bn, k_bn = tnn.BatchNorm1d(3), knn.BatchNorm1d(3)
    for mod, Pm, s in [(t_bn, tP, t_sum), (k_bn, P, k_sum)]:
        Pm.register_parametrization(mod, "weight", s())
        Pm.register_parametrization(mod, "running_mean", s())  # a buffer: originals are buffers
    assert list(k_bn.state_dict()) == list(t_bn.state_dict())
    assert sorted(n for n, _ in k_bn.named_buffers()) == sorted(n for n, _ in t_bn.named_buffers())
    load_into(k_bn, t_bn)
    k_bn.weight = kiln.full((3,), 2.0)  # right_inverse splits it
    assert k_bn.parametrizations.weight.original0.tolist() == [0.5] * 3
    assert k_bn.parametrizations.weight.original1.tolist() == [1.5] * 3
    with pytest.raises(ValueError) as k_info:
        P.remove_parametrizations(k_bn, "weight", leave_parametrized=False)
    with pytest.raises(ValueError) as t_info:
        tP.remove_parametrizations(t_bn, "weight", leave_parametrized=False)
    assert str(k_info.value) == str(t_info.value)
    P.remove_parametrizations(k_bn, "weight")
    assert isinstance(k_bn.weight, knn.Parameter) and k_bn.weight.tolist() == [2.0] * 3


def test_parametrize_errors():
    P, tP = knn.utils.parametrize, tnn.utils.parametrize

    def bad_dtype(nn, lib):
        class ToDouble(nn.Module):
            def forward(self, X):
                return X.double()
        return ToDouble()

    def bad_shape(nn, lib):
        class Flat(nn.Module):
            def forward(self, X):
                return X.reshape(-1)
        return Flat()

    for make in (bad_dtype, bad_shape):
        _same_error(lambda: P.register_parametrization(knn.Linear(2, 3), "weight", make(knn, kiln)),
                    lambda: tP.register_parametrization(tnn.Linear(2, 3), "weight", make(tnn, torch)))
    k_mod, t_mod = knn.Linear(2, 3), tnn.Linear(2, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name"):
        P.register_parametrization(k_mod, "nothing", knn.Identity())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(k_mod, "weight")
    P.register_parametrization(k_mod, "weight", knn.Identity())
    tP.register_parametrization(t_mod, "weight", tnn.Identity())
    _same_error(lambda: P.register_parametrization(k_mod, "weight", bad_shape(knn, kiln)),
                lambda: tP.register_parametrization(t_mod, "weight", bad_shape(tnn, torch)))
    import pickle

    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only supported through "
                                           "state_dict()"):
        pickle.dumps(k_mod)
    import copy

    clone = copy.deepcopy(k_mod)
    assert type(clone).__name__ == "ParametrizedLinear" and kiln.equal(clone.weight, k_mod.weight)


# --- weight_norm and spectral_norm ------------------------------------------------------------------
def _conv_or_linear(nn, lib, kind):
    if kind == "linear":
        return nn.Linear(5, 4, dtype=lib.float64)
    return nn.Conv2d(3, 4, 3, dtype=lib.float64)


def _input(kind):
    return RNG.standard_normal((3, 5) if kind == "linear" else (2, 3, 5, 5))


def _compare(k_mod, t_mod, kind, steps=2):
    """Forward twice (spectral_norm's power iteration moves its buffers in training), float64 gradients."""
    for _ in range(steps):
        x = _input(kind)
        t_in, k_in = torch.tensor(x, requires_grad=True), kiln.tensor(x, requires_grad=True)
        t_out, k_out = t_mod(t_in), k_mod(k_in)
        np.testing.assert_allclose(k_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-11, atol=1e-13)
        g = RNG.standard_normal(tuple(t_out.shape))
        t_out.backward(torch.tensor(g))
        k_out.backward(kiln.tensor(g))
        np.testing.assert_allclose(k_in.grad.numpy(), t_in.grad.numpy(), rtol=1e-10, atol=1e-12)
    k_params = dict(k_mod.named_parameters())
    assert sorted(k_params) == sorted(n for n, _ in t_mod.named_parameters())
    for n, p in t_mod.named_parameters():
        np.testing.assert_allclose(k_params[n].grad.numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)
    k_state = k_mod.state_dict()
    for n, v in t_mod.state_dict().items():
        np.testing.assert_allclose(k_state[n].numpy(), v.numpy(), rtol=1e-11, atol=1e-13, err_msg=n)


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_parametrizations_weight_norm(kind, dim):
    t_mod, k_mod = _conv_or_linear(tnn, torch, kind), _conv_or_linear(knn, kiln, kind)
    tnn.utils.parametrizations.weight_norm(t_mod, dim=dim)
    knn.utils.parametrizations.weight_norm(k_mod, dim=dim)
    assert "parametrizations.weight.original0" in k_mod.state_dict()
    load_into(k_mod, t_mod)
    assert repr(k_mod) == repr(t_mod)
    _compare(k_mod, t_mod, kind)
    # the older layout (weight_g, weight_v) loads into the parametrized module
    old = knn.Linear(5, 4, dtype=kiln.float64) if kind == "linear" else knn.Conv2d(3, 4, 3, dtype=kiln.float64)
    with pytest.warns(FutureWarning):
        knn.utils.weight_norm(old, dim=dim)
    k_mod.load_state_dict(old.state_dict())
    np.testing.assert_allclose(k_mod.weight.detach().numpy(), old.weight.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_parametrizations_spectral_norm(kind, mode):
    # seeded: two power iterations from an unlucky random start estimate sigma 10% off, and the
    # start came from whatever the tests before had drawn
    torch.manual_seed(0)
    t_mod, k_mod = _conv_or_linear(tnn, torch, kind), _conv_or_linear(knn, kiln, kind)
    tnn.utils.parametrizations.spectral_norm(t_mod, n_power_iterations=2)
    knn.utils.parametrizations.spectral_norm(k_mod, n_power_iterations=2)
    load_into(k_mod, t_mod)  # _u, _v buffers included: torch's random start
    t_mod.train(mode == "train")
    k_mod.train(mode == "train")
    _compare(k_mod, t_mod, kind)
    sigma = np.linalg.svd(k_mod.weight.detach().numpy().reshape(4, -1), compute_uv=False)[0]
    assert abs(sigma - 1.0) < 0.05  # normalised by (an estimate of) its largest singular value
    for call in (lambda m: m.utils.parametrizations.spectral_norm,):
        _same_error(lambda: call(knn)(knn.Linear(2, 2), n_power_iterations=0),
                    lambda: call(tnn)(tnn.Linear(2, 2), n_power_iterations=0))
        _same_error(lambda: call(knn)(knn.Linear(2, 2), dim=2), lambda: call(tnn)(tnn.Linear(2, 2), dim=2))
        _same_error(lambda: call(knn)(knn.Linear(2, 2), name="nothing"),
                    lambda: call(tnn)(tnn.Linear(2, 2), name="nothing"))


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_hook_weight_norm_and_spectral_norm(kind):
    for apply, remove in [("weight_norm", "remove_weight_norm"), ("spectral_norm", "remove_spectral_norm")]:
        t_mod, k_mod = _conv_or_linear(tnn, torch, kind), _conv_or_linear(knn, kiln, kind)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            getattr(tnn.utils, apply)(t_mod)
            getattr(knn.utils, apply)(k_mod)
        t_state = t_mod.state_dict()
        assert list(k_mod.state_dict()) == list(t_state)
        assert k_mod.state_dict()._metadata == t_state._metadata  # spectral_norm's version entry
        k_mod.load_state_dict({k: k_of(v) for k, v in t_state.items()})
        _compare(k_mod, t_mod, kind)
        getattr(tnn.utils, remove)(t_mod)
        getattr(knn.utils, remove)(k_mod)
        assert list(k_mod.state_dict()) == list(t_mod.state_dict()) == ["bias", "weight"]  # re-registered last
        np.testing.assert_allclose(k_mod.weight.detach().numpy(), t_mod.weight.detach().numpy(), rtol=1e-12)
        _same_error(lambda: getattr(knn.utils, remove)(k_mod), lambda: getattr(tnn.utils, remove)(t_mod))
    with pytest.warns(FutureWarning, match="`kiln.nn.utils.weight_norm` is deprecated"):
        m = knn.utils.weight_norm(knn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            knn.utils.weight_norm(m)


def test_norm_except_dim_matches_torch():
    a = RNG.standard_normal((3, 4, 5))
    for p, dim in [(2, 0), (2, 1), (2, 2), (2, -1), (3, 1)]:
        want = torch.norm_except_dim(torch.tensor(a), p, dim)
        got = kiln.norm_except_dim(kiln.tensor(a), p, dim)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_weight_normed_model(backend):
    kiln.manual_seed(0)
    model = knn.Sequential(knn.Linear(6, 8), knn.Tanh(), knn.Linear(8, 3))
    knn.utils.parametrizations.weight_norm(model[0])
    knn.utils.parametrizations.spectral_norm(model[2])
    model.eval()  # spectral_norm's buffers stay put: eager and compiled see the same ones
    x = kiln.randn(4, 6)
    eager = model(x).square().sum()
    params = list(model.parameters())
    g_eager = kiln.autograd.grad(eager, params)
    kiln._dynamo.reset()
    try:
        compiled = kiln.compile(lambda x: model(x).square().sum(), backend=backend)(x)
        g_compiled = kiln.autograd.grad(compiled, params)
    finally:
        kiln._dynamo.reset()
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-5)
    for a, b in zip(g_compiled, g_eager):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


# --- LazyLinear -----------------------------------------------------------------------------------
def test_lazy_linear_materializes_at_first_forward():
    k_mod, t_mod = knn.LazyLinear(3), tnn.LazyLinear(3)
    assert repr(k_mod) == repr(t_mod) and repr(k_mod.weight) == repr(t_mod.weight) == "<UninitializedParameter>"
    assert k_mod.has_uninitialized_params() and list(k_mod.state_dict()) == list(t_mod.state_dict())
    assert isinstance(k_mod.weight, knn.parameter.UninitializedParameter)
    assert knn.parameter.is_lazy(k_mod.weight) and not knn.parameter.is_lazy(knn.Parameter(kiln.zeros(1)))
    _same_error(lambda: k_mod.weight.shape, lambda: t_mod.weight.shape)
    clone = __import__("copy").deepcopy(k_mod)
    assert knn.parameter.is_lazy(clone.weight)
    x = kiln.randn(4, 2, 5)
    out = k_mod(x)
    assert type(k_mod) is knn.Linear and repr(k_mod) == "Linear(in_features=5, out_features=3, bias=True)"
    assert type(k_mod.weight) is knn.Parameter and k_mod.weight.requires_grad and tuple(k_mod.weight.shape) == (3, 5)
    assert not k_mod._forward_pre_hooks and not hasattr(k_mod, "_initialize_hook")
    bound = 1 / 5 ** 0.5  # Linear's initialisation (kaiming_uniform a=sqrt(5): the same bound for weight and bias)
    assert np.abs(k_mod.weight.detach().numpy()).max() <= bound and np.abs(k_mod.bias.detach().numpy()).max() <= bound
    np.testing.assert_allclose(out.detach().numpy(), knn.functional.linear(x, k_mod.weight, k_mod.bias).detach().numpy())
    t_mod(torch.randn(4, 2, 5))
    _same_error(lambda: k_mod(kiln.randn(2, 4)), lambda: t_mod(torch.randn(2, 4)))
    no_bias = knn.LazyLinear(2, bias=False, dtype=kiln.float64)
    no_bias(kiln.randn(3, 4, dtype=kiln.float64))
    assert no_bias.bias is None and no_bias.weight.dtype == kiln.float64


def test_lazy_linear_loads_a_state_dict_and_matches_torch():
    t_lin = tnn.Linear(6, 4, dtype=torch.float64)
    k_mod = knn.LazyLinear(4, dtype=kiln.float64)
    k_mod.load_state_dict({k: k_of(v) for k, v in t_lin.state_dict().items()})  # materialized by the hook
    assert type(k_mod) is knn.LazyLinear and tuple(k_mod.weight.shape) == (4, 6)
    x = RNG.standard_normal((3, 6))
    t_in, k_in = torch.tensor(x, requires_grad=True), kiln.tensor(x, requires_grad=True)
    t_out, k_out = t_lin(t_in), k_mod(k_in)
    assert type(k_mod) is knn.Linear and k_mod.in_features == 6
    np.testing.assert_allclose(k_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-14)
    t_out.square().sum().backward()
    k_out.square().sum().backward()
    np.testing.assert_allclose(k_in.grad.numpy(), t_in.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(k_mod.weight.grad.numpy(), t_lin.weight.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(k_mod.bias.grad.numpy(), t_lin.bias.grad.numpy(), rtol=1e-12, atol=1e-14)
