"""Reductions, activations and losses against PyTorch 2.13 (the oracle).

Covers tensor/ops/reduce_more.cc, reduce_stats.cc, activation.cc and loss.cc:

- an op table (OpInfo rows, as in test_ops.py) of every reduction and activation, each run over
  several shapes (0-dim, 0-size, 1-D to 3-D), contiguous, transposed and strided inputs, and every
  dtype kiln has (float32/64, float16, bfloat16, the integers, bool);
- the losses (nll_loss 1-D/2-D/4-D with weight, ignore_index and every reduction; cross_entropy with
  label smoothing and probability targets; mse/l1/smooth_l1/huber; binary_cross_entropy(_with_logits)
  with weight and pos_weight) and embedding (padding_idx, out-of-range indices);
- NaN inputs for max/min/amax/amin/argmax/argmin;
- dropout: statistics of the mask, scaling by 1/(1-p), seeding, eval mode;
- bad input: wrong dims, targets out of range, mismatched shapes.

Whenever PyTorch raises (an unsupported dtype, an empty reduction), kiln must raise the same builtin
exception class with a message; otherwise dtype, shape and values must equal PyTorch's, and the
inputs must be left unchanged.
"""

import math

import numpy as np
import pytest

import kiln
from conftest import _builtin_exception as _builtin
from conftest import assert_raises_like_torch, DTYPE_NAMES, FLOAT_NAMES, INT_NAMES, assert_same, random_array, requires_torch, torch
from test_ops import OpInfo, _layouts
from test_ops import _make as _make_flat

pytestmark = [requires_torch,  # the expected warnings of the oracle (and kiln) on degenerate inputs
              pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0:UserWarning"),
              pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")]

F = torch.nn.functional if torch is not None else None
SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4), (2, 0, 3)]
RED = {"none": 0, "mean": 1, "sum": 2}  # at::Reduction, as the kiln schemas take it
INF = float("inf")


def _tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else r


def check(fn, k_args, t_args, rtol=None, atol=None):
    """fn(kiln, *k_args) equals fn(torch, *t_args), or both raise the same builtin exception class."""
    try:
        expected = fn(torch, *t_args)
    except Exception as e:
        with pytest.raises(Exception) as got:
            fn(kiln, *k_args)
        assert _builtin(type(got.value)) is _builtin(type(e)), \
            f"kiln raised {type(got.value).__name__}: {got.value}; torch raised {type(e).__name__}: {e}"
        assert str(got.value), "the message must say what went wrong"
        return
    got = fn(kiln, *k_args)
    assert_same(_tuple(got), _tuple(expected), rtol, atol)
    for k, t in zip(k_args, t_args):  # inputs untouched
        if t is not None and hasattr(t, "dtype"):
            assert_same(k, t)


def _make(lib, data, name, layout):
    """test_ops._make, reshaped so a leading 0-size dim survives (tolist() of a (0, 4) array is [])."""
    t = _make_flat(lib, data, name, layout)
    return t.reshape(data.shape) if tuple(t.shape) != data.shape and data.size == 0 else t


def both(data, name, layout=None):
    """The same array as a (kiln, torch) pair of tensors of dtype `name`."""
    return _make(kiln, data, name, layout), _make(torch, data, name, layout)


def dims2(x):
    """Two dims to reduce over (the first and last), or the only one."""
    return (0, -1) if x.dim() >= 2 else -1


def act(name, *args, torch_fn=None, **kw):
    """An nn.functional activation: kiln.<name>(x, *args) against F.<name> (or torch_fn)."""
    tfn = torch_fn or (getattr(F, name) if F is not None else None)  # no torch: the tests skip
    suffix = "" if not (args or kw) else str(args + tuple(f"{k}={v}" for k, v in kw.items()))
    return OpInfo(f"{name}{suffix}", lambda lib, x: (getattr(kiln, name) if lib is kiln else tfn)(x, *args, **kw),
                  dtypes=DTYPE_NAMES)


def vnorm(lib):
    return kiln.linalg_vector_norm if lib is kiln else torch.linalg.vector_norm


# --- the op table ------------------------------------------------------------------------------------

REDUCTIONS = [
    OpInfo("prod", lambda lib, x: x.prod(), low=-1.5, high=1.5),
    OpInfo("prod_dim", lambda lib, x: x.prod(-1), low=-1.5, high=1.5),
    OpInfo("prod_keepdim", lambda lib, x: x.prod(0, keepdim=True), low=-1.5, high=1.5),
    OpInfo("prod_dtype", lambda lib, x: x.prod(dtype=lib.float64), low=-1.5, high=1.5),
    OpInfo("prod_dim_dtype", lambda lib, x: lib.prod(x, -1, dtype=lib.int64), low=-1.5, high=1.5),
    OpInfo("amax", lambda lib, x: x.amax()), OpInfo("amin", lambda lib, x: x.amin()),
    OpInfo("amax_dim", lambda lib, x: x.amax(-1)), OpInfo("amin_dim", lambda lib, x: lib.amin(x, -1)),
    OpInfo("amax_dims_keepdim", lambda lib, x: x.amax(dims2(x), keepdim=True)),
    OpInfo("amin_dims", lambda lib, x: x.amin(dims2(x))),
    OpInfo("amax_empty_dims", lambda lib, x: lib.amax(x, ())),
    OpInfo("max", lambda lib, x: x.max()), OpInfo("min", lambda lib, x: lib.min(x)),
    OpInfo("max_dim", lambda lib, x: x.max(-1)), OpInfo("min_dim", lambda lib, x: lib.min(x, -1)),
    OpInfo("max_dim0_keepdim", lambda lib, x: x.max(0, keepdim=True)),
    OpInfo("min_dim0_keepdim", lambda lib, x: x.min(0, True)),
    OpInfo("max_dim_fields", lambda lib, x: (lambda r: (r.values, r.indices))(x.max(-1))),
    OpInfo("argmax", lambda lib, x: x.argmax()), OpInfo("argmin", lambda lib, x: lib.argmin(x)),
    OpInfo("argmax_dim", lambda lib, x: x.argmax(-1)), OpInfo("argmin_dim", lambda lib, x: x.argmin(0)),
    OpInfo("argmax_keepdim", lambda lib, x: x.argmax(0, keepdim=True)),
    OpInfo("argmin_none_keepdim", lambda lib, x: x.argmin(keepdim=True)),
    OpInfo("any", lambda lib, x: x.any(), low=-0.6, high=0.6),
    OpInfo("all", lambda lib, x: lib.all(x), low=-0.6, high=0.6),
    OpInfo("any_dim", lambda lib, x: x.any(-1), low=-0.6, high=0.6),
    OpInfo("all_dim_keepdim", lambda lib, x: x.all(0, keepdim=True), low=-0.6, high=0.6),
    OpInfo("any_dims", lambda lib, x: x.any(dims2(x)), low=-0.6, high=0.6),
    OpInfo("all_dims", lambda lib, x: lib.all(x, dims2(x)), low=-0.6, high=0.6),
    OpInfo("count_nonzero", lambda lib, x: lib.count_nonzero(x), low=-0.6, high=0.6),
    OpInfo("count_nonzero_dim", lambda lib, x: x.count_nonzero(-1), low=-0.6, high=0.6),
    OpInfo("count_nonzero_dims", lambda lib, x: lib.count_nonzero(x, dims2(x)), low=-0.6, high=0.6),
    # variance and standard deviation
    OpInfo("var", lambda lib, x: x.var()), OpInfo("std", lambda lib, x: lib.std(x)),
    OpInfo("var_biased", lambda lib, x: x.var(unbiased=False)),
    OpInfo("std_dim", lambda lib, x: x.std(-1)),
    OpInfo("var_dim_unbiased_keepdim", lambda lib, x: lib.var(x, -1, False, True)),
    OpInfo("var_dims", lambda lib, x: x.var(dims2(x))),
    OpInfo("var_correction0", lambda lib, x: lib.var(x, 0, correction=0)),
    OpInfo("std_correction2", lambda lib, x: x.std(-1, correction=2, keepdim=True)),
    OpInfo("var_correction_none_dim", lambda lib, x: lib.var(x, None, correction=1)),
    OpInfo("var_correction_float", lambda lib, x: lib.var(x, -1, correction=0.5)),
    OpInfo("std_correction_large", lambda lib, x: lib.std(x, correction=7)),
    OpInfo("var_mean", lambda lib, x: lib.var_mean(x)),
    OpInfo("std_mean", lambda lib, x: lib.std_mean(x, unbiased=False)),
    OpInfo("var_mean_dim", lambda lib, x: lib.var_mean(x, -1, keepdim=True)),
    OpInfo("std_mean_dims_correction", lambda lib, x: lib.std_mean(x, dims2(x), correction=0)),
    OpInfo("var_mean_dim_unbiased", lambda lib, x: lib.var_mean(x, 0, False)),
    # logsumexp and norms
    OpInfo("logsumexp", lambda lib, x: lib.logsumexp(x, -1)),
    OpInfo("logsumexp_dims_keepdim", lambda lib, x: x.logsumexp(dims2(x), keepdim=True)),
    OpInfo("logsumexp_large", lambda lib, x: lib.logsumexp(x * 40, 0), dtypes=["float32", "float64"]),
    *[OpInfo(f"vector_norm_{p}", (lambda p: lambda lib, x: vnorm(lib)(x, p))(p)) for p in (1, 2, INF, 3)],
    *[OpInfo(f"vector_norm_{p}_dim", (lambda p: lambda lib, x: vnorm(lib)(x, p, -1, True))(p)) for p in (1, 2, INF, 3)],
    *[OpInfo(f"vector_norm_{p}_dims", (lambda p: lambda lib, x: vnorm(lib)(x, p, dims2(x)))(p))
      for p in (1, 2, INF, 3)],
    OpInfo("vector_norm_-inf", lambda lib, x: vnorm(lib)(x, -INF, -1)),
    OpInfo("vector_norm_0", lambda lib, x: vnorm(lib)(x, 0)),
    OpInfo("vector_norm_dtype", lambda lib, x: vnorm(lib)(x, 2, dtype=lib.float64)),
    *[OpInfo(f"norm_{p}", (lambda p: lambda lib, x: x.norm(p))(p)) for p in (1, 2, INF, 3)],
    *[OpInfo(f"norm_{p}_dim", (lambda p: lambda lib, x: x.norm(p, -1, True))(p)) for p in (1, 2, INF, 3)],
    OpInfo("norm_default", lambda lib, x: x.norm()),
    OpInfo("norm_dims", lambda lib, x: x.norm(2, dims2(x))),
    OpInfo("norm_dtype", lambda lib, x: x.norm(1, dtype=lib.float64)),
    OpInfo("norm_dim_dtype", lambda lib, x: x.norm(INF, -1, True, dtype=lib.float64)),
]

