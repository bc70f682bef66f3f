"""kiln.linalg.householder_product, the geqrf composite behind it (kiln/linalg/_householder.py) and
nn.utils.parametrizations.orthogonal (kiln/nn/utils/_orthogonal.py) against PyTorch 2.13.

householder_product: values on tall, square, batched and strided inputs with all or fewer reflectors
(float32, float64), float64 gradients of A and tau, torch's errors. _geqrf: LAPACK's compact QR to
rounding. orthogonal: with the Householder and Cayley maps, tall, wide, square and batched weights, with
and without the trivialization: the state right after registration where it is deterministic (the
geqrf reflectors, the orthogonalised base), then with torch's state dict loaded the weight and the float64
gradients of the original, assignment to the weight, orthonormality, state-dict keys, errors, and a
compiled training step (inductor, aot_eager) equal to eager. The matrix_exp map (PyTorch's default for
square weights) the same way.
"""

import numpy as np
import pytest

import kiln
import kiln.nn.utils.parametrizations as KP
from conftest import assert_same, requires_torch, torch
from kiln.linalg._householder import _geqrf

pytestmark = requires_torch

if torch is not None:
    import torch.nn.utils.parametrizations as TP

RNG = np.random.default_rng(2713)


def _reflectors(shape, k):
    """(A, tau) as geqrf leaves them for a random matrix of `shape`, the first k reflectors (torch's)."""
    a, tau = torch.geqrf(torch.tensor(RNG.standard_normal(shape)))
    return a.numpy(), tau[..., :k].numpy()


@pytest.mark.parametrize("shape,k", [((5, 3), 3), ((5, 3), 2), ((4, 4), 4), ((2, 6, 4), 4), ((3, 1), 1),
                                     ((4, 2), 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "transposed"])
def test_householder_product_values_and_gradients(shape, k, dtype, strided):
    a, tau = _reflectors(shape, k)
    results = []
    for lib in (kiln, torch):
        A = lib.tensor(np.swapaxes(a, -1, -2).copy(), dtype=getattr(lib, dtype)).transpose(-1, -2) if strided \
            else lib.tensor(a, dtype=getattr(lib, dtype))
        A.requires_grad_(True)
        t = lib.tensor(tau, dtype=getattr(lib, dtype), requires_grad=True)
        q = lib.linalg.householder_product(A, t)
        g = lib.tensor(np.cos(np.arange(q.numel())).reshape(tuple(q.shape)), dtype=q.dtype)
        assert q.requires_grad
        # with no reflector torch leaves A and tau out of the graph (None); kiln's gradients are zeros
        grads = lib.autograd.grad(q, [A, t], g, allow_unused=True)
        results.append((q.detach(), [lib.zeros_like(x) if gx is None else gx for x, gx in zip([A, t], grads)]))
    tol = (1e-5, 1e-6) if dtype == "float32" else (1e-12, 1e-13)
    assert_same(results[0][0], results[1][0], *tol)
    for kg, tg in zip(results[0][1], results[1][1]):
        assert_same(kg, tg.detach(), *tol)


@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (3, 5), (2, 6, 4), (1, 1), (3, 1)])
def test_geqrf_matches_lapack(shape):
    a = RNG.standard_normal(shape)
    ka, ktau = _geqrf(kiln.tensor(a))
    ta, ttau = torch.geqrf(torch.tensor(a))
    assert_same(ka, ta, 1e-12, 1e-13)
    assert_same(ktau, ttau, 1e-12, 1e-13)


HOUSEHOLDER_ERRORS = [
    lambda L: L.linalg.householder_product(L.ones(3), L.ones(1)),
    lambda L: L.linalg.householder_product(L.ones(3, 4), L.ones(2)),
    lambda L: L.linalg.householder_product(L.ones(4, 3), L.ones(4)),
    lambda L: L.linalg.householder_product(L.ones(4, 3), L.ones(1, 2)),
    lambda L: L.linalg.householder_product(L.ones(2, 4, 3), L.ones(3, 2)),
    lambda L: L.linalg.householder_product(L.ones(4, 3), L.ones(2, dtype=L.float64)),
    lambda L: L.linalg.householder_product(L.ones(4, 3, dtype=L.int64), L.ones(2, dtype=L.int64)),
]


