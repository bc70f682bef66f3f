"""Neural-network ops against PyTorch 2.13 (the oracle): matrix products, convolution, pooling and
normalization (tensor/ops/linalg.cc, conv_pool.cc, norm.cc).

Every case builds the same random inputs in both libraries, contiguous and non-contiguous
(transposed or strided views, as in test_ops.py), runs the op with the same options and compares
dtype, shape and values with `assert_same`. When PyTorch raises (an unsupported dtype, a bad
shape), kiln must raise the same exception class. Inputs must come back unchanged, except
batch_norm's running statistics in training mode, which must be updated in place exactly as
PyTorch updates them. The bad-input tests at the end also check that kiln's message names the
problem and that the process survives.
"""

import itertools

import numpy as np
import pytest

import kiln
from conftest import assert_same, random_array, requires_torch, to_kiln, to_torch, torch

pytestmark = requires_torch

F = torch.nn.functional if torch is not None else None
FLOATS = ["float32", "float64", "bfloat16", "float16"]
ALL = FLOATS + ["int64"]
# Products sum many terms in an order that differs between BLAS builds: looser than elementwise ops.
TOL = {"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10), "bfloat16": (3e-2, 6e-2), "float16": (4e-3, 1e-2),
       "int64": (0, 0)}


# --- helpers -----------------------------------------------------------------------------------------

def make(lib, data, name, layout=None):
    """One tensor of `lib` holding `data`: contiguous (None), transposed view ("T") or strided ("S")."""
    conv = to_kiln if lib is kiln else to_torch
    if layout == "T" and data.ndim >= 2:
        return conv(np.ascontiguousarray(np.swapaxes(data, -1, -2)), name).transpose(-1, -2)
    if layout == "S" and data.ndim >= 1:
        return conv(np.repeat(data, 2, axis=-1), name)[..., ::2]
    return conv(data, name)


def layouts(n):
    """Layout combinations for n tensor inputs: all contiguous, then alternating T/S views."""
    return [(None,) * n, tuple("TS"[i % 2] for i in range(n)), tuple("ST"[i % 2] for i in range(n))]


def check(fn, arrays, name, layout=None, tol=None, dtypes=None):
    """fn(lib, *tensors) on both libraries; arrays may hold None (an absent optional tensor).

    `dtypes` overrides the dtype per input (e.g. float32 parameters for a bfloat16 input)."""
    layout = layout or (None,) * len(arrays)
    dtypes = dtypes or [name] * len(arrays)
    args = {}
    for lib in (kiln, torch):
        args[lib] = [None if a is None else make(lib, a, d, l) for a, d, l in zip(arrays, dtypes, layout)]
    before = [None if t is None else t.clone() for t in args[kiln]]
    try:
        expected = fn(torch, *args[torch])
    except Exception as e:  # PyTorch rejects: kiln must reject with the same class
        with pytest.raises(type(e)):
            fn(kiln, *args[kiln])
        return
    got = fn(kiln, *args[kiln])
    rtol, atol = tol or TOL.get(name, (None, None))
    assert_same(got, expected, rtol, atol)
    for k, b in zip(args[kiln], before):  # inputs untouched
        if k is not None:
            assert_same(k, b, 0, 0)


def op(lib, name):
    """lib's function `name`; for PyTorch, torch.nn.functional's when the aten name is not public."""
    if lib is torch and not hasattr(torch, name):
        return getattr(F, name)
    return getattr(lib, name)


def rand(shape, name, rng, low=-2.0, high=2.0):
    return random_array(shape, name, rng, low, high)


# --- matrix products ---------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)), ((3, 4), (4, 5)),  # dot, mv, vm, mm
    ((2, 3, 4), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),  # folded / broadcast 2-D
    ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((1, 3, 4), (5, 1, 4, 2)),  # broadcast batch dims
    ((0, 3, 4), (4, 2)), ((2, 0, 4), (2, 4, 3)), ((3, 0), (0, 2)), ((3, 4), (4, 0)), ((0,), (0,)),  # 0-size
]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul(sa, sb, name):
    rng = np.random.default_rng(0)
    a, b = rand(sa, name, rng), rand(sb, name, rng)
    for lay in layouts(2):
        check(lambda lib, x, y: lib.matmul(x, y), [a, b], name, lay)
        check(lambda lib, x, y: x @ y, [a, b], name, lay)


FOLD_SHAPES = [((3, 5), (3, 5, 0)), ((3, 5), (4, 5, 2)), ((5,), (2, 5, 3)), ((2, 3, 5), (5,)), ((2, 3, 5), (5, 4)),
               ((4, 2, 3, 5), (5, 4)), ((1, 3, 5), (4, 5, 2)), ((3, 5), (2, 1, 5, 4)), ((0, 3, 5), (5, 4)),
               ((2, 3, 0), (0, 4)), ((2, 3, 5), (2, 5, 0)), ((2, 0, 5), (2, 5, 3)),
               # 3-D @ 3-D, a batch of 1 against another: dropped (then folded) when it requires grad
               ((0, 3, 5), (1, 5, 2)), ((1, 3, 5), (0, 5, 2)), ((1, 3, 0), (2, 0, 4)), ((3, 2, 5), (1, 5, 4))]