ACTIVATIONS = [
    OpInfo("softmax", lambda lib, x: lib.softmax(x, -1)),
    OpInfo("softmax_dim0", lambda lib, x: x.softmax(0)),
    OpInfo("softmax_dtype", lambda lib, x: lib.softmax(x, -1, dtype=lib.float64)),
    OpInfo("softmax_dtype_f32", lambda lib, x: x.softmax(0, dtype=lib.float32)),
    OpInfo("log_softmax", lambda lib, x: lib.log_softmax(x, -1)),
    OpInfo("log_softmax_dim0", lambda lib, x: x.log_softmax(0)),
    OpInfo("log_softmax_dtype", lambda lib, x: lib.log_softmax(x, -1, dtype=lib.float64)),
    OpInfo("softmax_large", lambda lib, x: lib.softmax(x * 100, -1), dtypes=FLOAT_NAMES),
    OpInfo("log_softmax_large", lambda lib, x: lib.log_softmax(x * 100, -1), dtypes=FLOAT_NAMES),
    OpInfo("_softmax", lambda lib, x: lib.ops.aten._softmax.default(x, -1, False)),
    OpInfo("_log_softmax", lambda lib, x: lib.ops.aten._log_softmax.default(x, -1, False)),
    act("gelu"), act("gelu", approximate="tanh"), act("gelu", approximate="none"),
    act("leaky_relu"), act("leaky_relu", 0.2), act("leaky_relu", -1.5),
    act("hardtanh"), act("hardtanh", -2.0, 0.5), act("hardtanh", -2, 2),
    # F.hardtanh refuses min > max in Python; the aten op (kiln's) clamps, the max winning
    OpInfo("hardtanh_min_gt_max", lambda lib, x: (kiln.hardtanh if lib is kiln else torch.ops.aten.hardtanh)(x, 2, 1)),
    act("elu"), act("elu", 0.5),
    OpInfo("elu_scale", lambda lib, x: (kiln.elu if lib is kiln else torch.ops.aten.elu)(x, 1.5, 2.0, 0.5)),
    act("softplus"), act("softplus", 2.0, 1.0), act("softplus", 0.5, 20),
    act("threshold", 0.5, -1.0), act("threshold", 1, 7),
    act("hardsigmoid"), act("hardswish"), act("relu6"),
    OpInfo("relu6_big", lambda lib, x: (kiln.relu6 if lib is kiln else F.relu6)(x * 4)),
    OpInfo("logit", lambda lib, x: lib.logit(x), low=0.02, high=0.98),
    OpInfo("logit_eps", lambda lib, x: x.logit(0.1), low=-0.5, high=1.5),
    OpInfo("logit_outside", lambda lib, x: lib.logit(x), low=-0.5, high=1.5),
    OpInfo("nan_to_num", lambda lib, x: lib.nan_to_num(x)),
    OpInfo("nan_to_num_args", lambda lib, x: x.nan_to_num(1.0, 5.0, -5.0)),
    OpInfo("nan_to_num_log", lambda lib, x: lib.nan_to_num(x.log(), nan=0.5, posinf=2.0),
           dtypes=FLOAT_NAMES, low=-1.0, high=1.0),
    OpInfo("nan_to_num_inf", lambda lib, x: lib.nan_to_num(1 / x, neginf=-7.0), dtypes=FLOAT_NAMES),
]

# Half-precision reductions accumulate differently; allow a few ulps more for those.
LOOSE = {"var", "std", "logsumexp", "norm", "softmax", "gelu", "elu", "softplus", "logit", "prod", "hardswish",
         "hardsigmoid"}


def _tolerance(info, name):
    if name in ("float16", "bfloat16") and any(k in info.name for k in LOOSE):
        return (2e-2, 2e-2) if name == "float16" else (5e-2, 5e-2)
    if name == "float32" and any(k in info.name for k in LOOSE):
        return 1e-4, 1e-5
    return info.rtol, info.atol


@pytest.mark.parametrize("info", REDUCTIONS + ACTIVATIONS, ids=repr)
def test_op_matches_torch(info):
    rng = np.random.default_rng(0)
    for name in info.dtypes:
        rtol, atol = _tolerance(info, name)
        for shape in info.shapes:
            for _, data, layout in _layouts(shape, name, rng, info):
                layout = None if callable(layout) else layout
                k, t = both(data, name, layout)
                check(info.fn, [k], [t], rtol, atol)


def test_softmax_half_to_float():
    """PyTorch's CPU kernel refuses half_to_float outright; kiln implements it for float16 (the CUDA
    semantics: a float32 result equal to softmax of the upcast input) and refuses the other dtypes."""
    rng = np.random.default_rng(8)
    data = random_array((3, 5), "float16", rng)
    for aten in ("_softmax", "_log_softmax"):
        for layout in (None, "T", "S"):
            k, t = both(data, "float16", layout)
            got = getattr(kiln.ops.aten, aten).default(k, -1, True)
            assert_same(got, getattr(torch.ops.aten, aten).default(t.float(), -1, False), 1e-3, 1e-3)
        for name in ("float32", "float64", "bfloat16"):
            k, t = both(data, name)
            with pytest.raises(RuntimeError, match="Half"):
                getattr(kiln.ops.aten, aten).default(k, -1, True)


