"""The backward ops as aten ops of their own (tensor/ops/activation_backward.cc, norm_backward.cc,
conv_pool_backward.cc, loss_backward.cc) against PyTorch 2.13's `torch.ops.aten.<name>`.

Each case builds the same random inputs in both libraries (contiguous and non-contiguous views,
0-size batches, float32 and float64, the 16-bit floats for the pointwise ops), calls
`kiln.ops.aten.<name>` and `torch.ops.aten.<name>` with identical arguments and compares dtype,
shape and values. The same calls on meta tensors must give the sizes, strides and dtypes PyTorch's
meta functions give; the schemas must be PyTorch's; the forward ops must save what the backward
ops read (save_mean/save_invstd, mean/rstd, total_weight, indices); and wrong sizes must raise a
RuntimeError that names the op, leaving the process working.
"""

import numpy as np
import pytest

import kiln
from conftest import assert_same, random_array, requires_torch, to_kiln, to_torch, torch

pytestmark = requires_torch

TOL = {"float32": (2e-5, 2e-5), "float64": (1e-10, 1e-10), "bfloat16": (3e-2, 3e-2), "float16": (4e-3, 4e-3)}
# Products and long sums: looser (different summation orders).
SUM_TOL = {"float32": (2e-4, 2e-4), "float64": (1e-9, 1e-9)}


class Inputs:
    """Builds one library's tensors from numpy arrays: `T(array, dtype, layout)`.

    layout None: contiguous; "T": a transposed view of the last two dims; "S": a strided view (every
    other element of the last dim). Meta tensors are contiguous (kiln's pointwise results are
    contiguous whatever the inputs' layout; PyTorch's follow the inputs' strides)."""

    def __init__(self, lib, meta=False):
        self.lib, self.meta = lib, meta

    def __call__(self, data, dtype="float32", layout=None):
        conv = to_kiln if self.lib is kiln else to_torch
        data = np.asarray(data)
        if self.meta:
            layout = None
        if layout == "T" and data.ndim >= 2:
            t = conv(np.ascontiguousarray(np.swapaxes(data, -1, -2)), dtype).transpose(-1, -2)
        elif layout == "S" and data.ndim >= 1:
            t = conv(np.repeat(data, 2, axis=-1), dtype)[..., ::2]
        else:
            t = conv(data, dtype)
        return t.to("meta") if self.meta else t

    def dtype(self, name):
        return getattr(self.lib, name)


def call(lib, name, args, kwargs=None):
    return getattr(lib.ops.aten, name)(*args, **(kwargs or {}))


def check(name, build, tol=None, kwargs=None):
    """build(T) -> argument list, for T an Inputs of each library; compares results and meta results."""
    want = call(torch, name, build(Inputs(torch)), kwargs)
    k_args = build(Inputs(kiln))
    before = [a.tolist() if isinstance(a, kiln.Tensor) else None for a in k_args]
    got = call(kiln, name, k_args, kwargs)
    assert [a.tolist() if isinstance(a, kiln.Tensor) else None for a in k_args] == before, "inputs changed"
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(got, (tuple, list)) else (got,)
    assert len(wants) == len(gots)
    for w, g in zip(wants, gots):
        if w is None:
            assert g is None, f"{name}: expected None (output_mask), got a tensor"
            continue
        assert g is not None, f"{name}: got None, expected a tensor"
        dt = str(w.dtype).split(".")[1]
        rtol, atol = (tol or TOL).get(dt, TOL.get(dt, (1e-7, 1e-7)))
        assert_same(g, w, rtol=rtol, atol=atol)
    check_meta(name, build, kwargs)