@pytest.mark.parametrize("sa,sb", FOLD_SHAPES, ids=str)
def test_matmul_folds_as_pytorch_does(sa, sb):
    # Note [matmul]: whether a batch folds into one mm follows PyTorch's rule (the smaller operand
    # requires grad, a 2-D left operand, row-contiguous batch dims), because it shows: mm compares
    # the dtypes always and bmm only when there is work, and the folded result of a 2-D @ 3-D
    # product is a contiguous copy of a transpose. Same dtype, result, strides and gradients, or
    # the same exception class.
    rng = np.random.default_rng(4)
    a, b = rand(sa, "float64", rng), rand(sb, "float64", rng)
    for (ga, gb), dtypes, lay in itertools.product([(0, 0), (1, 0), (0, 1), (1, 1)],
                                                   [("float64", "float64"), ("float64", "float32")],
                                                   [(None, None), ("B", None)]):
        results = {}
        for lib in (kiln, torch):
            x, y = make(lib, a, dtypes[0]), make(lib, b, dtypes[1])
            if lay[0] == "B" and x.dim() >= 3:  # batch dims not row-contiguous
                x = x.transpose(0, 1).contiguous().transpose(0, 1)
            x.requires_grad_(bool(ga))
            y.requires_grad_(bool(gb))
            try:
                out = x @ y
                if ga or gb:
                    (out.double() * 1.5).sum().backward()
                results[lib] = (out.detach(), x.grad, y.grad)
            except RuntimeError as e:
                results[lib] = e
        got, want = results[kiln], results[torch]
        case = f"{sa} @ {sb}, requires_grad {ga}{gb}, {dtypes}, {lay}"
        assert isinstance(got, Exception) == isinstance(want, Exception), f"{case}: {got!r} vs {want!r}"
        if isinstance(want, Exception):
            continue
        assert got[0].stride() == want[0].stride(), case
        for g, w in zip(got, want):
            assert (g is None) == (w is None), case
            if w is not None:
                assert_same(g, w, 1e-5, 1e-6)


@pytest.mark.parametrize("name", ALL)
def test_mm_bmm_dot_mv(name):
    rng = np.random.default_rng(1)
    for sa, sb in [((3, 4), (4, 5)), ((1, 1), (1, 1)), ((0, 2), (2, 3)), ((2, 0), (0, 3)), ((17, 33), (33, 9))]:
        for lay in layouts(2):
            check(lambda lib, x, y: lib.mm(x, y), [rand(sa, name, rng), rand(sb, name, rng)], name, lay)
            check(lambda lib, x, y: x.mm(y), [rand(sa, name, rng), rand(sb, name, rng)], name, lay)
    for sa, sb in [((2, 3, 4), (2, 4, 5)), ((0, 3, 4), (0, 4, 5)), ((3, 2, 0), (3, 0, 2)), ((4, 1, 6), (4, 6, 1))]:
        for lay in layouts(2):
            check(lambda lib, x, y: lib.bmm(x, y), [rand(sa, name, rng), rand(sb, name, rng)], name, lay)
    for n in (0, 1, 7, 100):
        for lay in layouts(2):
            check(lambda lib, x, y: lib.dot(x, y), [rand((n,), name, rng), rand((n,), name, rng)], name, lay)
    for m, n in ((3, 4), (0, 4), (3, 0), (1, 1)):
        for lay in layouts(2):
            check(lambda lib, x, y: lib.mv(x, y), [rand((m, n), name, rng), rand((n,), name, rng)], name, lay)


@pytest.mark.parametrize("name", ALL)
def test_addmm_baddbmm(name):
    rng = np.random.default_rng(2)
    scalars = [{}, {"beta": 0}, {"alpha": 2, "beta": 3}] + ([{"alpha": 0.5, "beta": 0.25}] if name in FLOATS else [])
    for self_shape in [(3, 5), (5,), (1, 5), (3, 1), ()]:
        for kw, lay in itertools.product(scalars, layouts(3)):
            arrays = [rand(self_shape, name, rng), rand((3, 4), name, rng), rand((4, 5), name, rng)]
            check(lambda lib, s, x, y: lib.addmm(s, x, y, **kw), arrays, name, lay)
    for self_shape in [(2, 3, 5), (3, 5), (5,), (2, 1, 5)]:
        for kw, lay in itertools.product(scalars, layouts(3)):
            arrays = [rand(self_shape, name, rng), rand((2, 3, 4), name, rng), rand((2, 4, 5), name, rng)]
            check(lambda lib, s, x, y: lib.baddbmm(s, x, y, **kw), arrays, name, lay)
    # k == 0: the product is all zeros, beta * self remains
    check(lambda lib, s, x, y: lib.addmm(s, x, y, beta=2), [rand((3, 5), name, rng), rand((3, 0), name, rng),
                                                           rand((0, 5), name, rng)], name)


@requires_torch
@pytest.mark.parametrize("name", FLOATS)
def test_addmm_activation(name):
    """_addmm_activation (PyTorch's fused linear + ReLU/GELU; the exact GELU on the CPU) equals
    PyTorch's for vector and matrix biases, alpha and beta; like PyTorch's it has no derivative."""
    rng = np.random.default_rng(4)
    for self_shape, kw in [((5,), {}), ((3, 5), {"beta": 0.5, "alpha": 2}), ((1, 5), {"beta": 0})]:
        for use_gelu in (False, True):
            arrays = [rand(self_shape, name, rng), rand((3, 4), name, rng), rand((4, 5), name, rng)]
            check(lambda lib, s, x, y: lib._addmm_activation(s, x, y, use_gelu=use_gelu, **kw), arrays, name)
    a = kiln.ones(2, 3, requires_grad=True)
    with pytest.raises(NotImplementedError, match="the derivative for 'aten::_addmm_activation' is not implemented"):
        kiln._addmm_activation(kiln.ones(4), a, kiln.ones(3, 4)).sum().backward()