INPLACE = [("gelu_", (), {}), ("gelu_", (), {"approximate": "tanh"}), ("leaky_relu_", (0.3,), {}),
           ("hardtanh_", (-0.5, 1.5), {}), ("relu6_", (), {}), ("elu_", (0.7,), {}), ("threshold_", (0.2, 9.0), {}),
           ("hardsigmoid_", (), {}), ("hardswish_", (), {}), ("logit_", (0.05,), {}), ("nan_to_num_", (1.0,), {})]


@pytest.mark.parametrize("op,args,kw", INPLACE, ids=[f"{o[0]}{o[1]}{o[2]}" for o in INPLACE])
def test_inplace_activations(op, args, kw):
    """op_ writes into its input and returns it; ints are refused (or kept) as PyTorch does."""
    rng = np.random.default_rng(9)
    for name in DTYPE_NAMES:
        data = random_array((3, 4), name, rng, -4.0, 4.0)
        for layout in (None, "T", "S"):
            k, t = both(data, name, layout)
            try:
                expected = getattr(torch.ops.aten, op)(t, *args, **kw)
            except Exception as e:
                with pytest.raises(Exception) as got:
                    getattr(kiln, op)(k, *args, **kw)
                assert _builtin(type(got.value)) is _builtin(type(e)), (name, got.value, e)
                continue
            got = getattr(kiln, op)(k, *args, **kw)
            rtol, atol = (2e-2, 2e-2) if name in ("float16", "bfloat16") else (1e-5, 1e-5)
            assert_same(got, expected, rtol, atol)
            assert_same(k, t, rtol, atol)  # the input itself holds the result
            assert got.data_ptr() == k.data_ptr()


def test_meta_tensors_match_real_metadata():
    """Every row on meta tensors gives the real result's shapes and dtypes, without data."""
    for info in REDUCTIONS + ACTIVATIONS:
        for shape in ((3, 4), (2, 3, 4)):
            real = kiln.ones(shape, dtype=kiln.float32)
            meta = kiln.empty(shape, dtype=kiln.float32, device="meta")
            r, m = _tuple(info.fn(kiln, real)), _tuple(info.fn(kiln, meta))
            for a, b in zip(r if isinstance(r, tuple) else (r,), m if isinstance(m, tuple) else (m,)):
                assert b.device == kiln.device("meta"), info
                assert (tuple(b.shape), b.dtype) == (tuple(a.shape), a.dtype), info


# --- NaN, ties and infinities --------------------------------------------------------------------------

NAN_OPS = [
    ("max", lambda lib, x: x.max()), ("min", lambda lib, x: x.min()),
    ("max_dim", lambda lib, x: x.max(-1)), ("min_dim", lambda lib, x: x.min(0)),
    ("amax", lambda lib, x: x.amax(-1)), ("amin", lambda lib, x: x.amin()),
    ("argmax", lambda lib, x: x.argmax()), ("argmin", lambda lib, x: x.argmin()),
    ("argmax_dim", lambda lib, x: x.argmax(-1)), ("argmin_dim", lambda lib, x: x.argmin(0, keepdim=True)),
    ("logsumexp", lambda lib, x: lib.logsumexp(x, -1)),
    ("vector_norm_inf", lambda lib, x: vnorm(lib)(x, INF, -1)),
    ("softmax", lambda lib, x: lib.softmax(x, -1)), ("nan_to_num", lambda lib, x: lib.nan_to_num(x)),
]


@pytest.mark.parametrize("op,fn", NAN_OPS, ids=[o[0] for o in NAN_OPS])
@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_nan_and_inf_inputs(op, fn, name):
    rows = [[1.0, math.nan, 3.0, -2.0], [math.nan, math.nan, math.nan, math.nan], [2.0, 5.0, 5.0, -1.0],
            [INF, 1.0, -INF, 0.0], [-INF, -INF, 2.0, math.nan], [0.5, 0.5, 0.5, 0.5], [-INF] * 4, [INF] * 4]
    data = np.array(rows)
    for layout in (None, "T", "S"):
        k, t = both(data, name, layout)
        check(fn, [k], [t])
    for row in rows:
        k, t = both(np.array(row), name)
        check(fn, [k], [t])


LARGE_OPS = [
    ("max_dim", lambda lib, x: x.max(-1)), ("min_dim0", lambda lib, x: x.min(0)), ("amax", lambda lib, x: x.amax()),
    ("argmax", lambda lib, x: x.argmax()), ("argmin_dim0", lambda lib, x: x.argmin(0)),
    ("var_mean", lambda lib, x: lib.var_mean(x, 0)), ("std", lambda lib, x: x.std()),
    ("logsumexp", lambda lib, x: lib.logsumexp(x, (0, 1))), ("norm3_dim0", lambda lib, x: x.norm(3, 0)),
    ("vector_norm", lambda lib, x: vnorm(lib)(x)),
    ("prod_dim0_f64", lambda lib, x: (x / 3 + 1).prod(0, dtype=lib.float64)),
    ("any_dim", lambda lib, x: (x > 2.9).any(-1)), ("count_nonzero", lambda lib, x: lib.count_nonzero(x > 0, 0)),
    ("softmax_dim0", lambda lib, x: lib.softmax(x, 0)), ("log_softmax", lambda lib, x: lib.log_softmax(x, -1)),
    ("gelu_tanh", lambda lib, x: (kiln.gelu if lib is kiln else F.gelu)(x, approximate="tanh")),
]


@pytest.mark.parametrize("op,fn", LARGE_OPS, ids=[o[0] for o in LARGE_OPS])
def test_large_inputs_with_nan(op, fn):
    """Inputs big enough to be split across threads, with a NaN placed in one row and one column."""
    rng = np.random.default_rng(10)
    data = rng.uniform(-3, 3, size=(257, 1031))
    for layout in (None, "T"):
        k, t = both(data, "float32", layout)
        check(fn, [k], [t], 1e-4, 1e-4)
    data[100, 500] = math.nan
    k, t = both(data, "float32")
    check(fn, [k], [t], 1e-4, 1e-4)


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("shape,dim", [((5,), None), ((5,), 0), ((5, 1), 0), ((1, 7), (0, 1)), ((2, 3), None),
                                       ((3, 1), 0), ((2, 5), 1)])
def test_var_of_equal_values_reduced_to_one_value(dtype, shape, dim):
    # PyTorch reduces to one var/std around the mean rounded to the input dtype, so 5 equal
    # float32 values have a variance of 3.6e-15 there, not 0 (fuzz seed 221, program 6068)
    for value in (0.9553365, 0.3, 0.123456, -2.2):
        data = np.full(shape, value)
        k = kiln.tensor(data.tolist(), dtype=getattr(kiln, dtype))
        t = torch.tensor(data.tolist(), dtype=getattr(torch, dtype))
        for name, kw in (("var", {"correction": 0}), ("var", {}), ("std", {"correction": 0}), ("var_mean", {})):
            got = getattr(kiln, name)(k, dim, **kw) if dim is not None else getattr(kiln, name)(k, **kw)
            want = getattr(torch, name)(t, dim, **kw) if dim is not None else getattr(torch, name)(t, **kw)
            got, want = (got[0], want[0]) if name == "var_mean" else (got, want)
            # float64: kiln's double sum (so its mean) differs from PyTorch's in the last bit
            atol = 1e-15 if dtype == "float64" else 0
            np.testing.assert_allclose(got.double().numpy(), want.double().numpy(), rtol=0, atol=atol,
                                       err_msg=f"{name} {kw} {value}")


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("shape,dim", [((1, 3), None), ((3, 1), 0), ((2, 3), 1), ((2, 3), 0), ((3, 3), 0),
                                       ((5, 2, 3), 2), ((3, 1, 4), (0, 1))])