def check_meta(name, build, kwargs=None):
    """The op on meta tensors: same sizes, strides and dtypes as PyTorch's meta function."""
    t_args = build(Inputs(torch, meta=True))
    try:
        want = call(torch, name, t_args, kwargs)
    except ZeroDivisionError:  # PyTorch's Python meta of a mean over 0 elements
        want = None
    got = call(kiln, name, build(Inputs(kiln, meta=True)), kwargs)
    if want is None:
        return
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(got, (tuple, list)) else (got,)
    mask = t_args[-1] if isinstance(t_args[-1], list) and len(t_args[-1]) == 3 else [True] * 3
    for i, (w, g) in enumerate(zip(wants, gots)):
        if w is None or g is None:
            # PyTorch's batch-norm meta returns grad_input whatever output_mask[0] says.
            assert g is None and (w is None or not mask[i]), f"{name}: output {i} is None in one library only"
            continue
        assert str(g.device) == "meta"
        assert tuple(g.shape) == tuple(w.shape), f"{name} meta shape {tuple(g.shape)} != {tuple(w.shape)}"
        assert tuple(g.stride()) == tuple(w.stride()), f"{name} meta strides {g.stride()} != {w.stride()}"
        assert str(g.dtype).split(".")[1] == str(w.dtype).split(".")[1]


RNG = np.random.default_rng(7)


def rand(shape, dtype="float32", low=-3.0, high=3.0):
    return random_array(shape, dtype, RNG, low, high)


# --- pointwise activations -----------------------------------------------------------------------

# name -> (extra args after (grad, x), how to make x from uniform data, kwargs)
POINTWISE = {
    "threshold_backward": ([0.5], None, None),
    "gelu_backward": ([], None, None),
    "gelu_backward_tanh": ([], None, {"approximate": "tanh"}),
    "sigmoid_backward": ([], lambda a: 1 / (1 + np.exp(-a)), None),
    "tanh_backward": ([], np.tanh, None),
    "silu_backward": ([], None, None),
    "leaky_relu_backward": ([0.2, False], None, None),
    "leaky_relu_backward_result": ([0.2, True], None, None),
    "hardtanh_backward": ([-1.5, 0.75], None, None),
    "softplus_backward": ([2, 1.5], None, None),
    "hardsigmoid_backward": ([], None, None),
    "hardswish_backward": ([], None, None),
    "mish_backward": ([], None, None),
    "logit_backward": ([], lambda a: (a + 3) / 6, None),
    "logit_backward_eps": ([0.2], lambda a: (a + 3) / 6, None),
    "logit_backward_outside": ([], None, None),
}
SHAPES = [(), (7,), (4, 6), (0, 5), (3, 4, 5)]


@pytest.mark.parametrize("case", sorted(POINTWISE))
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_pointwise(case, dtype):
    name = case.replace("_tanh", "").replace("_result", "").replace("_eps", "").replace("_outside", "")
    extra, make_x, kwargs = POINTWISE[case]
    for shape in SHAPES:
        for layouts in [(None, None), ("T", "S"), ("S", "T")]:
            if dtype in ("bfloat16", "float16") and layouts != (None, None):
                continue
            x = rand(shape)
            x = make_x(x) if make_x else x
            g = rand(shape)
            check(name, lambda T: [T(g, dtype, layouts[0]), T(x, dtype, layouts[1])] + extra, kwargs=kwargs)


def test_pointwise_broadcast_and_promotion():
    x, g = rand((3, 4)), rand((4,))
    check("gelu_backward", lambda T: [T(g, "float32"), T(x, "float64")])
    check("sigmoid_backward", lambda T: [T(g[:1], "float64"), T(x, "float32")])
    check("threshold_backward", lambda T: [T(np.rint(g), "int64"), T(np.rint(x), "int64"), 0])


