"""F.unfold / F.fold, nn.Unfold / nn.Fold, F.affine_grid and F.grid_sample (issue 17:
kiln/nn/_spatial.py, kiln/nn/modules/fold.py) against torch.nn.functional, PyTorch 2.13.

Over their options (kernel, dilation, padding, stride; grid modes, padding modes, align_corners;
4-D and 5-D), on contiguous, transposed and strided inputs in float32 and float64: values, shapes,
strides of fresh results; float64 gradients of every input (image, columns, theta, grid) equal
PyTorch's; module reprs; warnings; one compiled program (inductor, aot_eager) equal to eager with no
graph break; bad input raises PyTorch's exception class and message.
"""

import warnings

import numpy as np
import pytest

import kiln
import kiln._dynamo
import kiln.nn.functional as KF
from conftest import assert_same, requires_torch, to_kiln, to_torch, torch

pytestmark = requires_torch
TF = torch.nn.functional if torch is not None else None
F = ["float32", "float64"]


def _layout(lib, data, name, layout):
    conv = to_kiln if lib is kiln else to_torch
    if layout == "T":  # same values, the last two dims' strides swapped
        return conv(np.ascontiguousarray(np.swapaxes(data, -1, -2)), name).transpose(-1, -2)
    if layout == "S":  # every other element of a wider buffer
        return conv(np.repeat(data, 2, axis=-1), name)[..., ::2]
    return conv(data, name)


def _inputs(arrays, name, layout):
    return ([_layout(kiln, a, name, layout) for a in arrays], [_layout(torch, a, name, layout) for a in arrays])