@pytest.mark.parametrize("name", ALL)
def test_linear(name):
    rng = np.random.default_rng(3)
    for in_shape in [(4,), (3, 4), (2, 3, 4), (0, 4), (2, 0, 4)]:
        for bias in (True, False):
            arrays = [rand(in_shape, name, rng), rand((5, 4), name, rng), rand((5,), name, rng) if bias else None]
            for lay in [(None, None, None), ("S", "T", "S"), ("T", "S", None)]:
                check(lambda lib, x, w, b: op(lib, "linear")(x, w, b), arrays, name, lay)


# --- convolution ----------------------------------------------------------------------------------

CONV2D_CASES = [
    # (input shape, weight shape, options)
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3, 2), {"stride": 2}),
    ((2, 3, 7, 6), (4, 3, 3, 3), {"stride": (2, 1), "padding": (1, 2)}),
    ((1, 2, 9, 8), (3, 2, 3, 3), {"dilation": 2, "padding": 1}),
    ((1, 2, 9, 8), (3, 2, 2, 3), {"dilation": (1, 3), "stride": (3, 2), "padding": (0, 1)}),
    ((2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "padding": 1}),
    ((2, 4, 5, 5), (4, 1, 3, 3), {"groups": 4}),  # depthwise
    ((2, 3, 5, 5), (4, 3, 1, 1), {}),  # 1x1 (direct Gemm path)
    ((2, 3, 5, 5), (4, 3, 1, 1), {"stride": 2}),
    ((2, 3, 4, 4), (2, 3, 4, 4), {}),  # kernel covers the image
    ((3, 5, 5), (2, 3, 3, 3), {"padding": 1}),  # unbatched
    ((0, 3, 5, 5), (2, 3, 3, 3), {}),  # empty batch
    ((2, 3, 5, 5), (0, 3, 3, 3), {}),  # no output channels
    # "same" width at unit stride (im2col copies whole shifted planes), in blocks of samples per thread
    ((40, 16, 8, 8), (32, 16, 3, 3), {"padding": 1}),
    ((5, 3, 6, 6), (4, 3, 5, 5), {"padding": 2}),
    ((3, 2, 7, 5), (4, 2, 3, 3), {"padding": (1, 2), "dilation": (1, 2)}),
    ((3, 4, 2, 3), (4, 2, 5, 3), {"padding": (2, 1), "groups": 2}),  # kernel taller than the image
]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("case", range(len(CONV2D_CASES)))
def test_conv2d(case, name):
    in_shape, w_shape, kw = CONV2D_CASES[case]
    rng = np.random.default_rng(case)
    for bias, lay in itertools.product((True, False), [(None, None, None), ("T", "S", "S"), ("S", "T", None)]):
        arrays = [rand(in_shape, name, rng), rand(w_shape, name, rng), rand((w_shape[0],), name, rng) if bias else None]
        check(lambda lib, x, w, b: lib.conv2d(x, w, b, **kw), arrays, name, lay)