@pytest.mark.parametrize("is_result", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elu_backward(is_result, dtype):
    for shape in SHAPES:
        for layouts in [(None, None), ("T", "S")]:
            g, x = rand(shape), rand(shape)
            if is_result:  # elu's result: > -alpha * scale
                x = np.where(x > 0, 1.2 * x, 1.2 * 1.5 * np.expm1(0.8 * x))
            check("elu_backward", lambda T: [T(g, dtype, layouts[0]), 1.5, 1.2, 0.8, is_result,
                                              T(x, dtype, layouts[1])])


def test_dropout_backward():
    for shape in SHAPES:
        for dtype in ["float32", "float64", "bfloat16"]:
            g, m = rand(shape), rand(shape) > 0
            check("native_dropout_backward", lambda T: [T(g, dtype, "T"), T(m, "bool"), 2.5])
    g, m = rand((3, 4)), rand((3, 4)) > 0
    check("native_dropout_backward", lambda T: [T(np.rint(g), "int64"), T(m, "bool"), 2.0])
    check("native_dropout_backward", lambda T: [T(g, "float32"), T(m, "float32"), 1.0])


# --- softmax --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["_softmax_backward_data", "_log_softmax_backward_data"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_backward(name, dtype):
    for shape in [(5,), (3, 4), (2, 3, 4), (0, 4), (2, 0, 3)]:
        for dim in range(-len(shape), len(shape)):
            for layout in [None, "T"]:
                x = rand(shape)
                e = np.exp(x - x.max(axis=dim, keepdims=True)) if x.size else x
                y = e / e.sum(axis=dim, keepdims=True) if x.size else x
                y = np.log(y) if name.startswith("_log") and y.size else y
                g = rand(shape)
                check(name, lambda T: [T(g, dtype, layout), T(y, dtype, layout), dim, T.dtype(dtype)])


# --- normalization ---------------------------------------------------------------------------------

MASKS = [[True, True, True], [True, False, False], [False, True, True], [False, False, False]]


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_backward(train, dtype):
    for shape in [(4, 3), (2, 3, 5), (2, 3, 4, 5)]:
        C = shape[1]
        x, g = rand(shape), rand(shape)
        w, rm, rv = rand((C,)), rand((C,)), rand((C,), low=0.5, high=2.0)
        axes = tuple(d for d in range(len(shape)) if d != 1)
        mean, invstd = x.mean(axis=axes), 1 / np.sqrt(x.var(axis=axes) + 1e-5)
        for mask in MASKS:
            for weight in [True, False]:
                for layout in [None, "T"]:
                    def build(T):
                        return [T(g, dtype, layout), T(x, dtype, layout), T(w, dtype) if weight else None,
                                None if train else T(rm, dtype), None if train else T(rv, dtype),
                                T(mean, dtype) if train else None, T(invstd, dtype) if train else None,
                                train, 1e-5, mask]
                    check("native_batch_norm_backward", build, tol=SUM_TOL)
    # A 16-bit input with float32 statistics (PyTorch's mixed type): float32 parameter gradients.
    x, g, w = rand((4, 3, 2), "bfloat16"), rand((4, 3, 2), "bfloat16"), rand((3,))
    check("native_batch_norm_backward",
          lambda T: [T(g, "bfloat16"), T(x, "bfloat16"), T(w, "float32"), None, None,
                     T(x.mean(axis=(0, 2)), "float32"), T(1 / np.sqrt(x.var(axis=(0, 2)) + 1e-5), "float32"),
                     True, 1e-5, [True, True, True]], tol={"bfloat16": (5e-2, 5e-2), "float32": (5e-2, 5e-2)})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_backward(dtype):
    for shape, norm in [((4, 6), [6]), ((2, 3, 5), [5]), ((2, 3, 5), [3, 5]), ((0, 4), [4]), ((3, 0), [0])]:
        x, g = rand(shape), rand(shape)
        axes = tuple(range(len(shape) - len(norm), len(shape)))
        stat_shape = shape[:len(shape) - len(norm)] + (1,) * len(norm)
        mean = x.mean(axis=axes, keepdims=True) if x.size else np.zeros(stat_shape)
        rstd = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5) if x.size else mean
        w, b = rand(tuple(norm)), rand(tuple(norm))
        for mask in MASKS:
            for layout in [None, "T"]:
                check("native_layer_norm_backward",
                      lambda T: [T(g, dtype, layout), T(x, dtype, layout), norm, T(mean, dtype), T(rstd, dtype),
                                 T(w, dtype), T(b, dtype), mask], tol=SUM_TOL)
        check("native_layer_norm_backward",
              lambda T: [T(g, dtype), T(x, dtype), norm, T(mean, dtype), T(rstd, dtype), None, None,
                         [True, False, False]], tol=SUM_TOL)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_group_norm_backward(dtype):
    # (Groups of one element have rstd 316 and an input gradient of 0, which PyTorch's float32
    # formula gives as cancellation noise up to 2.4e-4: no group here is a single element.)
    for shape, G in [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((2, 8), 4), ((1, 6, 7), 1)]:
        N, C = shape[0], shape[1]
        HxW = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        x, g = rand(shape), rand(shape)
        xr = x.reshape(N, G, -1)
        mean, rstd = xr.mean(axis=2), 1 / np.sqrt(xr.var(axis=2) + 1e-5)
        w = rand((C,))
        # Contiguous only: PyTorch's CPU kernel reads a non-contiguous input as if it were contiguous
        # (its autograd always passes contiguous tensors); kiln's result is checked by the C++ tests.
        for mask in MASKS:
            check("native_group_norm_backward",
                  lambda T: [T(g, dtype), T(x, dtype), T(mean, dtype), T(rstd, dtype), T(w, dtype), N, C, HxW, G,
                             mask], tol=SUM_TOL)
        check("native_group_norm_backward",
              lambda T: [T(g, dtype), T(x, dtype), T(mean, dtype), T(rstd, dtype), None, N, C, HxW, G,
                         [True, False, False]], tol=SUM_TOL)