def test_mean_of_an_expanded_value_is_the_rounded_sum_divided(dtype, shape, dim):
    """Note [A mean as PyTorch's] (reduce.cc): sum().div_(n), the sum rounded to the dtype (to
    float32 for the 16-bit types) before the division. Up to 3 equal values, every summation order
    rounds the sum once, as kiln's double sum rounded is, so the means must be equal: the mean of
    an expanded float32 value was that value, an ulp above PyTorch's (fuzz seed 981, program
    2376). (Longer sums differ from PyTorch's float cascade in the last bits.)"""
    rng = np.random.default_rng(5)
    for _ in range(30):
        value = rng.uniform(-3, 3)
        k, t = (lib.tensor([value], dtype=getattr(lib, dtype)).expand(*shape) for lib in (kiln, torch))
        got = k.mean() if dim is None else k.mean(dim)
        want = t.mean() if dim is None else t.mean(dim)
        assert got.dtype == getattr(kiln, dtype)
        assert got.double().tolist() == want.double().tolist(), value


@requires_torch
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("shape,dim,correction", [((), None, 1), ((1,), None, 1), ((3,), None, 3), ((3,), None, 5),
                                                  ((1,), 0, 1), ((2, 1), 1, 1), ((3,), 0, 5), ((), 0, 1)])
def test_var_gradient_without_degrees_of_freedom(name, shape, dim, correction):
    # PyTorch's var_backward over everything with N - correction <= 0: inf where x is not the
    # mean, NaN where it is, and inf where x is NaN (NaN != mean); with dims, 2 / (N - correction)
    # as it is. kiln gave NaN for a NaN x (fuzz seed 301, program 17102: var() of log(-1.3)).
    data = np.array([float("nan"), 0.5, -1.25][: max(1, int(np.prod(shape)))]).reshape(shape)
    if shape == ():
        data = np.array(float("nan"))
    grads = []
    for lib in (kiln, torch):
        for values in (data, np.zeros(shape) + 0.75, np.arange(np.prod(shape, dtype=int)).reshape(shape) * 1.5):
            x = lib.tensor(values.tolist(), requires_grad=True)
            fn = getattr(lib, name)
            out = fn(x, correction=correction) if dim is None else fn(x, dim, correction=correction)
            out = out[0] if name.endswith("_mean") else out
            out.sum().backward()
            grads.append(x.grad.double().numpy())
    half = len(grads) // 2
    for got, want in zip(grads[:half], grads[half:]):
        np.testing.assert_array_equal(got, want)


def test_max_min_ties_pick_the_first_index():
    data = np.array([[3, 1, 3, 3], [0, 0, -1, 0], [2, 2, 2, 2]])
    for name in ["float32", "int64", "int8", "uint8", "bool"]:
        for layout in (None, "T", "S"):
            k, t = both(data if name != "uint8" else np.abs(data), name, layout)
            for fn in (lambda lib, x: x.max(-1), lambda lib, x: x.min(0), lambda lib, x: x.argmax(-1),
                       lambda lib, x: x.argmin(), lambda lib, x: x.argmax()):
                check(fn, [k], [t])


# --- losses -------------------------------------------------------------------------------------------

LOSS_DTYPES = FLOAT_NAMES + ["int64"]


def _log_probs(shape, name, rng):
    return random_array(shape, name, rng, -4.0, -0.1)


def _targets(shape, classes, rng, ignore=None):
    t = rng.integers(0, classes, size=shape)
    if ignore is not None and t.size:
        t.flat[:: 3] = ignore
    return t


def _loss_tol(name):
    return {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2), "float32": (1e-4, 1e-5)}.get(name, (None, None))


NLL_CASES = [  # (input shape, target shape)
    ((4,), ()), ((3, 4), (3,)), ((0, 4), (0,)), ((2, 3, 4, 5), (2, 4, 5)), ((2, 3, 0, 2), (2, 0, 2)),
    ((2, 3, 5), (2, 5)),
]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("inp,tgt", NLL_CASES, ids=[str(c) for c in NLL_CASES])
def test_nll_loss(inp, tgt, reduction):
    rng = np.random.default_rng(1)
    classes = inp[0] if len(inp) == 1 else inp[1]
    r = RED[reduction]
    for name in LOSS_DTYPES:
        rtol, atol = _loss_tol(name)
        x = _log_probs(inp, name, rng)
        w = random_array((classes,), name, rng, 0.2, 2.0)
        for ignore in (-100, 1):
            target = _targets(tgt, classes, rng, ignore=1 if ignore == 1 else None)
            layouts = [None] + (["T"] if len(inp) == 2 else [])
            for layout in layouts:
                kx, tx = both(x, name, layout)
                kt, tt = both(target, "int64")
                kw, tw = both(w, name)
                for weight in (False, True):
                    fn = lambda lib, x, t, w: (kiln.nll_loss_nd if lib is kiln else F.nll_loss)(  # noqa: E731
                        x, t, w if weight else None, **({"reduction": reduction, "ignore_index": ignore}
                                                        if lib is torch else {"reduction": r, "ignore_index": ignore}))
                    check(fn, [kx, kt, kw], [tx, tt, tw], rtol, atol)
                    # the exact aten overloads: nll_loss (1-D/2-D), nll_loss2d (4-D), nll_loss_forward
                    over = "nll_loss" if len(inp) <= 2 else "nll_loss2d" if len(inp) == 4 else None
                    if over:
                        fn = lambda lib, x, t, w: getattr(lib.ops.aten, over).default(  # noqa: E731
                            x, t, w if weight else None, r, ignore)
                        check(fn, [kx, kt, kw], [tx, tt, tw], rtol, atol)
                    if len(inp) <= 2:
                        fn = lambda lib, x, t, w: lib.ops.aten.nll_loss_forward.default(  # noqa: E731
                            x, t, w if weight else None, r, ignore)
                        check(fn, [kx, kt, kw], [tx, tt, tw], rtol, atol)


def test_nll_loss_all_ignored_and_int32_targets():
    x = np.log(np.full((3, 4), 0.25))
    for target, name in (([1, 1, 1], "int64"), ([0, 2, 3], "int32"), ([0, 2, 3], "uint8")):
        kx, tx = both(x, "float32")
        kt, tt = both(np.array(target), name)
        for reduction in RED:
            fn = lambda lib, x, t: (kiln.nll_loss if lib is kiln else F.nll_loss)(  # noqa: E731
                x, t, None, **({"reduction": reduction, "ignore_index": 1} if lib is torch
                               else {"reduction": RED[reduction], "ignore_index": 1}))
            check(fn, [kx, kt], [tx, tt])


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_loss_edge_cases(reduction):
    """The default ignore_index (-100) in targets, every target ignored, 0 classes, extreme logits."""
    rng = np.random.default_rng(11)
    r = RED[reduction]
    x = np.log(rng.dirichlet(np.ones(4), size=5))
    kx, tx = both(x, "float32")
    for target in ([0, -100, 3, -100, 1], [-100] * 5):
        kt, tt = both(np.array(target), "int64")
        check(lambda lib, x, t: (kiln.nll_loss(x, t, None, r) if lib is kiln
                                 else F.nll_loss(x, t, reduction=reduction)), [kx, kt], [tx, tt])
        for smoothing in (0.0, 0.2):
            check(lambda lib, x, t: (kiln.cross_entropy_loss(x, t, None, r, -100, smoothing) if lib is kiln
                                     else F.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing)),
                  [kx, kt], [tx, tt])
    # no classes at all
    (kz, tz), (kt, tt) = both(np.zeros((2, 0)), "float32"), both(np.array([0, 0]), "int64")
    check(lambda lib, x, t: (kiln.cross_entropy_loss(x, t, None, r) if lib is kiln
                             else F.cross_entropy(x, t, reduction=reduction)), [kz, kt], [tz, tt])
    # logits far beyond exp's range, in float32
    (kl, tl), (ky, ty) = both(np.array([-100.0, -30, 30, 100, 0]), "float32"), both(np.array([1.0, 0, 1, 0, 0.5]),
                                                                                    "float32")
    check(lambda lib, x, y: (kiln.binary_cross_entropy_with_logits(x, y, None, None, r) if lib is kiln
                             else F.binary_cross_entropy_with_logits(x, y, reduction=reduction)), [kl, ky], [tl, ty])
    check(lambda lib, x: (kiln.softplus if lib is kiln else F.softplus)(x, 100, 20), [kl], [tl])


