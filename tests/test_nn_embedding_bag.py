"""nn.EmbeddingBag and F.embedding_bag (kiln/nn/_embedding_bag.py) against PyTorch 2.13.

Every case runs the same indices, offsets and weights through both libraries: sum, mean and max
bags given by offsets (empty bags, include_last_offset) or by a 2-D input, per_sample_weights,
padding_idx, scale_grad_by_freq and max_norm, on float32 and float64 weights that are contiguous or
strided views. Values must match and the float64 gradients of the weight (and of the per-sample
weights) must equal torch's for the same output gradient, ties in max mode included. The module is
checked for its repr, state_dict, from_pretrained and initialisation; bad calls raise torch's class
and message. Where PyTorch 2.13's CPU kernel departs from its documentation (input past a closing
offset, scale_grad_by_freq's counts: pytorch/pytorch#190063) the oracle is torch made to follow it; a compiled program (inductor, aot_eager) equals eager without a graph break, and
embedding_bag runs on fake tensors.
"""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch

if torch is not None:
    import torch.nn.functional as TF

RNG = np.random.default_rng(1717)
NUM_EMBEDDINGS, DIM = 10, 5
INDICES = np.array([1, 2, 4, 5, 4, 3, 2, 9, 4, 4, 0, 7])  # 4 repeats: padding_idx below, and frequencies

# (id, kwargs of F.embedding_bag beyond input/weight; "offsets" and "psw" are arrays made into tensors)
CASES = [
    ("mean", dict(offsets=[0, 3, 3, 7, 10])),
    ("sum", dict(offsets=[0, 3, 3, 7, 10], mode="sum")),
    ("max", dict(offsets=[0, 3, 3, 7, 10], mode="max")),
    ("one-bag", dict(offsets=[0], mode="max")),
    ("trailing-empty-bags", dict(offsets=[0, 5, 12, 12], mode="mean")),
    ("last-offset-sum", dict(offsets=[0, 3, 3, 7, 12], mode="sum", include_last_offset=True)),
    ("last-offset-max", dict(offsets=[0, 4, 12], mode="max", include_last_offset=True)),
    ("last-offset-trailing", dict(offsets=[0, 4, 9], mode="mean", include_last_offset=True)),
    ("last-offset-trailing-max", dict(offsets=[0, 4, 9], mode="max", include_last_offset=True, padding_idx=4)),
    ("last-offset-trailing-psw", dict(offsets=[0, 4, 4, 9], mode="sum", include_last_offset=True, psw=True)),
    ("psw", dict(offsets=[0, 3, 3, 7, 10], mode="sum", psw=True)),
    ("psw-padding", dict(offsets=[0, 2, 6], mode="sum", psw=True, padding_idx=4)),
    ("padding-mean", dict(offsets=[0, 3, 4, 6, 10], padding_idx=4)),  # bag 2 holds only padding
    ("padding-max", dict(offsets=[0, 3, 4, 6, 10], mode="max", padding_idx=4)),
    ("padding-negative", dict(offsets=[0, 6], mode="sum", padding_idx=-1)),
    ("freq-mean", dict(offsets=[0, 3, 7], scale_grad_by_freq=True)),
    ("freq-sum-padding", dict(offsets=[0, 3, 7], mode="sum", scale_grad_by_freq=True, padding_idx=4)),
    ("2d-mean", dict(shape=(3, 4))),
    ("2d-max", dict(shape=(4, 3), mode="max", padding_idx=2)),
    ("2d-sum-psw", dict(shape=(2, 6), mode="sum", psw=True)),
]


def _weight_array():
    return RNG.standard_normal((NUM_EMBEDDINGS, DIM))


WEIGHTS = _weight_array()