# --- convolution ------------------------------------------------------------------------------------

CONVS = [
    # input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups
    ((2, 4, 7, 6), (6, 2, 3, 2), [2, 1], [1, 0], [1, 2], False, [0, 0], 2),
    ((2, 3, 5, 5), (4, 3, 1, 1), [1], [0], [1], False, [0], 1),
    ((1, 2, 6, 5), (3, 2, 3, 3), [1, 2], [1, 1], [1], False, [0], 1),
    ((0, 3, 5, 5), (4, 3, 3, 3), [1], [1], [1], False, [0], 1),
    ((2, 4, 5, 4), (4, 3, 3, 2), [2, 1], [1, 0], [1, 1], True, [1, 0], 2),
    ((1, 3, 4, 4), (3, 2, 2, 2), [2], [0], [2], True, [1], 1),
    ((2, 4, 9), (6, 4, 3), [2], [1], [1], False, [0], 1),
    ((2, 4, 9), (4, 3, 3), [3], [1], [2], True, [2], 2),
    # "same" width at unit stride, several blocks of samples per thread
    ((40, 16, 8, 8), (32, 16, 3, 3), [1], [1], [1], False, [0], 1),
    ((5, 4, 6, 7), (6, 2, 5, 3), [1], [4, 1], [2, 1], False, [0], 2),
    ((3, 2, 2, 5), (3, 2, 5, 3), [1], [2, 1], [1], False, [0], 1),
    ((16, 1, 8, 8), (16, 1, 3, 3), [1], [1], [1], False, [0], 1),  # more output channels than columns
]