@pytest.mark.parametrize("call", HOUSEHOLDER_ERRORS)
def test_householder_product_errors(call):
    with pytest.raises(Exception) as expected:
        call(torch)
    with pytest.raises(type(expected.value), match=f"^{expected.value}$".replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)").replace("]", r"\]")):
        call(kiln)


# --- parametrizations.orthogonal ---------------------------------------------------------------------
class _Batched:
    """A module holding a (2, 5, 3) batch of matrices, in either library."""

    @staticmethod
    def make(lib):
        class Batched(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = lib.nn.Parameter(lib.zeros(2, 5, 3, dtype=lib.float64))

            def forward(self, x):
                return (x @ self.weight).sum(0)

        return Batched()


def _modules(shape):
    """(kiln, torch) modules with the same float64 weight of `shape`; 2-D shapes are Linear layers."""
    weight = RNG.standard_normal(shape)
    if len(shape) == 2:
        mods = kiln.nn.Linear(shape[1], shape[0], dtype=kiln.float64), torch.nn.Linear(shape[1], shape[0]).double()
    else:
        mods = _Batched.make(kiln), _Batched.make(torch)
    with kiln.no_grad():
        mods[0].weight.copy_(kiln.tensor(weight))
    with torch.no_grad():
        mods[1].weight.copy_(torch.tensor(weight))
    if len(shape) == 2:
        with kiln.no_grad():
            mods[0].bias.copy_(kiln.tensor(mods[1].bias.detach().numpy()))
    return mods


CONFIGS = [((5, 3), "householder", True), ((5, 3), "householder", False), ((3, 5), "householder", False),
           ((4, 4), "householder", False), ((4, 4), "householder", True), ((4, 4), "cayley", True),
           ((6, 3), "cayley", True), ((3, 6), "cayley", False), ((3, 6), None, True), ((6, 2), None, False),
           ((2, 5, 3), "householder", True), ((2, 5, 3), "cayley", False), ((4, 4), None, True),
           ((4, 4), "matrix_exp", False), ((6, 3), "matrix_exp", True), ((2, 5, 3), "matrix_exp", False)]


@pytest.mark.parametrize("shape,omap,trivialization", CONFIGS, ids=[f"{s}-{m}-{t}" for s, m, t in CONFIGS])
def test_orthogonal_against_torch(shape, omap, trivialization):
    km, tm = _modules(shape)
    KP.orthogonal(km, orthogonal_map=omap, use_trivialization=trivialization)
    TP.orthogonal(tm, orthogonal_map=omap, use_trivialization=trivialization)
    t_state = tm.state_dict()
    assert list(km.state_dict()) == list(t_state)
    assert repr(km).replace("kiln", "torch") == repr(tm)
    n, k = max(shape[-2:]), min(shape[-2:])
    if not trivialization or shape[-2] == shape[-1]:  # registration is deterministic: torch's state exactly
        for name, value in t_state.items():
            assert_same(km.state_dict()[name], value, 1e-12, 1e-13)
    weight = km.weight.detach().numpy().reshape(-1, *shape[-2:])
    for w in weight:  # orthonormal columns (tall) or rows (wide)
        gram = w.T @ w if shape[-2] >= shape[-1] else w @ w.T
        np.testing.assert_allclose(gram, np.eye(k), atol=1e-12)
    # with torch's state loaded: the same weight and gradients of the original
    km.load_state_dict({name: kiln.tensor(v.numpy()) for name, v in t_state.items()})
    x = RNG.standard_normal((2, shape[-1]) if len(shape) == 2 else (shape[-2] - 1, shape[-2]))
    outs = []
    for lib, m in ((kiln, km), (torch, tm)):
        y = m(lib.tensor(x))
        original = m.parametrizations.weight.original
        outs.append((m.weight.detach(), y.detach(), lib.autograd.grad((y * y).sum(), original)[0]))
    for kv, tv in zip(*outs):
        assert_same(kv, tv, 1e-12, 1e-13)
    assert n >= k


@pytest.mark.parametrize("omap,trivialization", [("householder", True), ("householder", False),
                                                 ("cayley", True)])
def test_assigning_to_the_weight(omap, trivialization):
    km, tm = _modules((5, 3))
    KP.orthogonal(km, orthogonal_map=omap, use_trivialization=trivialization)
    TP.orthogonal(tm, orthogonal_map=omap, use_trivialization=trivialization)
    q = np.linalg.qr(RNG.standard_normal((5, 3)))[0]
    km.weight = kiln.tensor(q)
    tm.weight = torch.tensor(q)
    assert_same(km.weight.detach(), tm.weight.detach(), 1e-12, 1e-13)
    assert_same(km.parametrizations.weight.original.detach(), tm.parametrizations.weight.original.detach(), 1e-12,
                1e-13)
    np.testing.assert_allclose(km.weight.detach().numpy(), q, atol=1e-12)  # it starts at the assigned matrix


def test_orthogonal_errors():
    def same(call):
        with pytest.raises(Exception) as expected:
            call(torch, TP)
        with pytest.raises(type(expected.value)) as got:
            call(kiln, KP)
        assert str(got.value) == str(expected.value).replace("torch.", "kiln.")

    same(lambda L, P: P.orthogonal(L.nn.Linear(3, 3), orthogonal_map="foo"))
    same(lambda L, P: P.orthogonal(L.nn.Linear(3, 3), name="bias"))
    same(lambda L, P: P.orthogonal(L.nn.Linear(3, 3), name="nope"))
    same(lambda L, P: setattr(P.orthogonal(L.nn.Linear(3, 5), orthogonal_map="cayley"), "weight", L.ones(2, 2)))
    same(lambda L, P: setattr(P.orthogonal(L.nn.Linear(3, 5), orthogonal_map="cayley", use_trivialization=False),
                              "weight", L.ones(5, 3)))
    same(lambda L, P: setattr(P.orthogonal(L.nn.Linear(3, 3), use_trivialization=False), "weight", L.eye(3)))
    # matrix_exp is the default for a square weight
    assert KP.orthogonal(kiln.nn.Linear(3, 3)).parametrizations.weight[0].orthogonal_map.name == "matrix_exp"
    KP.orthogonal(kiln.nn.Linear(3, 4))  # a tall weight defaults to householder
    assert TP.orthogonal(torch.nn.Linear(3, 4)).parametrizations.weight[0].orthogonal_map.name == "householder"


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("omap", ["householder", "cayley", "matrix_exp"])
def test_compiled_training_step_matches_eager(backend, omap):
    models = []
    for _ in range(2):
        km, _tm = _modules((6, 4))
        km.load_state_dict({name: kiln.tensor(v.numpy()) for name, v in _tm.state_dict().items()})
        models.append(KP.orthogonal(km, orthogonal_map=omap))
    models[1].load_state_dict(models[0].state_dict())
    x = kiln.tensor(RNG.standard_normal((3, 4)))
    step = kiln.compile(lambda m, x: (m(x).tanh() ** 2).sum(), backend=backend)
    losses = []
    for model, run in ((models[0], lambda m, x: (m(x).tanh() ** 2).sum()), (models[1], step)):
        opt = kiln.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            loss = run(model, x)
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append((loss.detach(), model.weight.detach()))
    assert_same(losses[1][0], losses[0][0], 1e-12, 1e-13)
    assert_same(losses[1][1], losses[0][1], 1e-12, 1e-13)