def _inputs(lib, kwargs, dtype, strided, weight=WEIGHTS):
    """(input, weight, call kwargs) for lib; strided: the weight and indices are non-contiguous views."""
    dt = getattr(lib, dtype)
    if strided:
        w = lib.tensor(np.repeat(weight, 2, axis=1), dtype=dt)[:, ::2]
        idx = lib.tensor(np.repeat(INDICES, 2))[::2]
        assert not w.is_contiguous() and not idx.is_contiguous()
    else:
        w, idx = lib.tensor(weight, dtype=dt), lib.tensor(INDICES)
    w.requires_grad_(True)
    call = {k: v for k, v in kwargs.items() if k not in ("offsets", "psw", "shape")}
    if "shape" in kwargs:
        idx = idx[:int(np.prod(kwargs["shape"]))].reshape(kwargs["shape"])
    else:
        call["offsets"] = lib.tensor(kwargs["offsets"])
    if kwargs.get("psw"):
        call["per_sample_weights"] = lib.tensor(np.linspace(-1.5, 2.0, idx.numel()).reshape(tuple(idx.shape)),
                                                dtype=dt).requires_grad_(True)
    return idx, w, call


def _documented_torch(idx, w, call):
    """torch's embedding_bag where PyTorch 2.13's CPU kernel departs from its documentation (see Note
    [Bags without a segment reduction]): input after a closing offset is cut off (it belongs to no
    bag), and scale_grad_by_freq is applied by hand, dividing each row's gradient by its frequency."""
    call = dict(call)
    end = call["offsets"][-1].item() if call.get("include_last_offset") else idx.numel()
    idx = idx[:end]
    if "per_sample_weights" in call:
        call["per_sample_weights"] = call["per_sample_weights"][:end]
    frequency = None
    if call.pop("scale_grad_by_freq", False):
        frequency = torch.bincount(idx.reshape(-1), minlength=w.size(0)).clamp(min=1).to(w.dtype).unsqueeze(1)
        w = _ScaleGrad.apply(w, frequency)
    return TF.embedding_bag(idx, w, **call)


if torch is not None:
    class _ScaleGrad(torch.autograd.Function):
        """Identity whose backward divides the gradient's rows by `frequency`."""

        @staticmethod
        def forward(ctx, w, frequency):
            ctx.save_for_backward(frequency)
            return w.view_as(w)

        @staticmethod
        def backward(ctx, grad):
            return grad / ctx.saved_tensors[0], None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=[c[0] for c in CASES])
def test_functional_values_and_gradients(name, kwargs, dtype, strided):
    out = {}
    for lib, F in ((kiln, KF), (torch, TF)):
        idx, w, call = _inputs(lib, kwargs, dtype, strided)
        y = KF.embedding_bag(idx, w, **call) if lib is kiln else _documented_torch(idx, w, call)
        grad_out = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)), dtype=y.dtype)
        wrt = [w] + ([call["per_sample_weights"]] if "per_sample_weights" in call else [])
        out[lib] = (y, lib.autograd.grad(y, wrt, grad_out))
    (ky, kgrads), (ty, tgrads) = out[kiln], out[torch]
    tol = (1e-5, 1e-6) if dtype == "float32" else (1e-12, 1e-13)
    assert_same(ky.detach(), ty.detach(), *tol)
    for kg, tg in zip(kgrads, tgrads):
        assert_same(kg, tg, *tol)


def test_max_ties_send_the_gradient_to_the_first_maximum():
    weight = np.array([[1.0, 2.0], [1.0, 3.0], [0.0, 3.0], [-1.0, 3.0]])
    grads = []
    for lib, F in ((kiln, KF), (torch, TF)):
        w = lib.tensor(weight, requires_grad=True)
        y = F.embedding_bag(lib.tensor([0, 1, 2, 1, 3, 2]), w, lib.tensor([0, 3]), mode="max")
        grads.append((y.detach(), lib.autograd.grad(y.sum(), w)[0]))
    assert_same(*grads[0][:1], *grads[1][:1])
    assert_same(grads[0][1], grads[1][1])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("indices,offsets", [
    ([], [0, 0, 0]),  # no input: every bag empty
    ([3, 1, 3], [0, 3, 3]),  # an empty last bag
    ([3, 1, 3], [0, 0, 1]),  # an empty first bag
], ids=["empty-input", "empty-last-bag", "empty-first-bag"])
def test_empty_bags_and_inputs(mode, indices, offsets):
    results = []
    for lib, F in ((kiln, KF), (torch, TF)):
        w = lib.tensor(WEIGHTS, requires_grad=True)
        y = F.embedding_bag(lib.tensor(indices, dtype=lib.int64), w, lib.tensor(offsets, dtype=lib.int64), mode=mode)
        results.append((y.detach(), lib.autograd.grad(y.sum(), w)[0]))
    assert_same(results[0][0], results[1][0])
    assert_same(results[0][1], results[1][1])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets,include_last", [([], False), ([0], True)], ids=["no-offsets", "closing-only"])