@pytest.mark.parametrize("conv", range(len(CONVS)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_convolution_backward(conv, dtype):
    xs, ws, stride, padding, dilation, transposed, out_pad, groups = CONVS[conv]
    x, w = rand(xs), rand(ws)
    out = torch.ops.aten.convolution(to_torch(x, "float64"), to_torch(w, "float64"), None, stride, padding,
                                     dilation, transposed, out_pad, groups)
    g = rand(tuple(out.shape))
    channels = out.shape[1]
    for mask in MASKS[:3]:
        for layout in [None, "T"]:
            for bias_sizes in [[channels], None]:
                if bias_sizes is None and mask[2]:
                    continue  # PyTorch's meta function needs bias_sizes for grad_bias
                check("convolution_backward",
                      lambda T: [T(g, dtype, layout), T(x, dtype, layout), T(w, dtype, layout), bias_sizes, stride,
                                 padding, dilation, transposed, out_pad, groups, mask], tol=SUM_TOL)


def test_convolution_backward_bfloat16():
    xs, ws, stride, padding, dilation, transposed, out_pad, groups = CONVS[0]
    x, w = rand(xs), rand(ws)
    g = rand((2, 6, 4, 4))
    check("convolution_backward",
          lambda T: [T(g, "bfloat16"), T(x, "bfloat16"), T(w, "bfloat16"), [6], stride, padding, dilation,
                     transposed, out_pad, groups, [True, True, True]], tol={"bfloat16": (5e-2, 2e-1)})


# --- pooling ----------------------------------------------------------------------------------------

POOLS = [
    # input shape, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 7, 8), [3, 2], [2, 2], [1, 1], [1, 2], True),
    ((2, 3, 6, 6), [2], [], [0], [1], False),
    ((3, 5, 7), [3, 3], [2, 1], [1, 0], [1, 1], False),
    ((0, 2, 5, 5), [2, 2], [1, 1], [0, 0], [1, 1], False),
]


@pytest.mark.parametrize("pool", range(len(POOLS)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool2d_backward(pool, dtype):
    xs, k, s, p, d, ceil = POOLS[pool]
    x = rand(xs)
    out, idx = torch.ops.aten.max_pool2d_with_indices(to_torch(x, dtype), k, s, p, d, ceil)
    g, ind = rand(tuple(out.shape)), idx.numpy()
    for layout in [None, "T"]:
        check("max_pool2d_with_indices_backward",
              lambda T: [T(g, dtype, layout), T(x, dtype, layout), k, s, p, d, ceil, T(ind, "int64", layout)])


@pytest.mark.parametrize("pool", range(len(POOLS)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_avg_pool2d_backward(pool, dtype):
    xs, k, s, p, _, ceil = POOLS[pool]
    x = rand(xs)
    for count_include_pad in [True, False]:
        for divisor in [None, 3]:
            out = torch.ops.aten.avg_pool2d(to_torch(x, dtype), k, s, p, ceil, count_include_pad, divisor)
            g = rand(tuple(out.shape))
            for layout in [None, "S"]:
                check("avg_pool2d_backward",
                      lambda T: [T(g, dtype, layout), T(x, dtype, layout), k, s, p, ceil, count_include_pad, divisor])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_adaptive_avg_pool2d_backward(dtype):
    for xs, out in [((2, 3, 7, 8), (3, 5)), ((3, 5, 4), (4, 4)), ((1, 2, 5, 5), (1, 1)), ((0, 2, 4, 4), (2, 3)),
                    ((2, 2, 3, 3), (5, 4))]:
        x, g = rand(xs), rand(xs[:-2] + out)
        for layout in [None, "T"]:
            check("_adaptive_avg_pool2d_backward", lambda T: [T(g, dtype, layout), T(x, dtype, layout)])


# --- losses, embedding ------------------------------------------------------------------------------

REDUCTIONS = [0, 1, 2]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nll_loss_backward(reduction, dtype):
    for B, C in [(5, 4), (0, 3), (1, 6)]:
        for weighted in [False, True]:
            for ignore in [-100, 1]:
                x = rand((B, C))
                t = RNG.integers(0, C, size=(B,))
                if B:
                    t[0] = ignore if ignore >= 0 else t[0]
                w = rand((C,), low=0.1, high=2.0)
                tt = torch.tensor(t, dtype=torch.int64)
                tww = to_torch(w, dtype) if weighted else None
                _, tw = torch.ops.aten.nll_loss_forward(to_torch(x, dtype), tt, tww, reduction, ignore)
                g = rand((B,) if reduction == 0 else ())
                twv = tw.double().numpy()
                check("nll_loss_backward",
                      lambda T: [T(g, dtype), T(x, dtype, "T"), T(t, "int64"), T(w, dtype) if weighted else None,
                                 reduction, ignore, T(twv, dtype)])
    # One sample (1-D input, 0-dim target).
    x, g = rand((4,)), rand(())
    check("nll_loss_backward", lambda T: [T(g, dtype), T(x, dtype), T(np.array(2), "int64"), None, reduction, -100,
                                          T(np.array(1.0), dtype)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nll_loss2d_backward(reduction, dtype):
    for N, C, H, W in [(2, 4, 3, 5), (0, 3, 2, 2)]:
        for weighted in [False, True]:
            x = rand((N, C, H, W))
            t = RNG.integers(0, C, size=(N, H, W))
            if N:
                t[0, 0, 0] = 1
            w = rand((C,), low=0.1, high=2.0)
            _, tw = torch.ops.aten.nll_loss2d_forward(to_torch(x, dtype), torch.tensor(t, dtype=torch.int64),
                                                      to_torch(w, dtype) if weighted else None, reduction, 1)
            g = rand((N, H, W) if reduction == 0 else ())
            twv = tw.double().numpy()
            check("nll_loss2d_backward",  # (PyTorch requires a contiguous input here)
                  lambda T: [T(g, dtype, "T"), T(x, dtype), T(t, "int64"), T(w, dtype) if weighted else None,
                             reduction, 1, T(twv, dtype)])


@pytest.mark.parametrize("name,param", [("mse_loss_backward", None), ("smooth_l1_loss_backward", 0.7),
                                        ("smooth_l1_loss_backward", 0.0), ("huber_loss_backward", 0.6)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pointwise_loss_backward(name, param, dtype):
    extra = [] if param is None else [param]
    for shape in [(6,), (3, 4), (0, 3), (2, 3, 4)]:
        for reduction in REDUCTIONS:
            x, y = rand(shape), rand(shape)
            g = rand(shape if reduction == 0 else ())
            for layouts in [(None, None, None), ("T", "S", "T")]:
                check(name, lambda T: [T(g, dtype, layouts[0]), T(x, dtype, layouts[1]), T(y, dtype, layouts[2]),
                                       reduction] + extra)
    # A target broadcast against the input.
    x, y, g = rand((3, 4)), rand((4,)), rand(())
    check(name, lambda T: [T(g, dtype), T(x, dtype), T(y, dtype), 1] + extra)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_cross_entropy_backward(dtype):
    for shape in [(6,), (3, 4), (0, 3), (2, 3, 4)]:
        for reduction in REDUCTIONS:
            for weighted in [False, True]:
                x, y = rand(shape, low=0.02, high=0.98), rand(shape, low=0.0, high=1.0)
                w = rand(shape[-1:], low=0.1, high=2.0)
                g = rand(shape if reduction == 0 else ())
                check("binary_cross_entropy_backward",
                      lambda T: [T(g, dtype), T(x, dtype, "T"), T(y, dtype, "S"), T(w, dtype) if weighted else None,
                                 reduction])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_dense_backward(dtype):
    for ishape in [(5,), (3, 4), (0,), (2, 0)]:
        idx = RNG.integers(0, 6, size=ishape)
        g = rand(ishape + (5,))
        for padding_idx in [-1, 2]:
            for scale in [False, True]:
                for itype in ["int64", "int32"]:
                    check("embedding_dense_backward",
                          lambda T: [T(g, dtype, "T"), T(idx, itype), 6, padding_idx, scale])


# --- schemas, saved outputs, bad input -------------------------------------------------------------

OPS = ["threshold_backward", "gelu_backward", "sigmoid_backward", "tanh_backward", "silu_backward",
       "leaky_relu_backward", "hardtanh_backward", "elu_backward", "softplus_backward", "hardsigmoid_backward",
       "hardswish_backward", "mish_backward", "logit_backward", "_softmax_backward_data",
       "_log_softmax_backward_data", "native_batch_norm_backward", "native_layer_norm_backward",
       "native_group_norm_backward", "convolution_backward", "embedding_dense_backward", "nll_loss_backward",
       "nll_loss2d_backward", "max_pool2d_with_indices_backward", "avg_pool2d_backward",
       "_adaptive_avg_pool2d_backward", "mse_loss_backward", "smooth_l1_loss_backward", "huber_loss_backward",
       "binary_cross_entropy_backward", "native_dropout_backward"]


@pytest.mark.parametrize("name", OPS)
def test_schema_and_tags(name):
    k, t = getattr(kiln.ops.aten, name).default, getattr(torch.ops.aten, name).default
    assert str(k._schema) == str(t._schema)
    for tag in ["pointwise", "core"]:
        assert (tag in [str(x).split(".")[-1] for x in k.tags]) == (getattr(torch.Tag, tag) in t.tags), tag
    # The out= overloads too (most are PyTorch's `grad_input`); kiln derives them for one-output ops only.
    if len(t._schema.returns) > 1:
        return
    k_packet, t_packet = getattr(kiln.ops.aten, name), getattr(torch.ops.aten, name)
    assert sorted(k_packet.overloads()) == sorted(t_packet.overloads())
    for overload in t_packet.overloads():
        assert str(getattr(k_packet, overload)._schema) == str(getattr(t_packet, overload)._schema)


def test_forward_saved_outputs_feed_backward():
    """What the forward ops save is what PyTorch saves, and the backward ops accept it."""
    x, w, b, lw = rand((4, 3, 5)), rand((3,)), rand((3,)), rand((5,))
    for lib in (kiln, torch):
        T = Inputs(lib)
        A = lib.ops.aten
        out = {}
        out["bn"] = A.native_batch_norm(T(x), T(w), T(b), None, None, True, 0.1, 1e-5)
        out["ln"] = A.native_layer_norm(T(x), [5], T(lw), None, 1e-5)
        out["gn"] = A.native_group_norm(T(x), T(w), T(b), 4, 3, 5, 3, 1e-5)
        out["nll"] = A.nll_loss_forward(T(x[:, :, 0]), T(np.array([0, 2, 1, 1]), "int64"), None, 1, -100)
        t4 = T(np.array([[[0, 2], [1, 1]], [[2, 2], [0, 1]]]), "int64")
        for red in REDUCTIONS:
            out[f"nll2d{red}"] = A.nll_loss2d_forward(T(x[:2, :, :4].reshape(2, 3, 2, 2)), t4, T(w), red, 1)
        out["mp"] = A.max_pool2d_with_indices(T(x.reshape(1, 4, 3, 5)), [2, 2], [1, 1], [0, 0], [1, 1], False)
        if lib is kiln:
            k_out = out
        else:
            t_out = out
    for key in k_out:
        assert_same(k_out[key], t_out[key], rtol=1e-4, atol=1e-5)
    bn = k_out["bn"]
    gi, gw, gb = kiln.ops.aten.native_batch_norm_backward(bn[0], to_kiln(x, "float32"), to_kiln(w, "float32"), None,
                                                         None, bn[1], bn[2], True, 1e-5, [True, True, True])
    assert tuple(gi.shape) == (4, 3, 5) and tuple(gw.shape) == (3,) and tuple(gb.shape) == (3,)


def _kt(shape, dtype="float32"):
    return to_kiln(rand(shape), dtype)


BAD = [
    ("gelu_backward", lambda: [_kt((3, 4)), _kt((5,))]),
    ("threshold_backward", lambda: [_kt((2,)), _kt((3,)), 0]),
    ("elu_backward", lambda: [_kt((2, 3)), 1, 1, 1, False, _kt((3, 2))]),
    ("_softmax_backward_data", lambda: [_kt((3, 4)), _kt((4, 3)), 1, kiln.float32]),
    ("_log_softmax_backward_data", lambda: [_kt((3, 4)), _kt((3, 5)), 1, kiln.float32]),
    ("native_batch_norm_backward", lambda: [_kt((4, 3, 2)), _kt((4, 3, 5)), None, None, None, _kt((3,)), _kt((3,)),
                                            True, 1e-5, [True, True, True]]),
    ("native_batch_norm_backward", lambda: [_kt((4, 3)), _kt((4, 3)), None, None, None, _kt((2,)), _kt((3,)),
                                            True, 1e-5, [True, True, True]]),
    ("native_layer_norm_backward", lambda: [_kt((4, 5)), _kt((4, 5)), [5], _kt((3, 1)), _kt((4, 1)), None, None,
                                            [True, False, False]]),
    ("native_group_norm_backward", lambda: [_kt((2, 6, 3)), _kt((2, 6, 3)), _kt((2, 2)), _kt((2, 3)), None, 2, 6, 3,
                                            3, [True, False, False]]),
    ("convolution_backward", lambda: [_kt((1, 4, 2, 3)), _kt((1, 2, 5, 5)), _kt((4, 2, 3, 3)), [4], [1], [0], [1],
                                      False, [0], 1, [True, True, True]]),
    ("embedding_dense_backward", lambda: [_kt((4, 2, 5)), to_kiln(np.arange(6).reshape(2, 3), "int64"), 7, -1,
                                          False]),
    ("nll_loss_backward", lambda: [_kt(()), _kt((3, 4)), to_kiln(np.array([0, 1]), "int64"), None, 1, -100,
                                   _kt(())]),
    ("nll_loss2d_backward", lambda: [_kt((2, 3, 3)), _kt((2, 4, 3, 3)), to_kiln(np.zeros((2, 3, 4)), "int64"), None,
                                     0, -100, _kt(())]),
    ("max_pool2d_with_indices_backward", lambda: [_kt((1, 2, 2, 3)), _kt((1, 2, 4, 4)), [2, 2], [1, 1], [0, 0],
                                                  [1, 1], False, to_kiln(np.zeros((1, 2, 3, 3)), "int64")]),
    ("avg_pool2d_backward", lambda: [_kt((1, 2, 2, 2)), _kt((1, 2, 4, 4)), [2, 2], [1, 1], [0, 0], False, True,
                                     None]),
    ("_adaptive_avg_pool2d_backward", lambda: [_kt((1, 3, 2, 2)), _kt((1, 2, 4, 4))]),
    ("mse_loss_backward", lambda: [_kt(()), _kt((3, 4)), _kt((3, 5)), 1]),
    ("smooth_l1_loss_backward", lambda: [_kt((2, 4)), _kt((3, 4)), _kt((3, 4)), 0, 1.0]),
    ("huber_loss_backward", lambda: [_kt(()), _kt((3, 4)), _kt((2, 4)), 1, 1.0]),
    ("binary_cross_entropy_backward", lambda: [_kt(()), _kt((3, 4)), _kt((3, 5)), None, 1]),
    ("native_dropout_backward", lambda: [_kt((3, 4)), to_kiln(np.ones((4, 3)) > 0, "bool"), 2.0]),
]


@pytest.mark.parametrize("case", range(len(BAD)), ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_bad_sizes_raise(case):
    name, build = BAD[case]
    args = build()
    before = [a.tolist() if isinstance(a, kiln.Tensor) else a for a in args]
    with pytest.raises(RuntimeError) as e:
        call(kiln, name, args)
    assert name in str(e.value), f"message should name {name}: {e.value}"
    assert [a.tolist() if isinstance(a, kiln.Tensor) else a for a in args] == before
    assert (kiln.ones(2) + 1).tolist() == [2.0, 2.0]


def test_grad_input_overload():
    g, x = rand((3, 4)), rand((3, 4))
    out = kiln.empty((3, 4))
    got = kiln.ops.aten.gelu_backward.grad_input(to_kiln(g, "float32"), to_kiln(x, "float32"), grad_input=out)
    assert got is out
    assert_same(out, torch.ops.aten.gelu_backward(to_torch(g, "float32"), to_torch(x, "float32")))


def test_bad_dtypes_and_indices():
    with pytest.raises(NotImplementedError):
        kiln.ops.aten.gelu_backward(to_kiln(np.ones(3), "int64"), to_kiln(np.ones(3), "int64"))
    with pytest.raises(IndexError):
        kiln.ops.aten.embedding_dense_backward(_kt((3, 2)), to_kiln(np.array([0, 9, 1]), "int64"), 4, -1, False)
    with pytest.raises(IndexError):
        kiln.ops.aten.nll_loss_backward(_kt(()), _kt((2, 3)), to_kiln(np.array([0, 5]), "int64"), None, 2, -100,
                                        _kt(()))
    with pytest.raises(RuntimeError, match="leaky"):
        kiln.ops.aten.leaky_relu_backward(_kt((3,)), _kt((3,)), -0.1, True)
    with pytest.raises(RuntimeError, match="gelu_backward"):
        kiln.ops.aten.gelu_backward(_kt((3,)), _kt((3,)), approximate="cubic")