CE_CASES = [((3, 5), (3,)), ((5,), ()), ((2, 4, 3, 2), (2, 3, 2)), ((0, 4), (0,)), ((2, 3, 4), (2, 4))]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.7])
@pytest.mark.parametrize("inp,tgt", CE_CASES, ids=[str(c) for c in CE_CASES])
def test_cross_entropy(inp, tgt, smoothing, reduction):
    rng = np.random.default_rng(2)
    classes = inp[0] if len(inp) == 1 else inp[1]
    r = RED[reduction]

    def ce(lib, x, t, w, ignore=-100):
        if lib is torch:
            return F.cross_entropy(x, t, w, ignore_index=ignore, reduction=reduction, label_smoothing=smoothing)
        return kiln.cross_entropy_loss(x, t, w, r, ignore, smoothing)

    for name in LOSS_DTYPES:
        rtol, atol = _loss_tol(name)
        x = random_array(inp, name, rng)
        w = random_array((classes,), name, rng, 0.2, 2.0)
        kw, tw = both(w, name)
        for layout in [None] + (["T"] if len(inp) == 2 else []):
            kx, tx = both(x, name, layout)
            # class-index targets, with and without weight and an ignored class
            target = _targets(tgt, classes, rng, ignore=2)
            kt, tt = both(target, "int64")
            check(lambda lib, x, t: ce(lib, x, t, None), [kx, kt], [tx, tt], rtol, atol)
            check(lambda lib, x, t, w: ce(lib, x, t, w, ignore=2), [kx, kt, kw], [tx, tt, tw], rtol, atol)
            # probability targets: the same shape as the input, rows summing to one
            probs = rng.random(inp)
            probs = probs / np.maximum(probs.sum(axis=0 if len(inp) == 1 else 1, keepdims=True), 1e-9)
            kp, tp = both(probs, name)
            check(lambda lib, x, t: ce(lib, x, t, None), [kx, kp], [tx, tp], rtol, atol)
            check(lambda lib, x, t, w: ce(lib, x, t, w), [kx, kp, kw], [tx, tp, tw], rtol, atol)


POINTWISE_LOSS_SHAPES = [((), ()), ((0,), (0,)), ((5,), (5,)), ((3, 4), (3, 4)), ((2, 3, 4), (2, 3, 4)),
                         ((3, 4), (4,)), ((3, 1), (1, 4))]


def _pointwise_losses():
    def mk(kname, tname, **extra):
        def fn(red):
            def call(lib, x, y):
                if lib is torch:
                    return getattr(F, tname)(x, y, reduction=red, **extra)
                return getattr(kiln, kname)(x, y, RED[red], *extra.values())
            return call
        return fn

    return {
        "mse_loss": mk("mse_loss", "mse_loss"), "l1_loss": mk("l1_loss", "l1_loss"),
        "smooth_l1_loss": mk("smooth_l1_loss", "smooth_l1_loss"),
        "smooth_l1_loss_beta0.5": mk("smooth_l1_loss", "smooth_l1_loss", beta=0.5),
        "smooth_l1_loss_beta0": mk("smooth_l1_loss", "smooth_l1_loss", beta=0.0),
        "huber_loss": mk("huber_loss", "huber_loss"),
        "huber_loss_delta2": mk("huber_loss", "huber_loss", delta=2.0),
        "huber_loss_delta0.3": mk("huber_loss", "huber_loss", delta=0.3),
    }


POINTWISE_LOSSES = _pointwise_losses()


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns when target and input sizes differ
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("loss", list(POINTWISE_LOSSES))
def test_pointwise_losses(loss, reduction):
    rng = np.random.default_rng(3)
    fn = POINTWISE_LOSSES[loss](reduction)
    for name in DTYPE_NAMES:
        rtol, atol = _loss_tol(name)
        for sa, sb in POINTWISE_LOSS_SHAPES:
            a, b = random_array(sa, name, rng), random_array(sb, name, rng)
            (ka, ta), (kb, tb) = both(a, name), both(b, name)
            check(fn, [ka, kb], [ta, tb], rtol, atol)
            if len(sa) >= 2 and sa == sb:
                (ka, ta), (kb, tb) = both(a, name, "T"), both(b, name, "S")
                check(fn, [ka, kb], [ta, tb], rtol, atol)
        # mixed dtypes: float input, double target
        if name == "float32":
            (ka, ta), (kb, tb) = both(np.ones((2, 3)), "float32"), both(np.zeros((2, 3)), "float64")
            check(fn, [ka, kb], [ta, tb])


BCE_SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4)]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy(reduction):
    rng = np.random.default_rng(4)
    r = RED[reduction]

    def bce(lib, x, y, w=None):
        if lib is torch:
            return F.binary_cross_entropy(x, y, w, reduction=reduction)
        return kiln.binary_cross_entropy(x, y, w, r)

    for name in DTYPE_NAMES:
        rtol, atol = _loss_tol(name)
        for shape in BCE_SHAPES:
            x = random_array(shape, name, rng, 0.05, 0.95)
            y = random_array(shape, name, rng, 0.0, 1.0)
            if name in INT_NAMES + ["bool"]:
                x = np.round(x)
            for layout in [None] + (["T", "S"] if len(shape) >= 2 else []):
                (kx, tx), (ky, ty) = both(x, name, layout), both(y, name, layout)
                check(bce, [kx, ky], [tx, ty], rtol, atol)
                if len(shape) >= 1:
                    kw, tw = both(random_array(shape[-1:], name, rng, 0.5, 2.0), name)
                    check(bce, [kx, ky, kw], [tx, ty, tw], rtol, atol)
    # probabilities of exactly 0 and 1: the log is clamped at -100
    (kx, tx), (ky, ty) = both(np.array([0.0, 1.0, 0.0, 1.0]), "float32"), both(np.array([0.0, 1.0, 1.0, 0.0]),
                                                                               "float32")
    check(bce, [kx, ky], [tx, ty])


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("n", [1, 7, 100000])
def test_binary_cross_entropy_out_of_range_raises(dtype, n):
    # The range check runs inside the elementwise loop, which is compiled for AVX2 and AVX-512
    # (Note [CPU instruction sets]): its error must reach Python (with GCC's target_clones it ended
    # in std::terminate, the process killed), from a serial run and from the thread pool.
    x = kiln.full((n,), 0.5, dtype=getattr(kiln, dtype))
    x[n // 2] = 1.5
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        kiln.nn.functional.binary_cross_entropy(x, kiln.ones(n, dtype=x.dtype))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        kiln.nn.functional.binary_cross_entropy(x * float("nan"), kiln.ones(n, dtype=x.dtype))
    assert kiln.nn.functional.binary_cross_entropy(x.clamp(0, 1), kiln.ones(n, dtype=x.dtype)).isfinite()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_binary_cross_entropy_with_logits(reduction):
    rng = np.random.default_rng(5)
    r = RED[reduction]

    def bcel(lib, x, y, w=None, pw=None):
        if lib is torch:
            return F.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw)
        return kiln.binary_cross_entropy_with_logits(x, y, w, pw, r)

    for name in DTYPE_NAMES:
        rtol, atol = _loss_tol(name)
        for shape in BCE_SHAPES:
            x = random_array(shape, name, rng, -30.0, 30.0) if name == "float64" else random_array(shape, name, rng)
            y = random_array(shape, name, rng, 0.0, 1.0)
            for layout in [None] + (["T", "S"] if len(shape) >= 2 else []):
                (kx, tx), (ky, ty) = both(x, name, layout), both(y, name, layout)
                check(bcel, [kx, ky], [tx, ty], rtol, atol)
                if len(shape) >= 1:
                    kw, tw = both(random_array(shape[-1:], name, rng, 0.5, 2.0), name)
                    kp, tp = both(random_array(shape[-1:], name, rng, 0.5, 3.0), name)
                    check(bcel, [kx, ky, kw], [tx, ty, tw], rtol, atol)
                    check(lambda lib, x, y, p: bcel(lib, x, y, None, p), [kx, ky, kp], [tx, ty, tp], rtol, atol)
                    check(bcel, [kx, ky, kw, kp], [tx, ty, tw, tp], rtol, atol)