def test_no_bags(mode, offsets, include_last):
    # Not run through torch: with input but no bags, PyTorch 2.13's CPU kernels read past their
    # buffers (garbage gradients, at times a crash). The result is (0, dim), its gradient zero.
    w = kiln.tensor(WEIGHTS, requires_grad=True)
    y = KF.embedding_bag(kiln.tensor([3, 1]), w, kiln.tensor(offsets, dtype=kiln.int64), mode=mode,
                         include_last_offset=include_last)
    assert tuple(y.shape) == (0, DIM) and y.dtype == kiln.float64
    assert_same(kiln.autograd.grad(y.sum(), w)[0], torch.zeros(NUM_EMBEDDINGS, DIM, dtype=torch.float64))


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_int32_indices_and_offsets(index_dtype):
    ys = [F.embedding_bag(lib.tensor(INDICES, dtype=getattr(lib, index_dtype)), lib.tensor(WEIGHTS),
                          lib.tensor([0, 4, 4, 9], dtype=getattr(lib, index_dtype)), mode="sum")
          for lib, F in ((kiln, KF), (torch, TF))]
    assert_same(*ys, 1e-12, 1e-13)


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_max_norm_renormalises_the_looked_up_rows_in_place(norm_type):
    weight = WEIGHTS * 3
    pairs = []
    for lib, F in ((kiln, KF), (torch, TF)):
        w = lib.tensor(weight)
        y = F.embedding_bag(lib.tensor([1, 4, 4, 7]), w, lib.tensor([0, 2]), max_norm=1.5, norm_type=norm_type)
        pairs.append((y, w))
    assert_same(pairs[0][0], pairs[1][0], 1e-12, 1e-13)
    assert_same(pairs[0][1], pairs[1][1], 1e-12, 1e-13)  # rows 1, 4, 7 rescaled, the others untouched
    assert not np.allclose(pairs[0][1].numpy(), weight)


# --- the module -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {}, dict(mode="sum"), dict(mode="max", padding_idx=-2), dict(max_norm=1.0, norm_type=1, scale_grad_by_freq=True),
    dict(padding_idx=0, include_last_offset=True, sparse=True),
], ids=["default", "sum", "max-padding", "max-norm-freq", "last-offset"])
def test_module_repr_and_attributes(kwargs):
    k, t = kiln.nn.EmbeddingBag(NUM_EMBEDDINGS, DIM, **kwargs), torch.nn.EmbeddingBag(NUM_EMBEDDINGS, DIM, **kwargs)
    assert repr(k) == repr(t)
    for name in t.__constants__:
        assert getattr(k, name) == getattr(t, name), name
    assert tuple(k.weight.shape) == tuple(t.weight.shape) and k.weight.requires_grad
    if t.padding_idx is not None:  # N(0, 1) rows except the zero padding row
        assert (k.weight[t.padding_idx] == 0).all().item()


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_module_forward_with_torch_weights(mode):
    t = torch.nn.EmbeddingBag(NUM_EMBEDDINGS, DIM, mode=mode, padding_idx=4).double()
    k = kiln.nn.EmbeddingBag(NUM_EMBEDDINGS, DIM, mode=mode, padding_idx=4, dtype=kiln.float64)
    k.load_state_dict({name: kiln.tensor(v.numpy()) for name, v in t.state_dict().items()})
    assert list(k.state_dict()) == ["weight"]
    psw = dict(kiln=kiln.tensor(np.linspace(0, 1, 12)), torch=torch.tensor(np.linspace(0, 1, 12))) \
        if mode == "sum" else dict(kiln=None, torch=None)
    ky = k(kiln.tensor(INDICES), kiln.tensor([0, 5, 5]), per_sample_weights=psw["kiln"])
    ty = t(torch.tensor(INDICES), torch.tensor([0, 5, 5]), per_sample_weights=psw["torch"])
    kg, = kiln.autograd.grad(ky.sum(), k.weight)
    tg, = torch.autograd.grad(ty.sum(), t.weight)
    assert_same(ky.detach(), ty.detach(), 1e-12, 1e-13)
    assert_same(kg, tg, 1e-12, 1e-13)
    assert_same(k(kiln.tensor(INDICES[:8].reshape(2, 4))).detach(), t(torch.tensor(INDICES[:8].reshape(2, 4))).detach(),
                1e-12, 1e-13)