CONVOLUTION_CASES = [
    # (input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups)
    ((2, 3, 9), (4, 3, 3), [1], [0], [1], False, [0], 1),  # 1-D
    ((2, 4, 9), (6, 2, 3), [2], [1], [2], False, [0], 2),
    ((2, 3, 5, 4), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
    ((2, 3, 5, 4), (3, 4, 3, 3), [1, 1], [0, 0], [1, 1], True, [0, 0], 1),  # transposed: weight [Cin, Cout/g, ...]
    ((2, 3, 5, 4), (3, 2, 3, 2), [2, 3], [1, 0], [1, 1], True, [1, 2], 1),
    ((2, 4, 5, 4), (4, 3, 3, 3), [2, 2], [1, 1], [2, 1], True, [1, 0], 2),
    ((2, 4, 6), (4, 2, 3), [3], [1], [1], True, [2], 1),  # 1-D transposed
    ((1, 2, 4, 4), (2, 2, 1, 1), [2, 2], [0, 0], [1, 1], True, [1, 1], 1),
    ((0, 3, 5, 4), (3, 4, 3, 3), [1, 1], [0, 0], [1, 1], True, [0, 0], 1),
]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("case", range(len(CONVOLUTION_CASES)))
def test_aten_convolution(case, name):
    in_shape, w_shape, stride, padding, dilation, transposed, output_padding, groups = CONVOLUTION_CASES[case]
    rng = np.random.default_rng(100 + case)
    out_channels = w_shape[1] * groups if transposed else w_shape[0]

    def fn(lib, x, w, b):
        return lib.ops.aten.convolution.default(x, w, b, stride, padding, dilation, transposed, output_padding,
                                                groups)

    for bias, lay in itertools.product((True, False), [(None, None, None), ("T", "S", "S")]):
        arrays = [rand(in_shape, name, rng), rand(w_shape, name, rng), rand((out_channels,), name, rng) if bias else None]
        check(fn, arrays, name, lay)


# --- pooling --------------------------------------------------------------------------------------

POOL_SHAPES = [(2, 3, 7, 6), (3, 8, 8), (1, 1, 5, 9), (0, 2, 6, 6)]
MAX_POOL_OPTIONS = [
    {"kernel_size": 2}, {"kernel_size": (3, 2)}, {"kernel_size": 3, "stride": 2}, {"kernel_size": 3, "stride": (2, 1)},
    {"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": (2, 3), "padding": (1, 0)},
    {"kernel_size": 2, "dilation": 2}, {"kernel_size": 3, "dilation": (2, 1), "padding": 1, "stride": 2},
    {"kernel_size": 3, "stride": 2, "ceil_mode": True}, {"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True},
    {"kernel_size": 4, "stride": 4, "ceil_mode": True},
]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("opts", MAX_POOL_OPTIONS, ids=str)
def test_max_pool2d_with_indices(opts, name):
    rng = np.random.default_rng(4)
    for shape, lay in itertools.product(POOL_SHAPES, [None, "T", "S"]):
        data = rand(shape, name, rng)
        check(lambda lib, x: op(lib, "max_pool2d_with_indices")(x, **opts), [data], name, (lay,))
        check(lambda lib, x: op(lib, "max_pool2d")(x, **opts), [data], name, (lay,))


def test_max_pool2d_ties_and_nan():
    """Ties take the first index; a NaN wins its window, as in PyTorch."""
    data = np.array([[[[1.0, 1.0, 0.0], [1.0, np.nan, 2.0], [2.0, 2.0, 2.0]]]])
    for opts in [{"kernel_size": 2, "stride": 1}, {"kernel_size": 3, "padding": 1}, {"kernel_size": 2, "ceil_mode": True}]:
        check(lambda lib, x: op(lib, "max_pool2d_with_indices")(x, **opts), [data], "float32")
        check(lambda lib, x: op(lib, "max_pool2d_with_indices")(x, **opts), [np.ones((1, 1, 3, 3))], "float32")


AVG_POOL_OPTIONS = [
    {"kernel_size": 2}, {"kernel_size": (3, 2), "stride": (1, 2)},
    {"kernel_size": 3, "stride": 2, "padding": 1}, {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "ceil_mode": True}, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"kernel_size": 2, "divisor_override": 3}, {"kernel_size": 3, "padding": 1, "divisor_override": 2},
    {"kernel_size": (2, 4), "stride": 3, "padding": (1, 2), "ceil_mode": True, "divisor_override": 5},
]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("opts", AVG_POOL_OPTIONS, ids=str)
def test_avg_pool2d(opts, name):
    rng = np.random.default_rng(5)
    for shape, lay in itertools.product(POOL_SHAPES, [None, "T", "S"]):
        check(lambda lib, x: op(lib, "avg_pool2d")(x, **opts), [rand(shape, name, rng)], name, (lay,),
              tol=(2e-2, 2e-2) if name in ("bfloat16", "float16") else None)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("out", [(1, 1), (2, 3), (3, 3), (4, 6), (7, 6), (5, 1), (0, 2)], ids=str)
def test_adaptive_avg_pool2d(out, name):
    rng = np.random.default_rng(6)
    for shape, lay in itertools.product(POOL_SHAPES, [None, "T", "S"]):
        check(lambda lib, x: op(lib, "adaptive_avg_pool2d")(x, out), [rand(shape, name, rng)], name,
              (lay,), tol=(2e-2, 2e-2) if name in ("bfloat16", "float16") else None)


# --- normalization ----------------------------------------------------------------------------------

NORM_TOL = {"float32": (1e-4, 1e-4), "float64": (1e-9, 1e-9), "bfloat16": (3e-2, 3e-2), "float16": (5e-3, 5e-3)}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 2, 2), (0, 3, 4)], ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(training, shape, name):
    """batch_norm / native_batch_norm: output, saved statistics and the running statistics."""
    rng = np.random.default_rng(7)
    C = shape[1]
    param_dtypes = [name] + (["float32", name] if name in ("bfloat16", "float16") else [name])
    for affine, stats, momentum, pdtype in itertools.product((True, False), (True, False), (0.1, 0.5), param_dtypes):
        if not training and not stats:
            continue
        x = rand(shape, name, rng)
        params = [rand((C,), pdtype, rng) if affine else None, rand((C,), pdtype, rng) if affine else None]
        running = [rand((C,), pdtype, rng) if stats else None, rand((C,), pdtype, rng, 0.5, 2.0) if stats else None]
        # (int64 only contiguous: PyTorch's strided path raises RuntimeError from mean() instead of
        # its dispatch's NotImplementedError)
        for lay in [(None,) * 5] + ([("T", "S", "S", "S", "S")] if name != "int64" else []):
            tensors = {lib: [None if a is None else make(lib, a, d, l) for a, d, l in
                             zip([x] + params + running, [name] + [pdtype] * 4, lay)] for lib in (kiln, torch)}
            for op in ("batch_norm", "native_batch_norm"):
                res = {}
                for lib in (kiln, torch):
                    x_, w_, b_, rm_, rv_ = [None if t is None else t.clone() for t in tensors[lib]]
                    args = (x_, w_, b_, rm_, rv_, training, momentum, 1e-5)
                    try:
                        out = lib.batch_norm(*args, False) if op == "batch_norm" else lib.native_batch_norm(*args)
                    except Exception as e:
                        out = e
                    res[lib] = (out, x_, rm_, rv_)
                expected, got = res[torch], res[kiln]
                if isinstance(expected[0], Exception):
                    assert type(got[0]) is type(expected[0]), (got[0], expected[0])
                    continue
                if isinstance(got[0], Exception):
                    raise got[0]
                tol = NORM_TOL.get(name, (None, None))
                assert_same(got[0], expected[0], *tol)
                assert_same(got[1], expected[1], 0, 0)  # the input
                for g, e in zip(got[2:], expected[2:]):  # running statistics: updated in training only
                    if e is not None:
                        assert_same(g, e, *tol)