EMBEDDING_INDICES = [(), (0,), (5,), (2, 3), (2, 0, 3)]


@pytest.mark.parametrize("padding_idx", [None, 0, 3, -2])
def test_embedding(padding_idx):
    rng = np.random.default_rng(6)

    def emb(lib, w, i):
        if lib is torch:
            return F.embedding(i, w, padding_idx=padding_idx)
        return kiln.embedding(w, i, -1 if padding_idx is None else padding_idx % 7)

    for name in DTYPE_NAMES:
        weight = random_array((7, 3), name, rng)
        for layout in (None, "T", "S"):
            kw, tw = both(weight, name, layout)
            for shape in EMBEDDING_INDICES:
                for iname in ("int64", "int32"):
                    ki, ti = both(rng.integers(0, 7, size=shape), iname)
                    check(emb, [kw, ki], [tw, ti])
    # the aten op itself with a float index tensor is rejected
    kw, tw = both(random_array((7, 3), "float32", rng), "float32")
    ki, ti = both(np.array([1.0, 2.0]), "float32")
    check(lambda lib, w, i: lib.ops.aten.embedding.default(w, i), [kw, ki], [tw, ti])


# --- dropout ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_native_dropout_statistics(p):
    kiln.manual_seed(0)
    x = kiln.ones(200, 250) * 2.0
    out, mask = kiln.native_dropout(x, p, True)
    assert (out.dtype, mask.dtype, tuple(out.shape), tuple(mask.shape)) == (kiln.float32, kiln.bool, (200, 250),
                                                                           (200, 250))
    o, m = np.array(out.tolist()), np.array(mask.tolist())
    n = o.size
    dropped = 1 - m.mean()
    assert abs(dropped - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-3, dropped
    np.testing.assert_allclose(o[m], 2.0 / (1 - p), rtol=1e-6)  # kept values scaled by 1/(1-p)
    assert (o[~m] == 0).all()
    assert x.tolist()[0][:3] == [2.0, 2.0, 2.0]  # input untouched
    # the same seed gives the same mask; another seed, another
    kiln.manual_seed(0)
    out2, mask2 = kiln.native_dropout(x, p, True)
    assert mask2.tolist() == mask.tolist() and out2.tolist() == out.tolist()
    kiln.manual_seed(1)
    assert kiln.native_dropout(x, p, True)[1].tolist() != mask.tolist()


def test_dropout_functional_and_inplace():
    kiln.manual_seed(3)
    x = kiln.ones(100, 100)
    out = kiln.dropout(x, 0.3, True)
    o = np.array(out.tolist())
    assert abs((o == 0).mean() - 0.3) < 0.02
    np.testing.assert_allclose(o[o != 0], 1 / 0.7, rtol=1e-6)
    kiln.manual_seed(3)
    assert kiln.dropout(x, 0.3, True).tolist() == out.tolist()
    y = x.clone()
    kiln.manual_seed(3)
    r = kiln.dropout_(y, 0.3, True)
    assert r.tolist() == out.tolist() and y.tolist() == out.tolist()
    # dtypes: float64 and half-precision dropouts keep their dtype
    for name in ("float64", "float16", "bfloat16"):
        d = kiln.dropout(kiln.ones(50, dtype=kdt(name)), 0.5, True)
        t = torch.dropout(torch.ones(50, dtype=getattr(torch, name)), 0.5, True)
        assert str(d.dtype).split(".")[1] == str(t.dtype).split(".")[1]
        assert set(d.tolist()) <= {0.0, 2.0}


def kdt(name):
    return getattr(kiln, name)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_dropout_eval_mode_and_edge_probabilities(name):
    rng = np.random.default_rng(7)
    data = random_array((4, 5), name, rng)
    kx, tx = both(data, name)
    # eval mode: the input comes back; native_dropout's mask is all True
    check(lambda lib, x: lib.dropout(x, 0.5, False), [kx], [tx])
    check(lambda lib, x: lib.native_dropout(x, 0.5, False), [kx], [tx])
    assert kiln.dropout(kx, 0.5, False).tolist() == kx.tolist()
    # p = 0 keeps everything, p = 1 zeroes everything
    check(lambda lib, x: lib.dropout(x, 0.0, True), [kx], [tx])
    check(lambda lib, x: lib.native_dropout(x, 1.0, True), [kx], [tx])
    check(lambda lib, x: lib.dropout(x, 1.0, True), [kx], [tx])
    # 0-size and 0-dim inputs
    for shape in ((0, 3), ()):
        kz, tz = both(random_array(shape, name, rng), name)
        out = kiln.dropout(kz, 0.5, True)
        assert tuple(out.shape) == shape and out.dtype == kz.dtype


def test_dropout_bad_probability_and_dtype():
    for p in (-0.1, 1.5):
        check(lambda lib, x: lib.native_dropout(x, p, True), *[[v] for v in both(np.ones(3), "float32")])
        check(lambda lib, x: lib.dropout(x, p, True), *[[v] for v in both(np.ones(3), "float32")])
    check(lambda lib, x: lib.dropout(x, 0.5, True), *[[v] for v in both(np.ones(3), "int64")])


# --- bad input ---------------------------------------------------------------------------------------

def inputs(lib):
    """Fresh inputs for one case: the same values for kiln and torch."""
    f = lambda *s: lib.tensor((np.arange(np.prod(s), dtype=np.float32).reshape(s) / 10).tolist())  # noqa: E731
    return {
        "a": f(2, 3), "b": f(4), "x": f(3, 4), "x3": f(2, 3, 4), "x5": f(1, 2, 2, 2, 2),
        "t": lib.tensor([0, 3, 1]), "t_big": lib.tensor([0, 4, 1]), "t_neg": lib.tensor([0, -1, 1]),
        "t2": lib.tensor([[0, 1], [2, 3]]), "tf": lib.tensor([0.0, 1.0, 2.0]), "w3": lib.ones(3),
        "w4": lib.ones(4), "e": lib.zeros(0, 3), "i": lib.tensor([[1, 2], [3, 4]]),
        "p": lib.tensor([0.2, 0.5]), "y": lib.tensor([1.0, 0.0]), "y3": lib.tensor([1.0, 0.0, 1.0]),
        "emb": f(5, 3), "idx_big": lib.tensor([1, 5]), "idx_neg": lib.tensor([-1, 2]),
    }


def _nll(lib, x, t, w=None, reduction="mean", ignore_index=-100):
    if lib is torch:
        return F.nll_loss(x, t, w, ignore_index=ignore_index, reduction=reduction)
    return kiln.nll_loss_nd(x, t, w, RED[reduction], ignore_index)


def _ce(lib, x, t, w=None, smoothing=0.0):
    if lib is torch:
        return F.cross_entropy(x, t, w, label_smoothing=smoothing)
    return kiln.cross_entropy_loss(x, t, w, 1, -100, smoothing)


ERROR_CASES = [
    # reductions
    ("reduction", "max.dim dim out of range", lambda lib, t: t["a"].max(2)),
    ("reduction", "max of empty", lambda lib, t: t["e"].max()),
    ("reduction", "max.dim over empty dim", lambda lib, t: t["e"].max(0)),
    ("reduction", "argmax of empty", lambda lib, t: t["e"].argmax()),
    ("reduction", "amax over empty dim", lambda lib, t: t["e"].amax(0)),
    ("reduction", "amin repeated dim", lambda lib, t: t["a"].amin((0, 0))),
    ("reduction", "prod dim out of range", lambda lib, t: t["a"].prod(-3)),
    ("reduction", "var of ints", lambda lib, t: t["i"].var()),
    ("reduction", "std dim out of range", lambda lib, t: t["a"].std(5)),
    ("reduction", "var repeated dim", lambda lib, t: lib.var(t["a"], (1, 1))),
    ("reduction", "logsumexp dim out of range", lambda lib, t: lib.logsumexp(t["a"], 3)),
    ("reduction", "count_nonzero repeated dim", lambda lib, t: lib.count_nonzero(t["a"], (1, -1))),
    ("reduction", "vector_norm of ints", lambda lib, t: vnorm(lib)(t["i"], 2)),
    ("reduction", "vector_norm inf of empty", lambda lib, t: vnorm(lib)(t["e"], INF)),
    ("reduction", "vector_norm to int dtype", lambda lib, t: vnorm(lib)(t["a"], 2, dtype=lib.int64)),
    ("reduction", "any dim out of range", lambda lib, t: t["a"].any(2)),
    # activations
    ("activation", "softmax dim out of range", lambda lib, t: lib.softmax(t["a"], 2)),
    ("activation", "log_softmax of ints", lambda lib, t: lib.log_softmax(t["i"], 0)),
    ("activation", "gelu bad approximate", lambda lib, t: (kiln.gelu if lib is kiln else F.gelu)(t["a"],
                                                                                               approximate="x")),
    ("activation", "gelu of ints", lambda lib, t: (kiln.gelu if lib is kiln else F.gelu)(t["i"])),
    ("activation", "in-place leaky_relu of ints",
     lambda lib, t: (kiln.leaky_relu_ if lib is kiln else F.leaky_relu_)(t["i"], 0.5)),
    # losses
    ("loss", "nll_loss 3-D target for 2-D input", lambda lib, t: _nll(lib, t["x"], t["t2"])),
    ("loss", "nll_loss batch mismatch", lambda lib, t: _nll(lib, t["x"], t["t2"][0])),
    ("loss", "nll_loss target out of range", lambda lib, t: _nll(lib, t["x"], t["t_big"])),
    ("loss", "nll_loss negative target", lambda lib, t: _nll(lib, t["x"], t["t_neg"])),
    ("loss", "nll_loss float target", lambda lib, t: _nll(lib, t["x"], t["tf"])),
    ("loss", "nll_loss weight of wrong size", lambda lib, t: _nll(lib, t["x"], t["t"], t["w3"])),
    ("loss", "nll_loss 0-dim input", lambda lib, t: _nll(lib, t["x"][0, 0], t["t"][0])),
    ("loss", "nll_loss 5-D target mismatch", lambda lib, t: _nll(lib, t["x5"], t["t2"])),
    ("loss", "nll_loss2d on 2-D input",
     lambda lib, t: lib.ops.aten.nll_loss2d.default(t["x"], t["t"], None, 1, -100)),
    ("loss", "nll_loss on 3-D input", lambda lib, t: lib.ops.aten.nll_loss.default(t["x3"], t["t2"], None, 1, -100)),
    ("loss", "cross_entropy target out of range", lambda lib, t: _ce(lib, t["x"], t["t_big"])),
    ("loss", "cross_entropy prob target shape", lambda lib, t: _ce(lib, t["x"], t["x"][:, :2])),
    ("loss", "cross_entropy smoothing > 1", lambda lib, t: _ce(lib, t["x"], t["t"], None, 1.5)),
    ("loss", "cross_entropy int input", lambda lib, t: _ce(lib, t["i"], t["t"][:2])),
    ("loss", "mse_loss shape mismatch", lambda lib, t: (kiln.mse_loss if lib is kiln else F.mse_loss)(t["a"], t["b"])),
    ("loss", "l1_loss shape mismatch", lambda lib, t: (kiln.l1_loss if lib is kiln else F.l1_loss)(t["a"], t["b"])),
    ("loss", "smooth_l1 negative beta",
     lambda lib, t: (kiln.smooth_l1_loss(t["a"], t["a"], 1, -1.0) if lib is kiln
                     else F.smooth_l1_loss(t["a"], t["a"], beta=-1.0))),
    ("loss", "huber negative delta",
     lambda lib, t: (kiln.huber_loss(t["a"], t["a"], 1, -1.0) if lib is kiln
                     else F.huber_loss(t["a"], t["a"], delta=-1.0))),
    ("loss", "binary_cross_entropy size mismatch",
     lambda lib, t: lib.ops.aten.binary_cross_entropy.default(t["p"], t["y3"])),
    ("loss", "binary_cross_entropy input > 1",
     lambda lib, t: lib.ops.aten.binary_cross_entropy.default(t["y3"] * 2, t["y3"])),
    ("loss", "bce_with_logits shape mismatch",
     lambda lib, t: lib.ops.aten.binary_cross_entropy_with_logits.default(t["p"], t["y3"])),
    ("loss", "bce_with_logits pos_weight mismatch",
     lambda lib, t: lib.ops.aten.binary_cross_entropy_with_logits.default(t["x"], t["x"], None, t["w3"])),
    ("loss", "embedding index out of range", lambda lib, t: lib.ops.aten.embedding.default(t["emb"], t["idx_big"])),
    ("loss", "embedding negative index", lambda lib, t: lib.ops.aten.embedding.default(t["emb"], t["idx_neg"])),
    ("loss", "embedding 1-D weight", lambda lib, t: lib.ops.aten.embedding.default(t["b"], t["t"])),
    ("loss", "embedding float indices", lambda lib, t: lib.ops.aten.embedding.default(t["emb"], t["tf"])),
]


@pytest.mark.parametrize("family,desc,call", ERROR_CASES, ids=[f"{c[0]}-{c[1]}" for c in ERROR_CASES])
def test_bad_input_raises_like_torch(family, desc, call):
    assert_raises_like_torch(desc, call, inputs)


# --- cumprod backward (issue 16) --------------------------------------------------------------------
# cumprod's formula read any(x == 0) from memory; fake tensors (the compiled backward) have none,
# so kiln.compile of a cumprod's backward segfaulted. Eager and every backend against torch, with
# zeros (first and later), 0-size lines, dim=-1 and a non-contiguous input; in a subprocess.
_CUMPROD_RUNNER = """
import json, sys
import numpy as np
import kiln as lib
CASES = [((2, 3), -1, [[1., 0., 2.], [3., 4., 5.]]), ((3, 2), 0, [[0., 2.], [3., 0.], [0., 5.]]),
         ((2, 4), 1, [[1., 2., 3., 4.], [0., 2., 0., 4.]]), ((0, 3), -1, []), ((3,), 0, [2., -1., 0.5])]
def run(lib, backend):
    out = []
    for shape, dim, data in CASES:
        x = lib.tensor(np.array(data, dtype=np.float32).reshape(shape).tolist() if data else
                       np.zeros(shape, np.float32).tolist()).reshape(shape).requires_grad_()
        g = lib.arange(float(np.prod(shape))).reshape(shape) + 1
        def f(x):
            xt = (x.transpose(0, -1) * 1).transpose(0, -1)  # non-contiguous when 2-D
            return lib.cumprod(xt, dim) * g
        fn = f if backend is None else lib.compile(f, backend=backend)
        y = fn(x)
        y.sum().backward()
        out.append([y.detach().tolist(), x.grad.tolist()])
    return out
if __name__ == "__main__":
    print(json.dumps({b: run(lib, None if b == "eager" else b) for b in sys.argv[1:]}))
"""


def test_cumprod_backward_eager_and_compiled_match_torch():
    import json
    import os
    import subprocess
    import sys
    backends = ["eager", "aot_eager", "inductor"]
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(__file__)), "python"))
    r = subprocess.run([sys.executable, "-c", _CUMPROD_RUNNER, *backends], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"kiln died (exit {r.returncode}): {r.stderr[-2000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    namespace = {"__name__": "oracle"}
    exec(_CUMPROD_RUNNER.replace("import kiln as lib", "import torch as lib"), namespace)
    want = namespace["run"](torch, None)
    for b in backends:
        for (gy, gg), (wy, wg) in zip(got[b], want):
            np.testing.assert_allclose(np.array(gy), np.array(wy), rtol=1e-5, atol=1e-5, err_msg=b)
            np.testing.assert_allclose(np.array(gg), np.array(wg), rtol=1e-5, atol=1e-5, err_msg=b)


# Sums over dims between leading and trailing kept ones take the column-accumulator path (Note [Outer
# sums] in tensor/ops/reduce.cc): columns in blocks of 512 (a partial last block), rows of every
# length, every dtype; non-contiguous inputs keep the per-output path.
@requires_torch
@pytest.mark.parametrize("name", DTYPE_NAMES)
@pytest.mark.parametrize("shape,dims", [((1024, 1030), (0,)), ((6, 7, 513), (1,)), ((3, 4, 5, 6), (1, 2)),
                                        ((2, 0, 9), (1,)), ((9, 2), (0,)), ((5, 6, 7), (0, 1))])
def test_outer_sums(name, shape, dims):
    rng = np.random.default_rng(len(shape) + sum(dims))
    a = random_array(shape, name, rng)
    k = kiln.tensor(a).to(getattr(kiln, name)) if name != "bool" else kiln.tensor(a)
    t = torch.tensor(a).to(getattr(torch, name)) if name != "bool" else torch.tensor(a)
    tol = {"float16": 1e-2, "bfloat16": 5e-2}.get(name, 1e-5)
    assert_same(k.sum(dims), t.sum(dims), rtol=tol, atol=tol * 10)
    if name in FLOAT_NAMES:
        assert_same(k.mean(dims, keepdim=True), t.mean(dims, keepdim=True), rtol=tol, atol=tol)
    kt, tt = k.transpose(0, -1), t.transpose(0, -1)  # not contiguous: the per-output path
    assert_same(kt.sum(dims), tt.sum(dims), rtol=tol, atol=tol * 10)


# Note [Outer sums in float]: float32 rows are summed in float groups of 16 rows, the groups in
# double, so a long outer sum keeps the accuracy of a 16-element one: within 1.75 ulp of the float64
# sum where every element is 1e4 plus noise (a plain float accumulator down 100,000 rows is off by
# thousands of ulps; PyTorch's cascade by up to 2.3-2.7 on these). Rows not a multiple of 4 or 16,
# and a leading kept dim, reach every loop of the kernel.
@pytest.mark.parametrize("shape,dim", [((100000, 8), 0), ((1024, 1030), 0), ((4099, 700), 0), ((3, 20003, 5), 1),
                                       ((67, 513), 0), ((200, 2000), 0), ((17, 1000), 0)])
def test_outer_float_sums_stay_accurate(shape, dim):
    rng = np.random.default_rng(sum(shape))
    a = (1e4 + rng.standard_normal(shape)).astype(np.float32)
    exact = a.astype(np.float64).sum(dim)
    got = kiln.tensor(a).sum(dim).numpy().astype(np.float64)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - exact) / ulp) <= 1.75
    mean = kiln.tensor(a).mean(dim).numpy().astype(np.float64)
    ulp_mean = np.spacing(np.abs(exact / shape[dim]).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(mean - exact / shape[dim]) / ulp_mean) <= 2.5  # the sum's error, then a division
    threads = kiln.get_num_threads()
    try:  # one task or several over the columns: each column summed in the same order
        for n in (1, 3):
            kiln.set_num_threads(n)
            np.testing.assert_array_equal(kiln.tensor(a).sum(dim).numpy(), got.astype(np.float32))
    finally:
        kiln.set_num_threads(threads)