@pytest.mark.parametrize("freeze", [True, False])
def test_from_pretrained(freeze):
    k = kiln.nn.EmbeddingBag.from_pretrained(kiln.tensor(WEIGHTS), freeze=freeze, mode="max", padding_idx=1)
    t = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(WEIGHTS), freeze=freeze, mode="max", padding_idx=1)
    assert repr(k) == repr(t) and k.weight.requires_grad == t.weight.requires_grad == (not freeze)
    assert_same(k(kiln.tensor([[1, 2], [3, 1]])).detach(), t(torch.tensor([[1, 2], [3, 1]])).detach())


# --- errors ----------------------------------------------------------------------------------------
def _w(lib):
    return lib.tensor(WEIGHTS)


ERRORS = [
    ("offsets-start", lambda L, F: F.embedding_bag(L.tensor([1, 2, 4]), _w(L), L.tensor([1, 2]))),
    ("offsets-start-int32", lambda L, F: F.embedding_bag(L.tensor([1, 2], dtype=L.int32), _w(L),
                                                         L.tensor([1], dtype=L.int32))),
    ("offsets-end", lambda L, F: F.embedding_bag(L.tensor([1, 2, 4]), _w(L), L.tensor([0, 9]))),
    ("index-high", lambda L, F: F.embedding_bag(L.tensor([1, 2, 10]), _w(L), L.tensor([0]))),
    ("index-high-float32", lambda L, F: F.embedding_bag(L.tensor([1, 2, 10]), _w(L).float(), L.tensor([0]))),
    ("index-negative-half-sum", lambda L, F: F.embedding_bag(L.tensor([-1, 2]), _w(L).half(), L.tensor([0]),
                                                             mode="sum")),
    ("index-negative-max", lambda L, F: F.embedding_bag(L.tensor([1, -1]), _w(L), L.tensor([0]), mode="max")),
    ("index-high-2d-padding", lambda L, F: F.embedding_bag(L.tensor([[1, 10]]), _w(L), padding_idx=0)),
    ("float-indices", lambda L, F: F.embedding_bag(L.tensor([1.0, 2.0]), _w(L), L.tensor([0]))),
    ("float-offsets", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L), L.tensor([0.0], dtype=L.float64))),
    ("int-weight", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L).int(), L.tensor([0]))),
    ("psw-dtype", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L).float(), L.tensor([0]), mode="sum",
                                               per_sample_weights=L.ones(2, dtype=L.float64))),
    ("psw-mean", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L), L.tensor([0]),
                                              per_sample_weights=L.ones(2, dtype=L.float64))),
    ("mode", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L), L.tensor([0]), mode="min")),
    ("no-offsets", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L))),
    ("2d-offsets", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L), L.zeros(1, 1, dtype=L.int64))),
    ("2d-input-offsets", lambda L, F: F.embedding_bag(L.tensor([[1, 2]]), _w(L), L.tensor([0]))),
    ("3d-input", lambda L, F: F.embedding_bag(L.tensor([[[1, 2]]]), _w(L))),
    ("1d-weight", lambda L, F: F.embedding_bag(L.tensor([1, 2]), _w(L)[0], L.tensor([0]))),
    ("max-freq", lambda L, F: F.embedding_bag(L.tensor([1]), _w(L), L.tensor([0]), mode="max",
                                              scale_grad_by_freq=True)),
    ("max-sparse", lambda L, F: F.embedding_bag(L.tensor([1]), _w(L), L.tensor([0]), mode="max", sparse=True)),
    ("padding-high", lambda L, F: F.embedding_bag(L.tensor([1]), _w(L), L.tensor([0]), padding_idx=10)),
    ("padding-low", lambda L, F: F.embedding_bag(L.tensor([1]), _w(L), L.tensor([0]), padding_idx=-11)),
    ("last-offset-none", lambda L, F: F.embedding_bag(L.tensor([1]), _w(L), L.tensor([], dtype=L.int64),
                                                      include_last_offset=True)),
    ("module-padding", lambda L, F: L.nn.EmbeddingBag(10, 3, padding_idx=10)),
    ("module-padding-low", lambda L, F: L.nn.EmbeddingBag(10, 3, padding_idx=-11)),
    ("module-weight-shape", lambda L, F: L.nn.EmbeddingBag(10, 3, _weight=L.ones(3, 3))),
    ("pretrained-1d", lambda L, F: L.nn.EmbeddingBag.from_pretrained(L.ones(3))),
    ("module-mode", lambda L, F: L.nn.EmbeddingBag(10, 3, mode="x")(L.tensor([1]), L.tensor([0]))),
]