def test_batch_norm_running_stats_in_place():
    """Training updates the caller's running_mean/running_var tensors (and strided views) in place."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((5, 3, 4))
    for training in (True, False):
        k_rm, t_rm = kiln.zeros(6)[::2], torch.zeros(6)[::2]
        k_rv, t_rv = kiln.ones(3), torch.ones(3)
        for step in range(3):
            kiln.batch_norm(to_kiln(x + step, "float32"), None, None, k_rm, k_rv, training, 0.2, 1e-5, False)
            torch.batch_norm(to_torch(x + step, "float32"), None, None, t_rm, t_rv, training, 0.2, 1e-5, False)
        assert_same(k_rm, t_rm)
        assert_same(k_rv, t_rv)
        if not training:
            assert k_rm.tolist() == [0.0] * 3 and k_rv.tolist() == [1.0] * 3


@pytest.mark.parametrize("dtype", ["float32", "float64"])  # bfloat16: PyTorch's own mean is off by an ulp
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_of_equal_values_is_exactly_zero(dtype, affine):
    # (x - mean) * rstd, as PyTorch: x * rstd - mean * rstd left rounding error times 1/sqrt(eps)
    # (-3e-5 for [3, 3, 3]), and log() of the result gave nan where PyTorch gives -inf (fuzz seed
    # 71, programs 1043 and 1875)
    for value, n in [(3.0, 3), (0.3, 7), (0.1234567, 1), (-2.5, 33)]:
        outs = []
        for lib in (kiln, torch):
            d = getattr(lib, dtype)
            x = lib.full((2, n), value, dtype=d)
            w, b = (lib.ones(n, dtype=d), lib.zeros(n, dtype=d)) if affine else (None, None)
            outs.append(lib.nn.functional.layer_norm(x, (n,), w, b).tolist())
        assert outs[0] == outs[1] == [[0.0] * n] * 2


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_layer_norm_rows_are_independent_bit_for_bit(dtype):
    """Each row's statistics are what that row alone gives: the kernel computes four rows' moments
    with their updates interleaved (RowMoments in tensor/ops/norm.cc), and the rows left over one
    by one; checked across row counts, lengths around the register and chunk sizes, and both."""
    rng = np.random.default_rng(11)
    d = getattr(kiln, dtype)
    for m, n in [(1, 7), (4, 8), (5, 16), (7, 100), (9, 128), (6, 257), (13, 1000), (4, 2049)]:
        x = kiln.tensor(rng.standard_normal((m, n)) * 3 + 1).to(d)
        w, b = kiln.tensor(rng.standard_normal(n)).to(d), kiln.tensor(rng.standard_normal(n)).to(d)
        y, mean, rstd = kiln.native_layer_norm(x, [n], w, b, 1e-5)
        for r in range(m):
            yr, mr, rr = kiln.native_layer_norm(x[r:r + 1].clone(), [n], w, b, 1e-5)
            assert kiln.equal(y[r:r + 1], yr) and kiln.equal(mean[r:r + 1], mr) and kiln.equal(rstd[r:r + 1], rr)


@pytest.mark.parametrize("name", ALL)
def test_layer_norm(name):
    rng = np.random.default_rng(9)
    tol = NORM_TOL.get(name)
    for shape, norm in [((3, 4), [4]), ((2, 3, 5), [5]), ((2, 3, 5), [3, 5]), ((7,), [7]), ((0, 4), [4]),
                        ((2, 3, 4), [2, 3, 4]), ((2, 1), [1])]:
        pdtypes = [name] + (["float32"] if name in ("bfloat16", "float16") else [])
        for affine, pdtype, lay, eps in itertools.product(("none", "weight", "both"), pdtypes, layouts(3), (1e-5, 0.1)):
            w = rand(norm, pdtype, rng) if affine != "none" else None
            b = rand(norm, pdtype, rng) if affine == "both" else None
            fn = lambda lib, x, w, b: lib.layer_norm(x, norm, w, b, eps)
            check(fn, [rand(shape, name, rng), w, b], name, lay, tol, dtypes=[name, pdtype, pdtype])
            fn = lambda lib, x, w, b: lib.native_layer_norm(x, norm, w, b, eps)
            check(fn, [rand(shape, name, rng), w, b], name, lay, tol, dtypes=[name, pdtype, pdtype])


@pytest.mark.parametrize("name", ALL)
def test_group_norm(name):
    rng = np.random.default_rng(10)
    tol = NORM_TOL.get(name)
    for shape, groups in [((2, 6, 4), 3), ((2, 6, 4), 1), ((2, 6, 4), 6), ((2, 4, 3, 3), 2), ((3, 4), 2),
                          ((0, 4, 3), 2), ((1, 6, 2, 2, 2), 3), ((2, 6, 0), 3)]:
        C = shape[1]
        pdtypes = [name] + (["float32"] if name in ("bfloat16", "float16") else [])
        for affine, pdtype, lay in itertools.product((True, False), pdtypes, layouts(3)):
            arrays = [rand(shape, name, rng), rand((C,), pdtype, rng) if affine else None,
                      rand((C,), pdtype, rng) if affine else None]
            check(lambda lib, x, w, b: lib.group_norm(x, groups, w, b, 1e-5), arrays, name, lay, tol,
                  dtypes=[name, pdtype, pdtype])
            if lay[0] is not None:  # PyTorch's native_group_norm asserts a contiguous input; kiln copies
                continue
            hxw = int(np.prod(shape[2:]))
            check(lambda lib, x, w, b: lib.native_group_norm(x, w, b, shape[0], C, hxw, groups, 1e-3), arrays, name,
                  lay, tol, dtypes=[name, pdtype, pdtype])


# --- larger inputs (parallel loops, BLAS blocking) ----------------------------------------------------

@pytest.mark.parametrize("name", ["float32", "float64", "bfloat16"])
def test_larger_inputs(name):
    rng = np.random.default_rng(11)
    tol = {"float32": (2e-4, 2e-4), "float64": (1e-9, 1e-9), "bfloat16": (5e-2, 2e-1)}[name]
    x, w = rand((4, 16, 20, 18), name, rng, -1, 1), rand((32, 8, 3, 3), name, rng, -1, 1)
    check(lambda lib, x, w: lib.conv2d(x, w, None, 1, 1, 1, 2), [x, w], name, ("T", None), tol)
    check(lambda lib, x, w: lib.ops.aten.convolution.default(x, w, None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
          [x, rand((16, 4, 3, 3), name, rng, -1, 1)], name, tol=tol)
    check(lambda lib, a, b: lib.matmul(a, b), [rand((3, 64, 65), name, rng, -1, 1), rand((65, 70), name, rng, -1, 1)],
          name, ("T", "S"), tol)
    check(lambda lib, a, b: lib.bmm(a, b), [rand((5, 40, 33), name, rng, -1, 1), rand((5, 33, 50), name, rng, -1, 1)],
          name, ("S", "T"), tol)
    check(lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 3, 2, 1), [x], name, ("S",))
    check(lambda lib, x: op(lib, "avg_pool2d")(x, 3, 2, 1, True, False), [x], name, ("T",), tol)
    check(lambda lib, x: op(lib, "adaptive_avg_pool2d")(x, (7, 5)), [x], name, ("T",), tol)
    check(lambda lib, x: lib.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5), [x], name, tol=tol)
    check(lambda lib, x: lib.layer_norm(x, [20, 18]), [x], name, ("T",), tol)
    check(lambda lib, x: lib.group_norm(x, 4), [x], name, ("S",), tol)


# --- bad inputs -------------------------------------------------------------------------------------

def t(*shape, dtype="float32"):
    """Deterministic inputs for the bad-call table (built freshly per library)."""
    n = int(np.prod(shape)) if shape else 1
    return np.arange(n, dtype=np.float64).reshape(shape) % 7 - 3, dtype


# (id, call(lib, *tensors), inputs, words kiln's message must contain)
BAD_CALLS = [
    ("mm_shapes", lambda lib, a, b: lib.mm(a, b), [t(2, 3), t(4, 5)], "cannot be multiplied"),
    ("mm_1d", lambda lib, a, b: lib.mm(a, b), [t(3), t(3, 2)], "must be a matrix"),
    ("mm_dtypes", lambda lib, a, b: lib.mm(a, b), [t(2, 3), t(3, 2, dtype="float64")], "dtype"),
    ("mm_bool", lambda lib, a, b: lib.mm(a, b), [t(2, 3, dtype="bool"), t(3, 2, dtype="bool")], "Bool"),
    ("matmul_0d", lambda lib, a, b: lib.matmul(a, b), [t(), t(3)], "at least 1D"),
    ("matmul_shapes", lambda lib, a, b: lib.matmul(a, b), [t(2, 3, 4), t(5, 2)], "cannot be multiplied"),
    ("matmul_batch", lambda lib, a, b: lib.matmul(a, b), [t(2, 3, 4), t(3, 4, 2)], "must match"),
    ("bmm_2d", lambda lib, a, b: lib.bmm(a, b), [t(3, 4), t(4, 2)], "3D"),
    ("bmm_shapes", lambda lib, a, b: lib.bmm(a, b), [t(2, 3, 4), t(3, 4, 2)], "batch2"),
    ("bmm_dtypes", lambda lib, a, b: lib.bmm(a, b), [t(2, 3, 4), t(2, 4, 2, dtype="float64")], "expected scalar type"),
    ("relu_bool", lambda lib, a: lib.relu(a), [t(3, dtype="bool")], "Boolean inputs not supported for relu"),
    ("baddbmm_bool", lambda lib, a, b, c: lib.baddbmm(a, b, c),
     [t(1, 2, 3, dtype="bool"), t(1, 2, 4, dtype="bool"), t(1, 4, 3, dtype="bool")], "not implemented for 'Bool'"),
    ("baddbmm_bool_k0", lambda lib, a, b, c: lib.baddbmm(a, b, c),
     [t(1, 2, 3, dtype="bool"), t(1, 2, 0, dtype="bool"), t(1, 0, 3, dtype="bool")], "can't be cast"),
    ("relu__bool", lambda lib, a: a.relu_(), [t(3, dtype="bool")], "Boolean inputs not supported for relu"),
    ("mv_0d", lambda lib, a, b: lib.mv(a, b), [t(), t()], "Dimension specified as 0"),
    ("mv_1d", lambda lib, a, b: lib.mv(a, b), [t(3), t()], "vector + matrix @ vector expected"),
    ("dot_2d", lambda lib, a, b: lib.dot(a, b), [t(2, 2), t(4)], "1D tensors expected"),
    ("dot_sizes", lambda lib, a, b: lib.dot(a, b), [t(3), t(4)], "inconsistent tensor size"),
    ("dot_dtypes", lambda lib, a, b: lib.dot(a, b), [t(3), t(3, dtype="int64")], "same dtype"),
    ("mv_shapes", lambda lib, a, b: lib.mv(a, b), [t(2, 3), t(4)], "size mismatch"),
    ("mv_dims", lambda lib, a, b: lib.mv(a, b), [t(2, 3), t(3, 1)], "expected"),
    ("addmm_self", lambda lib, s, a, b: lib.addmm(s, a, b), [t(4), t(2, 3), t(3, 5)], "expanded size"),
    ("addmm_shapes", lambda lib, s, a, b: lib.addmm(s, a, b), [t(5), t(2, 3), t(2, 5)], "cannot be multiplied"),
    ("baddbmm_shapes", lambda lib, s, a, b: lib.baddbmm(s, a, b), [t(2, 3, 5), t(2, 3, 4), t(2, 3, 5)], "batch2"),
    ("linear_shapes", lambda lib, x, w: op(lib, "linear")(x, w), [t(2, 3), t(5, 4)], "cannot be multiplied"),
    ("linear_bias", lambda lib, x, w, b: op(lib, "linear")(x, w, b), [t(2, 3), t(5, 3), t(4)], "size"),
    ("conv_channels", lambda lib, x, w: lib.conv2d(x, w), [t(1, 3, 5, 5), t(2, 4, 3, 3)], "channels"),
    ("conv_dims", lambda lib, x, w: lib.conv2d(x, w), [t(3, 5, 5), t(2, 3, 3)], "convolution dimensions"),
    ("conv_input_dims", lambda lib, x, w: lib.conv2d(x, w), [t(5, 5), t(2, 1, 3, 3)], "input"),
    ("conv_big_kernel", lambda lib, x, w: lib.conv2d(x, w), [t(1, 1, 3, 3), t(1, 1, 4, 4)], "Kernel size"),
    ("conv_groups", lambda lib, x, w: lib.conv2d(x, w, groups=2), [t(1, 4, 5, 5), t(3, 2, 3, 3)], "groups"),
    ("conv_groups_zero", lambda lib, x, w: lib.conv2d(x, w, groups=0), [t(1, 4, 5, 5), t(2, 4, 3, 3)], "groups"),
    ("conv_stride", lambda lib, x, w: lib.conv2d(x, w, stride=0), [t(1, 1, 5, 5), t(1, 1, 3, 3)], "stride"),
    ("conv_padding", lambda lib, x, w: lib.conv2d(x, w, padding=-1), [t(1, 1, 5, 5), t(1, 1, 3, 3)], "padding"),
    ("conv_dilation", lambda lib, x, w: lib.conv2d(x, w, dilation=0), [t(1, 1, 5, 5), t(1, 1, 3, 3)], "dilation"),
    ("conv_bias", lambda lib, x, w, b: lib.conv2d(x, w, b), [t(1, 1, 5, 5), t(2, 1, 3, 3), t(3)], "bias"),
    ("conv_dtypes", lambda lib, x, w: lib.conv2d(x, w), [t(1, 1, 5, 5), t(1, 1, 3, 3, dtype="float64")], "type"),
    ("conv_bool", lambda lib, x, w: lib.conv2d(x, w), [t(1, 1, 5, 5, dtype="bool"), t(1, 1, 3, 3, dtype="bool")],
     "Bool"),
    ("conv_out_pad", lambda lib, x, w: lib.ops.aten.convolution.default(x, w, None, [1, 1], [0, 0], [1, 1], True,
                                                                         [2, 2], 1),
     [t(1, 2, 4, 4), t(2, 3, 3, 3)], "output padding"),
    ("conv_3d_stride", lambda lib, x, w: lib.conv2d(x, w, stride=[1, 1, 1]), [t(1, 1, 5, 5), t(1, 1, 3, 3)], "stride"),
    ("maxpool_dims", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 2), [t(4, 4)], "3D or 4D"),
    ("avgpool_dims", lambda lib, x: op(lib, "avg_pool2d")(x, 2), [t(4, 4)], "Dimension out of range"),
    ("maxpool_kernel0", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 0), [t(1, 4, 4)], "should"),
    ("maxpool_kernel_big", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 5), [t(1, 4, 4)], "too small"),
    ("maxpool_pad", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 2, padding=2), [t(1, 4, 4)], "pad"),
    ("maxpool_kernel3", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, [2, 2, 2]), [t(1, 4, 4)], "kernel_size"),
    ("maxpool_dilation0", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 2, dilation=0), [t(1, 4, 4)], "dilation"),
    ("maxpool_bool", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 2), [t(1, 4, 4, dtype="bool")], "Bool"),
    ("maxpool_empty", lambda lib, x: op(lib, "max_pool2d_with_indices")(x, 2), [t(1, 0, 4)], "Expected 3D or 4D"),
    ("avgpool_kernel_big", lambda lib, x: F.avg_pool2d(x, 5) if lib is torch else lib.avg_pool2d(x, 5),
     [t(1, 4, 4)], "too small"),
    ("avgpool_divisor0", lambda lib, x: F.avg_pool2d(x, 2, divisor_override=0) if lib is torch
     else lib.avg_pool2d(x, 2, divisor_override=0), [t(1, 4, 4)], "divisor"),
    ("avgpool_pad", lambda lib, x: F.avg_pool2d(x, 2, padding=3) if lib is torch else lib.avg_pool2d(x, 2, padding=3),
     [t(1, 4, 4)], "pad"),
    ("avgpool_stride0", lambda lib, x: F.avg_pool2d(x, 2, stride=0) if lib is torch else lib.avg_pool2d(x, 2, stride=0),
     [t(1, 4, 4)], "stride"),
    ("avgpool_bool", lambda lib, x: F.avg_pool2d(x, 2) if lib is torch else lib.avg_pool2d(x, 2),
     [t(1, 4, 4, dtype="bool")], "Bool"),
    ("adaptive_dims", lambda lib, x: op(lib, "adaptive_avg_pool2d")(x, 2), [t(4, 4)], "3D or 4D"),
    # (torch.nn.functional's wrapper raises ValueError first: call the aten op)
    ("adaptive_size", lambda lib, x: (torch._C._nn if lib is torch else lib).adaptive_avg_pool2d(x, [2, 2, 2]),
     [t(1, 4, 4)], "output_size"),
    ("adaptive_empty", lambda lib, x: op(lib, "adaptive_avg_pool2d")(x, 2), [t(1, 0, 4)], "empty"),
    ("adaptive_int", lambda lib, x: op(lib, "adaptive_avg_pool2d")(x, 2), [t(1, 4, 4, dtype="int64")],
     "Long"),
    ("bn_weight", lambda lib, x, w: lib.batch_norm(x, w, None, None, None, True, 0.1, 1e-5, False),
     [t(2, 3, 4), t(4)], "weight"),
    ("bn_running", lambda lib, x, m, v: lib.batch_norm(x, None, None, m, v, True, 0.1, 1e-5, False),
     [t(2, 3, 4), t(2), t(3)], "running_mean"),
    # (not native_batch_norm: PyTorch 2.13 crashes on this call)
    ("bn_eval_no_stats", lambda lib, x: lib.batch_norm(x, None, None, None, None, False, 0.1, 1e-5, False),
     [t(2, 3, 4)], "must be defined in evaluation mode"),
    # kiln.batch_norm has torch.nn.functional.batch_norm's check (torch.batch_norm itself has none)
    ("bn_one_value", lambda lib, x: F.batch_norm(x, None, None, training=True) if lib is torch
     else lib.batch_norm(x, None, None, None, None, True, 0.1, 1e-5, False), [t(1, 3)], "more than 1 value"),
    ("bn_1d", lambda lib, x: lib.batch_norm(x, None, None, None, None, True, 0.1, 1e-5, False), [t(3)],
     "Dimension out of range"),
    ("bn_int", lambda lib, x: lib.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
     [t(2, 3, dtype="int64")], "Long"),
    ("bn_mixed", lambda lib, x, w: lib.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5),
     [t(2, 3), t(3, dtype="float64")], "dtype"),
    ("ln_shape", lambda lib, x: lib.layer_norm(x, [3]), [t(2, 4)], "normalized_shape"),
    ("ln_empty_shape", lambda lib, x: lib.layer_norm(x, []), [t(2, 4)], "normalized_shape"),
    ("ln_weight", lambda lib, x, w: lib.layer_norm(x, [4], w), [t(2, 4), t(3)], "weight"),
    ("ln_bias", lambda lib, x, b: lib.layer_norm(x, [4], None, b), [t(2, 4), t(2, 4)], "bias"),
    ("ln_int", lambda lib, x: lib.layer_norm(x, [4]), [t(2, 4, dtype="int64")], "Long"),
    ("gn_groups", lambda lib, x: lib.group_norm(x, 4), [t(2, 6, 3)], "divisible"),
    ("gn_groups0", lambda lib, x: lib.group_norm(x, 0), [t(2, 6, 3)], "groups"),
    ("gn_weight", lambda lib, x, w: lib.group_norm(x, 2, w), [t(2, 6, 3), t(3)], "weight"),
    # kiln.group_norm has torch.nn.functional.group_norm's rank check (torch.group_norm: IndexError)
    ("gn_1d", lambda lib, x: op(lib, "group_norm")(x, 1) if lib is kiln else F.group_norm(x, 1), [t(6)],
     "at least 2 dimensions"),
    ("gn_int", lambda lib, x: lib.group_norm(x, 2), [t(2, 6, 3, dtype="int64")], "Long"),
]


@pytest.mark.parametrize("case", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_raise_like_torch(case):
    _, fn, inputs, words = case
    k_args = [make(kiln, data, dtype) for data, dtype in inputs]
    t_args = [make(torch, data, dtype) for data, dtype in inputs]
    with pytest.raises(Exception) as t_err:
        fn(torch, *t_args)
    assert words in str(t_err.value), f"the case's words no longer match PyTorch's message: {t_err.value}"
    with pytest.raises(Exception) as k_err:
        fn(kiln, *k_args)
    assert type(k_err.value) is type(t_err.value), f"kiln raised {k_err.value!r}, PyTorch {t_err.value!r}"
    assert words in str(k_err.value), f"kiln's message {str(k_err.value)!r} does not name the problem ({words!r})"
    for k, (data, dtype) in zip(k_args, inputs):  # inputs unchanged, process alive
        assert_same(k, make(torch, data, dtype), 0, 0)
    assert kiln.mm(kiln.ones(2, 2), kiln.ones(2, 2)).tolist() == [[2.0, 2.0], [2.0, 2.0]]


@pytest.mark.parametrize("dims", [1, 2])
def test_transposed_convolution_output_too_small_message_as_torch(dims):
    def call(lib):
        x, w = lib.ones(1, 4, *[5] * dims), lib.ones(4, 4, *[3] * dims)
        return lib.convolution(x, w, None, [1] * dims, [5] * dims, [1] * dims, True, [0] * dims, 1)
    with pytest.raises(RuntimeError) as want:
        call(torch)
    with pytest.raises(RuntimeError) as got:
        call(kiln)
    assert str(got.value) == str(want.value)