# Note [Vectorised extrema] and the lane sums of vector norms: float and double rows long enough for
# the vector lanes, outer reductions down whole rows, NaN anywhere, and rows whose extreme is a
# signed zero, where the result must be the element-order fold's (amax keeps the first of equal
# elements, max() over everything the last, as PyTorch's scalar loops).
def _fold(values, better, tie_last):
    best = values[0]
    for v in values[1:]:
        if math.isnan(best):
            break
        if math.isnan(v) or better(v, best) or (tie_last and v == best):
            best = v
    return best


@requires_torch
@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("shape,dims", [((1024, 1030), (0,)), ((1024, 1030), (1,)), ((1024, 1030), None),
                                        ((6, 7, 513), (1,)), ((6, 7, 513), (2,)), ((6, 7, 513), (1, 2)),
                                        ((3, 200), (1,)), ((5, 63), (1,)), ((300,), (0,))])
def test_vectorised_extrema_and_norms(name, shape, dims):
    rng = np.random.default_rng(len(shape) + (sum(dims) if dims else 7))
    a = rng.standard_normal(shape).astype(name)
    flat = a.reshape(-1)
    flat[rng.integers(0, flat.size, 3)] = np.nan
    k, t = kiln.tensor(a), torch.tensor(a)
    d = dims if dims is not None else tuple(range(len(shape)))
    for op in ("amax", "amin"):
        assert_same(getattr(k, op)(d), getattr(t, op)(d), rtol=0, atol=0)
    assert_same(k.max(), t.max(), rtol=0, atol=0)
    assert_same(k.min(), t.min(), rtol=0, atol=0)
    if dims is not None and len(dims) == 1:  # values and the first index of the extreme (or NaN)
        for op in ("max", "min", "argmax", "argmin"):
            assert_same(getattr(k, op)(dims[0]), getattr(t, op)(dims[0]), rtol=0, atol=0)
        ties = np.round(a * 2) / 2  # many equal extremes in a row
        for op in ("max", "argmin"):
            assert_same(getattr(kiln.tensor(ties), op)(dims[0]), getattr(torch.tensor(ties), op)(dims[0]),
                        rtol=0, atol=0)
    clean = np.nan_to_num(a)
    kc, tc = kiln.tensor(clean), torch.tensor(clean)
    # kiln sums in double: against float64 numpy to float32's rounding; PyTorch's float sums
    # drift by 1e-5 over a million elements
    wide = clean.astype(np.float64)
    for p in (0, 1, 2):
        want = np.sum(wide != 0, axis=d) if p == 0 else np.sum(np.abs(wide) ** p, axis=d) ** (1 / p)
        got = kiln.linalg.vector_norm(kc, p, d)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6 if name == "float32" else 1e-13)
        assert_same(got, torch.linalg.vector_norm(tc, p, d), rtol=1e-4, atol=1e-4)
        assert_same(kc.norm(p, d[-1]), tc.norm(p, d[-1]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_extrema_of_signed_zeros_fold_in_order(name):
    rng = np.random.default_rng(3)
    for n in (5, 100, 1000):
        a = np.where(rng.random((4, n)) < 0.5, -0.0, 0.0).astype(name)
        a[1] -= 1  # a row with a negative extreme and zeros elsewhere in it for amin
        a[1, 17 % n] = 0.0
        k = kiln.tensor(a)
        for op, better in (("amax", lambda v, b: v > b), ("amin", lambda v, b: v < b)):
            got = getattr(k, op)(1).numpy()
            want = np.array([_fold(list(row), better, False) for row in a], dtype=name)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
            np.testing.assert_array_equal(got, want)
            col = getattr(k.t().contiguous(), op)(0).numpy()  # the outer path
            np.testing.assert_array_equal(np.signbit(col), np.signbit(want))
        for op, better in (("max", lambda v, b: v > b), ("min", lambda v, b: v < b)):
            values, indices = getattr(k, op)(1)  # with indices: the fold's element and its index
            for row, value, index in zip(a, values.numpy(), indices.numpy()):
                want = _fold(list(row), better, False)
                assert value == want and np.signbit(value) == np.signbit(want)
                assert index == next(i for i, v in enumerate(row) if v == want)
            got = getattr(k[0], op)().item()
            want = _fold(list(a[0]), better, True)
            assert got == want and math.copysign(1, got) == math.copysign(1, want), (op, n)