@pytest.mark.parametrize("name,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(name, call):
    with pytest.raises(Exception) as expected:
        call(torch, TF)
    with pytest.raises(type(expected.value)) as got:
        call(kiln, KF)
    assert str(got.value) == str(expected.value)


def test_per_sample_weights_shape_error():
    # torch prints its shapes as torch.Size; kiln's are kiln.Size, the rest of the message is torch's.
    with pytest.raises(ValueError, match=r"embedding_bag: If per_sample_weights \(kiln.Size\(\[3\]\)\) is not None, "
                                         r"then it must have the same shape as the input \(kiln.Size\(\[2\]\)\)"):
        KF.embedding_bag(kiln.tensor([1, 2]), _w(kiln), kiln.tensor([0]), mode="sum", per_sample_weights=kiln.ones(3))


def test_sparse_gradients_are_not_supported():
    with pytest.raises(NotImplementedError, match="sparse"):
        KF.embedding_bag(kiln.tensor([1]), _w(kiln), kiln.tensor([0]), mode="sum", sparse=True)


# --- fake tensors and compilation --------------------------------------------------------------------
def test_fake_tensors_give_the_shape():
    from kiln._subclasses import FakeTensorMode

    with FakeTensorMode():
        y = KF.embedding_bag(kiln.zeros(12, dtype=kiln.int64), kiln.empty(NUM_EMBEDDINGS, DIM),
                             kiln.zeros(4, dtype=kiln.int64), mode="max", include_last_offset=True)
    assert tuple(y.shape) == (3, DIM)


def _program(F, indices, offsets, weight, psw):
    bags = F.embedding_bag(indices, weight, offsets, mode="max", padding_idx=4).tanh()
    bags = bags + F.embedding_bag(indices, weight, offsets, per_sample_weights=psw, mode="sum")
    fixed = F.embedding_bag(indices[:8].reshape(2, 4), weight, scale_grad_by_freq=True)
    return bags.sum(0) * fixed.mean(0)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_program_matches_eager(backend):
    import kiln._dynamo as dynamo

    weight = kiln.tensor(WEIGHTS, requires_grad=True)
    psw = kiln.tensor(np.linspace(-1, 1, 12), requires_grad=True)
    args = (kiln.tensor(INDICES), kiln.tensor([0, 3, 3, 7, 10]), weight, psw)
    eager = _program(KF, *args)
    compiled = kiln.compile(lambda *a: _program(KF, *a), backend=backend)(*args)
    assert_same(compiled.detach(), eager.detach(), 1e-12, 1e-13)
    for ge, gc in zip(kiln.autograd.grad(eager.sum(), [weight, psw]), kiln.autograd.grad(compiled.sum(), [weight, psw])):
        assert_same(gc, ge, 1e-12, 1e-13)
    assert dynamo.explain(lambda *a: _program(KF, *a))(*args).graph_break_count == 0