def _check(call, arrays, grad=True, rtol=None, atol=None):
    """call(F, *tensors) in kiln and torch: values for float32/float64 and every layout, then the
    float64 gradients of a weighted sum of the output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in F:
            for layout in (None, "T", "S"):
                k_in, t_in = _inputs(arrays, name, layout)
                want = call(TF, *t_in)
                got = call(KF, *k_in)
                assert_same(got, want, rtol, atol)
                assert got.is_contiguous()
        if not grad:
            return
        for layout in (None, "T"):
            k_in, t_in = _inputs(arrays, "float64", layout)
            for t in k_in + t_in:
                t.requires_grad_()
            want, got = call(TF, *t_in), call(KF, *k_in)
            weights = np.random.default_rng(7).normal(size=tuple(want.shape))
            t_grads = torch.autograd.grad((want * torch.tensor(weights)).sum(), t_in)
            k_grads = kiln.autograd.grad((got * kiln.tensor(weights)).sum(), k_in)
            for kg, tg in zip(k_grads, t_grads):
                assert_same(kg, tg, 1e-10, 1e-10)


# --- unfold / fold --------------------------------------------------------------------------------
FOLD_OPTIONS = [
    ((2, 3, 7, 6), dict(kernel_size=3)),
    ((2, 3, 7, 6), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3))),
    ((1, 2, 5, 5), dict(kernel_size=2, dilation=2, padding=1, stride=1)),
    ((3, 4, 6), dict(kernel_size=2, stride=2)),  # unbatched
    ((0, 2, 4, 4), dict(kernel_size=2)),  # empty batch
    ((2, 1, 3, 8), dict(kernel_size=(3, 1), stride=(1, 4))),
]


@pytest.mark.parametrize("shape,options", FOLD_OPTIONS, ids=[str(o) for _, o in FOLD_OPTIONS])
def test_unfold_matches_torch(shape, options):
    image = np.random.default_rng(0).normal(size=shape)
    _check(lambda f, x: f.unfold(x, **options), [image])


@pytest.mark.parametrize("shape,options", FOLD_OPTIONS, ids=[str(o) for _, o in FOLD_OPTIONS])
def test_fold_matches_torch(shape, options):
    columns_shape = tuple(TF.unfold(torch.zeros(shape), **options).shape)
    columns = np.random.default_rng(1).normal(size=columns_shape)
    _check(lambda f, c: f.fold(c, shape[-2:], **options), [columns])


def test_fold_of_unfold_counts_the_overlaps():
    # fold(unfold(x)) multiplies each pixel by the number of blocks covering it, as torch's
    x = np.random.default_rng(2).normal(size=(1, 2, 5, 4))
    _check(lambda f, x: f.fold(f.unfold(x, 2, padding=1), (5, 4), 2, padding=1), [x])


def test_fold_modules_match_torch():
    for kw in (dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=2, padding=1, stride=(1, 2))):
        k_unfold, t_unfold = kiln.nn.Unfold(**kw), torch.nn.Unfold(**kw)
        k_fold, t_fold = kiln.nn.Fold((7, 8), **kw), torch.nn.Fold((7, 8), **kw)
        assert repr(k_unfold) == repr(t_unfold) and repr(k_fold) == repr(t_fold)
        x = np.random.default_rng(3).normal(size=(2, 3, 7, 8))
        k_cols, t_cols = k_unfold(to_kiln(x, "float64")), t_unfold(to_torch(x, "float64"))
        assert_same(k_cols, t_cols)
        assert_same(k_fold(k_cols), t_fold(t_cols))
    assert kiln.nn.Fold.__constants__ == torch.nn.Fold.__constants__
    assert kiln.nn.Unfold.__constants__ == torch.nn.Unfold.__constants__


# --- affine_grid ----------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(2, 3, 5, 4), (1, 2, 1, 6), (2, 3, 1, 1), (2, 2, 3, 4, 5), (1, 1, 2, 1, 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_matches_torch(size, align_corners):
    theta = np.random.default_rng(4).normal(size=(size[0], len(size) - 2, len(size) - 1))
    _check(lambda f, th: f.affine_grid(th, size, align_corners=align_corners), [theta], rtol=1e-6, atol=1e-6)


def test_affine_grid_warnings_match_torch():
    theta = [[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]]
    for args, kwargs, match in [(((1, 1, 3, 3),), {}, "align_corners=False since 1.3.0"),
                                (((1, 1, 1, 3),), {"align_corners": True}, "unit-size grids")]:
        for lib, f in ((kiln, KF), (torch, TF)):
            with pytest.warns(UserWarning, match=match):
                f.affine_grid(lib.tensor(theta), *args, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        KF.affine_grid(kiln.tensor(theta), (1, 1, 3, 3), align_corners=False)


# --- grid_sample ----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shapes", [((2, 3, 5, 6), (2, 4, 7, 2)), ((1, 2, 1, 4), (1, 3, 3, 2)),
                                    ((1, 2, 3, 4, 5), (1, 2, 3, 4, 3))], ids=["2d", "2d_height1", "3d"])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners, shapes):
    rng = np.random.default_rng(5)
    image = rng.normal(size=shapes[0])
    grid = rng.uniform(-1.4, 1.4, size=shapes[1])  # some samples outside [-1, 1]: the padding modes
    _check(lambda f, x, g: f.grid_sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners),
           [image, grid])


def test_grid_sample_identity_and_empty_batch():
    x = np.random.default_rng(6).normal(size=(2, 3, 4, 5))
    theta = np.tile(np.array([[1.0, 0, 0], [0, 1, 0]]), (2, 1, 1))
    _check(lambda f, x, th: f.grid_sample(x, f.affine_grid(th, (2, 3, 4, 5), align_corners=False),
                                          align_corners=False), [x, theta])
    got = KF.grid_sample(kiln.zeros(0, 2, 3, 3), kiln.zeros(0, 4, 4, 2), align_corners=False)
    assert tuple(got.shape) == (0, 2, 4, 4)


def test_grid_sample_warns_without_align_corners():
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        KF.grid_sample(kiln.ones(1, 1, 2, 2), kiln.zeros(1, 1, 1, 2))


# --- compiled -------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_matches_eager(backend):
    rng = np.random.default_rng(8)
    arrays = [rng.normal(size=(2, 3, 6, 5)), rng.uniform(-1.2, 1.2, size=(2, 4, 3, 2)), rng.normal(size=(2, 2, 3))]

    def step(x, grid, theta):
        columns = KF.unfold(x, 3, padding=1, stride=2)
        image = KF.fold(columns * 2, (6, 5), 3, padding=1, stride=2)
        sampled = KF.grid_sample(x, grid, padding_mode="reflection", align_corners=False)
        warped = KF.grid_sample(x, KF.affine_grid(theta, (2, 3, 4, 4), align_corners=True), mode="nearest",
                                align_corners=True)
        return columns.sin(), image, sampled, warped

    def inputs():
        return [to_kiln(a, "float32").requires_grad_() for a in arrays]

    kiln._dynamo.reset()
    explained = kiln._dynamo.explain(step)(*inputs())
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    kiln._dynamo.reset()
    compiled = kiln.compile(step, backend=backend)
    eager_in, compiled_in = inputs(), inputs()
    want, got = step(*eager_in), compiled(*compiled_in)
    kiln._dynamo.reset()
    for g, w in zip(got, want):
        assert_same(g.detach(), w.detach(), 1e-5, 1e-5)
    want_grads = kiln.autograd.grad(sum((o * o).sum() for o in want), eager_in)
    got_grads = kiln.autograd.grad(sum((o * o).sum() for o in got), compiled_in)
    for g, w in zip(got_grads, want_grads):
        assert_same(g, w, 1e-4, 1e-4)


# --- errors: PyTorch's class and message ------------------------------------------------------------
def _t(lib, *shape, dtype=None):
    return lib.ones(shape, dtype=dtype or lib.float32)


ERRORS = [
    ("unfold 2-d", lambda lib, f: f.unfold(_t(lib, 2, 3), 2)),
    ("unfold 5-d", lambda lib, f: f.unfold(_t(lib, 1, 1, 2, 3, 3), 2)),
    ("unfold too small", lambda lib, f: f.unfold(_t(lib, 1, 2, 3, 5), 4)),
    ("unfold kernel 0", lambda lib, f: f.unfold(_t(lib, 1, 2, 3, 3), 0)),
    ("unfold stride 0", lambda lib, f: f.unfold(_t(lib, 1, 2, 3, 3), 2, stride=0)),
    ("unfold padding", lambda lib, f: f.unfold(_t(lib, 1, 2, 3, 3), 2, padding=-1)),
    ("unfold dilation", lambda lib, f: f.unfold(_t(lib, 1, 2, 3, 3), 2, dilation=(1, 0))),
    ("unfold no channels", lambda lib, f: f.unfold(_t(lib, 1, 0, 3, 3), 2)),
    ("unfold int", lambda lib, f: f.unfold(_t(lib, 1, 2, 3, 3, dtype=lib.int64), 2)),
    ("fold blocks", lambda lib, f: f.fold(_t(lib, 1, 8, 5), (3, 3), 2)),
    ("fold divisible", lambda lib, f: f.fold(_t(lib, 1, 7, 4), (3, 3), 2)),
    ("fold 1-d", lambda lib, f: f.fold(_t(lib, 8), (3, 3), 2)),
    ("fold int", lambda lib, f: f.fold(_t(lib, 1, 8, 4, dtype=lib.int64), (3, 3), 2)),
    ("fold stride", lambda lib, f: f.fold(_t(lib, 1, 8, 4), (3, 3), 2, stride=(1, 0))),
    ("affine_grid theta shape", lambda lib, f: f.affine_grid(_t(lib, 2, 3, 3), (2, 3, 4, 5), align_corners=False)),
    ("affine_grid 3d theta", lambda lib, f: f.affine_grid(_t(lib, 2, 2, 3), (2, 3, 4, 5, 6), align_corners=False)),
    ("affine_grid size", lambda lib, f: f.affine_grid(_t(lib, 2, 2, 3), (2, 3, 4), align_corners=False)),
    ("affine_grid int", lambda lib, f: f.affine_grid(_t(lib, 2, 2, 3, dtype=lib.int64), (2, 3, 4, 5),
                                                      align_corners=False)),
    ("affine_grid zero size", lambda lib, f: f.affine_grid(_t(lib, 2, 2, 3), (2, 3, 0, 5), align_corners=False)),
    ("affine_grid batch", lambda lib, f: f.affine_grid(_t(lib, 2, 2, 3), (3, 3, 4, 5), align_corners=False)),
    ("grid_sample mode", lambda lib, f: f.grid_sample(_t(lib, 1, 2, 3, 3), _t(lib, 1, 4, 4, 2), mode="area")),
    ("grid_sample padding", lambda lib, f: f.grid_sample(_t(lib, 1, 2, 3, 3), _t(lib, 1, 4, 4, 2),
                                                         padding_mode="circular")),
    ("grid_sample batch", lambda lib, f: f.grid_sample(_t(lib, 1, 2, 3, 3), _t(lib, 2, 4, 4, 2),
                                                       align_corners=False)),
    ("grid_sample last dim", lambda lib, f: f.grid_sample(_t(lib, 1, 2, 3, 3), _t(lib, 1, 4, 4, 3),
                                                          align_corners=False)),
    ("grid_sample empty", lambda lib, f: f.grid_sample(_t(lib, 1, 2, 0, 3), _t(lib, 1, 4, 4, 2),
                                                       align_corners=False)),
    ("grid_sample dtypes", lambda lib, f: f.grid_sample(_t(lib, 1, 2, 3, 3), _t(lib, 1, 4, 4, 2, dtype=lib.float64),
                                                        align_corners=False)),
    ("grid_sample int", lambda lib, f: f.grid_sample(_t(lib, 1, 2, 3, 3, dtype=lib.int64),
                                                     _t(lib, 1, 4, 4, 2, dtype=lib.int64), align_corners=False)),
]


@pytest.mark.parametrize("desc,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(desc, call):
    with pytest.raises(Exception) as expected:
        call(torch, TF)
    with pytest.raises(type(expected.value)) as got:
        call(kiln, KF)
    assert str(got.value) == str(expected.value).replace("torch.", "kiln.")
