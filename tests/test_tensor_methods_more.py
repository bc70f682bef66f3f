"""The torch.Tensor methods and torch functions real code calls (issue 17): the aliases and metadata
predicates of kiln/_aliases.py and the composites of kiln/_pointwise_more.py, _matrix_more.py and
_index_ops_more.py, as a table against PyTorch 2.13 (the table and its checks are
tests/test_composite_ops.py's: values, dtypes and shapes on contiguous, transposed and strided
inputs, view-or-copy, float64 gradients, one compiled program per backend against eager).

Also here: the in-place variants return self and bump the version, metadata answers, named
results, torch's exception classes for bad input, and the data-dependent ops' graph breaks.
"""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln._dynamo
from conftest import assert_raises_like_torch, assert_same, random_array, requires_torch, to_kiln, to_torch, torch
from test_composite_ops import Case, _check_case, _detach, _grads, _layout, _layouts

pytestmark = requires_torch

F = ["float32", "float64"]
FLOATS = F + ["float16", "bfloat16"]
NUM = F + ["int64"]
INTS = ["int64", "int32"]


def _idx(lib, rows):
    return lib.tensor(rows, dtype=lib.int64)


def _spd_factor(lib, x):
    """A well-conditioned lower-triangular Cholesky factor made from x (square)."""
    return x.tril() + 3 * lib.eye(x.shape[-1], dtype=x.dtype)


CASES = [
    # aliases: the same op under torch's second name (function and method)
    *[Case(f"{alias}", (lambda alias: lambda lib, x: getattr(lib, alias)(x))(alias), [((3, 4),), ((),)], dtypes=F,
           low=-0.9, high=0.9)
      for alias in ("arccos", "arcsin", "arctan", "arctanh", "arcsinh", "fix")],
    # torch's gradient of sgn is a ZeroTensor, which has no storage to compare
    Case("sgn", lambda lib, x: lib.sgn(x), [((3, 4),), ((),)], dtypes=NUM, grad=False),
    Case("arccosh", lambda lib, x: lib.arccosh(x + 3), [((3, 4),)], dtypes=F),
    Case("Tensor.arccos_", lambda lib, x: x.clone().arccos_(), [((3, 4),)], dtypes=F, low=-0.9, high=0.9),
    # torch has no derivative for asinh_ (it raises); kiln's is asinh's
    Case("Tensor.arcsinh_", lambda lib, x: x.clone().arcsinh_(), [((3, 4),)], dtypes=F, grad=False),
    Case("arctan2", lambda lib, x, y: lib.arctan2(x, y), [((3, 4), (3, 4)), ((3, 4), (4,))], dtypes=F),
    Case("Tensor.arctan2_", lambda lib, x, y: x.clone().arctan2_(y), [((3, 4), (4,))], dtypes=F),
    *[Case(f"Tensor.{alias}", (lambda alias: lambda lib, x, y: getattr(x, alias)(y))(alias),
           [((3, 4), (3, 4)), ((3, 4), (1, 4))], dtypes=NUM, grad=False)
      for alias in ("greater", "greater_equal", "less", "less_equal", "not_equal")],
    Case("Tensor.greater_", lambda lib, x, y: x.clone().greater_(y), [((3, 4), (4,))], dtypes=F, grad=False),
    Case("divide", lambda lib, x, y: lib.divide(x, y), [((3, 4), (3, 4))], dtypes=NUM, low=0.5, high=3),
    Case("divide_floor", lambda lib, x, y: x.divide(y, rounding_mode="floor"), [((3, 4), (4,))], dtypes=NUM, low=0.5,
         high=3, grad=False),
    Case("true_divide", lambda lib, x, y: lib.true_divide(x, y), [((3, 4), (3, 4))], dtypes=NUM, low=0.5, high=3),
    Case("Tensor.true_divide_", lambda lib, x, y: x.clone().true_divide_(y), [((3, 4), (4,))], dtypes=F, low=0.5),
    Case("multiply", lambda lib, x, y: lib.multiply(x, y), [((3, 4), (3, 1))], dtypes=NUM),
    Case("subtract", lambda lib, x, y: lib.subtract(x, y, alpha=2), [((3, 4), (4,))], dtypes=NUM),
    Case("Tensor.subtract_", lambda lib, x, y: x.clone().subtract_(y), [((3, 4), (4,))], dtypes=F),
    Case("negative_", lambda lib, x: lib.negative_(x.clone()), [((3, 4),)], dtypes=NUM),
    Case("absolute_", lambda lib, x: x.clone().absolute_(), [((3, 4),)], dtypes=NUM),
    Case("fix_", lambda lib, x: x.clone().fix_(), [((3, 4),)], dtypes=F),
    Case("Tensor.swapaxes_", lambda lib, x: x.clone().swapaxes_(0, 1) * 1, [((3, 4),)], dtypes=F),
    Case("Tensor.squeeze_", lambda lib, x: x.clone().unsqueeze(1).squeeze_(), [((3, 4),), ((1, 4),)], dtypes=F),
    Case("Tensor.unsqueeze_", lambda lib, x: x.clone().unsqueeze_(-1), [((3, 4),), ((),)], dtypes=F),
    # views and reorderings
    Case("ravel", lambda lib, x: lib.ravel(x), [((3, 4),), ((),), ((2, 0),)], view=True),
    Case("msort", lambda lib, x: lib.msort(x), [((5, 3),), ((4,),)], dtypes=NUM),
    Case("argwhere", lambda lib, x: lib.argwhere(x > 0), [((3, 4),), ((5,),)], dtypes=NUM, grad=False, compile=False),
    Case("adjoint", lambda lib, x: lib.adjoint(x), [((3, 4),), ((2, 3, 4),)], view=True),
    Case("Tensor.mH", lambda lib, x: x.mH, [((3, 4),), ((2, 3, 4),)], view=True),
    Case("Tensor.H", lambda lib, x: x.H, [((3, 4),)], view=True),
    Case("fliplr", lambda lib, x: lib.fliplr(x), [((3, 4),), ((2, 3, 4),)]),
    Case("flipud", lambda lib, x: x.flipud(), [((3, 4),), ((5,),)]),
    Case("nansum", lambda lib, x: lib.nansum(lib.where(x > 1.5, math.nan, x)), [((3, 4),), ((),), ((0,),)],
         dtypes=F),
    Case("Tensor.nansum_dim", lambda lib, x: lib.where(x > 1, math.nan, x).nansum((0,), keepdim=True),
         [((3, 4),)], dtypes=F),
    Case("nansum_int", lambda lib, x: lib.nansum(x, 1), [((3, 4),)], dtypes=INTS + ["bool"]),
    Case("Tensor.sum_to_size", lambda lib, x: x.sum_to_size(3, 1), [((3, 4),), ((2, 3, 4),)], dtypes=NUM),
    Case("Tensor.sum_to_size_seq", lambda lib, x: x.sum_to_size((1, 4)), [((2, 3, 4),)], dtypes=F),
    Case("matrix_power", lambda lib, x: lib.matrix_power(x, 3), [((3, 3),), ((2, 3, 3),)], dtypes=F, rtol=1e-5,
         atol=1e-5),
    Case("Tensor.matrix_power0", lambda lib, x: x.matrix_power(0), [((3, 3),)], dtypes=F),  # a zero gradient
    # pointwise
    Case("deg2rad", lambda lib, x: lib.deg2rad(x), [((3, 4),), ((),)], dtypes=FLOATS + ["int64"]),
    Case("rad2deg", lambda lib, x: x.rad2deg(), [((3, 4),)], dtypes=F + ["int64"]),
    Case("deg2rad_", lambda lib, x: x.clone().deg2rad_(), [((3, 4),)], dtypes=NUM),
    Case("sinc", lambda lib, x: lib.sinc(x.round()), [((3, 4),), ((),)], dtypes=F),
    Case("sinc_nonzero", lambda lib, x: x.sinc(), [((3, 4),)], dtypes=F + ["int64"]),
    Case("sinc_", lambda lib, x: x.clone().sinc_(), [((3, 4),)], dtypes=F),
    Case("float_power", lambda lib, x, y: lib.float_power(x.abs(), y), [((3, 4), (3, 4)), ((3, 4), (4,))],
         dtypes=F + ["int64"]),
    Case("float_power_scalar", lambda lib, x: lib.float_power(x, 2), [((3, 4),)], dtypes=F + ["int64"]),
    Case("float_power_scalar_base", lambda lib, x: lib.float_power(2, x), [((3, 4),)], dtypes=F),
    Case("Tensor.float_power_", lambda lib, x: x.clone().float_power_(3), [((3, 4),)], dtypes=["float64"]),
    Case("heaviside", lambda lib, x, y: lib.heaviside(x.round(), y), [((3, 4), (3, 4)), ((3, 4), (4,))],
         dtypes=NUM, grad=False),
    Case("gcd", lambda lib, x, y: lib.gcd(x, y), [((3, 4), (3, 4)), ((3, 4), (4,)), ((), ())], dtypes=INTS,
         low=-30, high=30, grad=False),
    Case("Tensor.gcd_", lambda lib, x, y: x.clone().gcd_(y), [((3, 4), (4,))], dtypes=INTS, low=-30, high=30,
         grad=False),
    Case("lcm", lambda lib, x, y: lib.lcm(x, y), [((3, 4), (3, 4))], dtypes=INTS, low=-10, high=10, grad=False),
    Case("ldexp", lambda lib, x, y: lib.ldexp(x, y.round()), [((3, 4), (3, 4)), ((3, 4), (4,))], dtypes=F),
    Case("Tensor.ldexp_", lambda lib, x, y: x.clone().ldexp_(y.round()), [((3, 4), (4,))], dtypes=F),
    Case("frexp", lambda lib, x: lib.frexp(x * 1000), [((3, 4),), ((),)], dtypes=FLOATS),
    Case("Tensor.frexp_extremes", lambda lib, x: (x * lib.tensor([0.0, 1e-310, 1e308, math.inf, -3.0],
                                                                   dtype=x.dtype)).frexp(),
         [((5,),)], dtypes=["float64"], low=1, high=1.5, grad=False),
    Case("isposinf", lambda lib, x: lib.isposinf(x / lib.tensor(0.0, dtype=x.dtype)), [((3, 4),)], dtypes=F,
         grad=False),
    Case("Tensor.isneginf", lambda lib, x: x.isneginf(), [((3, 4),)], dtypes=NUM, grad=False),
    Case("isreal", lambda lib, x: lib.isreal(x), [((3, 4),)], dtypes=NUM, grad=False),
    Case("logcumsumexp", lambda lib, x: lib.logcumsumexp(x, 1), [((3, 4),), ((2, 7),), ((3, 0),)], dtypes=F,
         rtol=1e-5, atol=1e-5),
    Case("Tensor.logcumsumexp_wide", lambda lib, x: (x * 400).logcumsumexp(0), [((9, 2),), ((),)], dtypes=F,
         rtol=1e-5, atol=1e-5),
    # products
    Case("addmv", lambda lib, i, m, v: lib.addmv(i, m, v), [((4,), (4, 3), (3,)), ((1,), (4, 3), (3,))],
         dtypes=NUM, rtol=1e-5, atol=1e-5),
    Case("Tensor.addmv_scaled", lambda lib, i, m, v: i.addmv(m, v, beta=0.5, alpha=2), [((4,), (4, 3), (3,))],
         dtypes=F, rtol=1e-5, atol=1e-5),
    Case("addmv_beta0_nan", lambda lib, m, v: lib.addmv(lib.full((4,), math.nan, dtype=m.dtype), m, v, beta=0),
         [((4, 3), (3,))], dtypes=F, rtol=1e-5, atol=1e-5),
    Case("addmv_", lambda lib, i, m, v: lib.addmv_(i.clone(), m, v, alpha=3), [((4,), (4, 3), (3,))], dtypes=F,
         rtol=1e-5, atol=1e-5),
    Case("addr", lambda lib, i, a, b: lib.addr(i, a, b), [((4, 3), (4,), (3,)), ((3,), (4,), (3,))], dtypes=NUM),
    Case("Tensor.addr_", lambda lib, i, a, b: i.clone().addr_(a, b, beta=2, alpha=0.5), [((4, 3), (4,), (3,))],
         dtypes=F),
    Case("addbmm", lambda lib, i, a, b: lib.addbmm(i, a, b, alpha=2), [((3, 5), (2, 3, 4), (2, 4, 5))], dtypes=F,
         rtol=1e-5, atol=1e-5),
    Case("Tensor.addbmm_", lambda lib, i, a, b: i.clone().addbmm_(a, b), [((3, 5), (2, 3, 4), (2, 4, 5))], dtypes=F,
         rtol=1e-5, atol=1e-5),
    Case("Tensor.addmm_", lambda lib, i, a, b: i.clone().addmm_(a, b, beta=0.5), [((3, 5), (3, 4), (4, 5))],
         dtypes=F, rtol=1e-5, atol=1e-5),
    Case("Tensor.baddbmm_", lambda lib, i, a, b: i.clone().baddbmm_(a, b, alpha=2), [((2, 3, 5), (2, 3, 4), (2, 4, 5))],
         dtypes=F, rtol=1e-5, atol=1e-5),
    Case("inner", lambda lib, x, y: lib.inner(x, y), [((3, 4), (5, 4)), ((4,), (4,)), ((), (3,)), ((2, 3, 4), (4,))],
         dtypes=NUM, rtol=1e-5, atol=1e-5),
    Case("vdot", lambda lib, x, y: lib.vdot(x, y), [((4,), (4,)), ((0,), (0,))], dtypes=NUM, rtol=1e-5, atol=1e-5),
    Case("diagflat", lambda lib, x: lib.diagflat(x), [((3,),), ((2, 2),), ((),)], dtypes=NUM),
    Case("Tensor.diagflat_offset", lambda lib, x: x.diagflat(-1), [((2, 3),)], dtypes=F),
    # statistics
    Case("cov", lambda lib, x: lib.cov(x), [((3, 5),), ((6,),), ((1, 4),)], dtypes=F + ["int64"], rtol=1e-5,
         atol=1e-5),
    Case("cov_correction0", lambda lib, x: x.cov(correction=0), [((3, 5),)], dtypes=F, rtol=1e-5, atol=1e-5),
    Case("cov_weights", lambda lib, x: lib.cov(x, fweights=_idx(lib, [1, 2, 0, 3]),
                                               aweights=lib.tensor([0.5, 1.0, 2.0, 0.25], dtype=x.dtype)),
         [((3, 4),)], dtypes=F, rtol=1e-5, atol=1e-5),
    Case("cov_fweights", lambda lib, x: lib.cov(x, correction=2, fweights=_idx(lib, [1, 2, 1, 3])), [((2, 4),)],
         dtypes=F, rtol=1e-5, atol=1e-5),
    Case("corrcoef", lambda lib, x: lib.corrcoef(x), [((3, 5),), ((5,),)], dtypes=F, rtol=1e-5, atol=1e-5),
    Case("dist", lambda lib, x, y: lib.dist(x, y), [((3, 4), (3, 4)), ((3, 4), (4,))], dtypes=F, rtol=1e-5,
         atol=1e-5),
    *[Case(f"dist_p{p}", (lambda p: lambda lib, x, y: x.dist(y, p))(p), [((3, 4), (3, 4))], dtypes=F, rtol=1e-5,
           atol=1e-5) for p in (1, 3, math.inf)],
    # grad=False: kiln.linalg.vector_norm(x, 0) does not require grad (torch's does, with a zero gradient)
    Case("dist_p0", lambda lib, x, y: x.dist(y, 0), [((3, 4), (3, 4))], dtypes=F, grad=False),
    Case("renorm", lambda lib, x: lib.renorm(x, 2, 0, 2.5), [((3, 4),), ((2, 3, 4),)], dtypes=F, rtol=1e-5,
         atol=1e-5),
    Case("Tensor.renorm_p1", lambda lib, x: x.renorm(1, -1, 3.0), [((3, 4),)], dtypes=F, rtol=1e-5, atol=1e-5),
    Case("Tensor.renorm_", lambda lib, x: x.clone().renorm_(3, 1, 1.0), [((3, 4),)], dtypes=F, rtol=1e-5, atol=1e-5),
    # Cholesky
    Case("cholesky_solve", lambda lib, b, x: lib.cholesky_solve(b, _spd_factor(lib, x)),
         [((3, 2), (3, 3)), ((2, 3, 2), (3, 3)), ((3, 1), (2, 3, 3))], dtypes=F, rtol=1e-4, atol=1e-5),
    Case("cholesky_solve_upper", lambda lib, b, x: b.cholesky_solve(_spd_factor(lib, x).mT, upper=True),
         [((3, 2), (3, 3))], dtypes=F, rtol=1e-4, atol=1e-5),
    Case("cholesky_inverse", lambda lib, x: lib.cholesky_inverse(_spd_factor(lib, x)), [((3, 3),), ((2, 4, 4),)],
         dtypes=F, rtol=1e-4, atol=1e-5),
    Case("Tensor.cholesky_inverse_upper", lambda lib, x: _spd_factor(lib, x).mT.cholesky_inverse(True),
         [((3, 3),)], dtypes=F, rtol=1e-4, atol=1e-5),
    # indexing
    Case("take_along_dim", lambda lib, x: lib.take_along_dim(x, _idx(lib, [[0, 2, 1, 0], [1, 1, 0, 2]]), 0),
         [((3, 4),)], dtypes=NUM),
    Case("Tensor.take_along_dim_bcast", lambda lib, x: x.take_along_dim(_idx(lib, [[3, 0]]), dim=1), [((3, 4),)]),
    # dim=None views input as 1-D, as torch's (a transposed matrix raises in both)
    Case("take_along_dim_flat", lambda lib, x: lib.take_along_dim(x, _idx(lib, [5, 0, 11])), [((12,),)]),
    Case("index_copy", lambda lib, x, s: lib.index_copy(x, 1, _idx(lib, [3, 0]), s), [((3, 4), (3, 2))], dtypes=NUM),
    Case("Tensor.index_copy_", lambda lib, x, s: x.clone().index_copy_(0, _idx(lib, [2, 0]), s), [((3, 4), (2, 4))]),
    Case("index_fill", lambda lib, x: lib.index_fill(x, 1, _idx(lib, [3, -1, 0]), -5), [((3, 4),), ((2, 4, 2),)],
         dtypes=NUM),
    Case("Tensor.index_fill_tensor", lambda lib, x, v: x.index_fill(0, _idx(lib, [1]), v), [((3, 4), ())], dtypes=F),
    Case("Tensor.index_fill_", lambda lib, x: x.clone().index_fill_(0, _idx(lib, [0, 2]), 1.5), [((3, 4),)],
         dtypes=F),
    Case("masked_scatter", lambda lib, x, m, s: x.masked_scatter(m > 0, s), [((3, 4), (3, 4), (4, 4)),
                                                                           ((3, 4), (4,), (12,))], dtypes=NUM),
    Case("Tensor.masked_scatter_", lambda lib, x, m, s: x.clone().masked_scatter_(m > 0, s), [((3, 4), (3, 4), (12,))],
         dtypes=F),
    Case("put", lambda lib, x, s: x.put(_idx(lib, [0, 5, -1]), s), [((3, 4), (3,))], dtypes=NUM),
    Case("put_accumulate", lambda lib, x, s: x.put(_idx(lib, [[0, 0], [-1, 7]]), s, accumulate=True),
         [((3, 4), (2, 2))], dtypes=NUM),
    Case("Tensor.put_", lambda lib, x, s: x.clone().put_(_idx(lib, [1, 4]), s), [((2, 3), (2,))], dtypes=F),
    *[Case(f"scatter_reduce_{reduce}_{include}",
           (lambda reduce, include: lambda lib, x, s: x.scatter_reduce(
               0, _idx(lib, [[0, 2, 1], [0, 0, 2]]), s, reduce, include_self=include))(reduce, include),
           [((3, 4), (2, 3)), ((4, 3), (2, 3))], dtypes=NUM)
      for reduce in ("sum", "prod", "mean", "amax", "amin") for include in (True, False)],
    # src larger than index: scatter reads its corner (torch's backward raises there, so values only)
    Case("scatter_reduce_src_corner", lambda lib, x, s: x.scatter_reduce(0, _idx(lib, [[0, 2], [1, 1]]), s, "amin",
                                                                        include_self=False),
         [((3, 4), (3, 5))], dtypes=NUM, grad=False),
    Case("scatter_reduce_dim1", lambda lib, x, s: lib.scatter_reduce(x, 1, _idx(lib, [[0, 1, 0, 1]] * 3), s, "amax"),
         [((3, 2), (3, 4))], dtypes=NUM),
    Case("Tensor.scatter_reduce_", lambda lib, x, s: x.clone().scatter_reduce_(0, _idx(lib, [[1, 1]]), s, "sum"),
         [((2, 2), (1, 2))], dtypes=F),
    Case("select_scatter", lambda lib, x, s: x.select_scatter(s, 1, 2), [((3, 4), (3,))]),
    Case("slice_scatter", lambda lib, x, s: x.slice_scatter(s, 1, 1, 4, 2), [((3, 4), (3, 2))]),
    Case("diagonal_scatter", lambda lib, x, s: x.diagonal_scatter(s, 1), [((3, 4), (3,))]),
    # splits (views)
    Case("tensor_split", lambda lib, x: lib.tensor_split(x, 3, 1), [((3, 4),), ((2, 7),), ((2, 2),)], view=True),
    Case("Tensor.tensor_split_indices", lambda lib, x: x.tensor_split([1, -1, 9]), [((5, 2),)], view=True),
    # a tensor of split points is read (a graph break under compile, as torch's)
    Case("tensor_split_tensor", lambda lib, x: lib.tensor_split(x, _idx(lib, [1, 3]), dim=-1), [((2, 5),)],
         view=True, compile=False),
    Case("hsplit", lambda lib, x: lib.hsplit(x, 2), [((3, 4),), ((6,),)], view=True),
    Case("Tensor.vsplit", lambda lib, x: x.vsplit([1, 2]), [((3, 4),)], view=True),
    Case("dsplit", lambda lib, x: lib.dsplit(x, 2), [((2, 3, 4),)], view=True),
    # selections
    Case("kthvalue", lambda lib, x: lib.kthvalue(x, 2, 1), [((3, 4),), ((2, 3, 5),)], dtypes=F),
    Case("Tensor.kthvalue_keepdim", lambda lib, x: x.kthvalue(3, 0, keepdim=True), [((3, 4),), ((5,),)], dtypes=F),
    Case("kthvalue_0d", lambda lib, x: lib.kthvalue(x, 1), [((),)], dtypes=F),
    Case("aminmax", lambda lib, x: lib.aminmax(x), [((3, 4),), ((),)], dtypes=NUM + ["bool"]),
    Case("Tensor.aminmax_dim", lambda lib, x: x.aminmax(dim=0, keepdim=True), [((3, 4),), ((3,),)], dtypes=NUM),
    Case("aminmax_keepdim_all", lambda lib, x: lib.aminmax(x, keepdim=True), [((3, 4),)], dtypes=F),
]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_values_match_torch(case):
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in case.dtypes:
            for shapes in case.sample:
                arrays = [random_array(s, name, rng, case.low, case.high) for s in shapes]
                for layouts in _layouts(arrays, case):
                    _check_case(case, name, arrays, layouts)


@pytest.mark.parametrize("case", [c for c in CASES if c.grad and "float64" in c.dtypes], ids=repr)
def test_grads_match_torch(case):
    rng = np.random.default_rng(1)
    for shapes in case.sample:
        arrays = [random_array(s, "float64", rng, case.low, case.high) for s in shapes]
        for layouts in _layouts(arrays, case):
            k_in = [_layout(kiln, a, "float64", l).requires_grad_() for a, l in zip(arrays, layouts)]
            t_in = [_layout(torch, a, "float64", l).requires_grad_() for a, l in zip(arrays, layouts)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, t_grads = _grads(torch, case.fn, t_in)
                _, k_grads = _grads(kiln, case.fn, k_in)
            for kg, tg in zip(k_grads, t_grads):
                if tg is None:
                    assert kg is None or not kg.abs().sum().item()
                else:
                    assert_same(kg, tg, 1e-6, 1e-6)


def test_registry_aliases_are_torchs_second_names():
    """Note [Op aliases] (tensor/dispatcher.h): each alias the registry declares is torch's, as a
    function and/or a Tensor method exactly where torch has one, and is the very op it names."""
    aliases = [(a, n, v) for a, n, v in kiln._C._op_aliases() if not a.startswith("special_")]
    assert len(aliases) >= 37 and ("greater_", "gt_", 2) in aliases and ("arccos", "acos", 3) in aliases
    for alias, name, variants in aliases:
        assert hasattr(torch, alias) == bool(variants & 1), alias
        assert hasattr(torch.Tensor, alias) == bool(variants & 2), alias
        if variants & 1:
            assert getattr(kiln, alias) is getattr(kiln, name)
        else:
            assert not hasattr(kiln, alias)
        if variants & 2:
            assert getattr(kiln.Tensor, alias) is getattr(kiln.Tensor, name)


# a representative program (one op of each kind, ~40 of the table's cases: inductor compiles the
# whole table in ~45 s): shapes that do not depend on values, so no graph break
_COMPILED_NAMES = {
    "arccos", "divide", "Tensor.squeeze_", "Tensor.unsqueeze_", "ravel", "fliplr", "nansum", "Tensor.mH", "deg2rad",
    "sinc", "float_power", "ldexp", "frexp", "logcumsumexp", "addmv", "addr", "addbmm", "Tensor.addmm_", "inner",
    "vdot", "cov", "corrcoef", "dist", "renorm", "Tensor.renorm_", "cholesky_solve", "cholesky_inverse",
    "take_along_dim", "index_copy", "index_fill", "masked_scatter", "put", "scatter_reduce_amax_True",
    "scatter_reduce_mean_False", "scatter_reduce_prod_True", "tensor_split", "hsplit", "kthvalue", "aminmax",
    "heaviside", "Tensor.sum_to_size",
}
COMPILED = [c for c in CASES if c.name in _COMPILED_NAMES and c.compile and "float32" in c.dtypes]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_matches_eager(backend):
    """Every float32 case on its first sample, in one compiled function: no graph break, and
    values and gradients equal eager kiln's."""
    rng = np.random.default_rng(2)
    arrays = [[random_array(s, "float32", rng, c.low, c.high) for s in c.sample[0]] for c in COMPILED]

    def run_all(*flat):
        outs, i = [], 0
        for case, arr in zip(COMPILED, arrays):
            outs.append(case.fn(kiln, *flat[i:i + len(arr)]))
            i += len(arr)
        return outs

    def inputs():
        return [to_kiln(a, "float32").requires_grad_(c.grad) for c, arr in zip(COMPILED, arrays) for a in arr]

    kiln._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        explained = kiln._dynamo.explain(run_all)(*inputs())
        assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
        kiln._dynamo.reset()
        compiled = kiln.compile(run_all, backend=backend)
        want, want_g = _grads(kiln, lambda lib, *xs: run_all(*xs), inputs())
        got, got_g = _grads(kiln, lambda lib, *xs: compiled(*xs), inputs())
    kiln._dynamo.reset()
    failures = []
    for case, g, w in zip(COMPILED, got, want):
        try:
            assert_same(_detach(g), _detach(w), 1e-5, 1e-5)
        except AssertionError as e:
            failures.append(f"{case.name}: {e}")
    names = [c.name for c, arr in zip(COMPILED, arrays) for _ in arr]
    for name, a, b in zip(names, got_g, want_g):
        try:
            assert (a is None) == (b is None)
            if a is not None:
                assert_same(a, b, 1e-5, 1e-5)
        except AssertionError as e:
            failures.append(f"{name} (gradient): {e}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name,call", [
    ("add_mm_", lambda lib, x: x.addmm_(lib.ones(3, 2, dtype=x.dtype), lib.ones(2, 4, dtype=x.dtype))),
    ("index_copy_", lambda lib, x: x.index_copy_(1, _idx(lib, [0]), lib.ones(3, 1, dtype=x.dtype))),
    ("index_fill_", lambda lib, x: x.index_fill_(0, _idx(lib, [1]), 2.0)),
    ("masked_scatter_", lambda lib, x: x.masked_scatter_(x > 0, lib.zeros(12, dtype=x.dtype))),
    ("put_", lambda lib, x: x.put_(_idx(lib, [3]), lib.ones(1, dtype=x.dtype))),
    ("scatter_reduce_", lambda lib, x: x.scatter_reduce_(0, _idx(lib, [[2]]), lib.ones(1, 1, dtype=x.dtype), "amax")),
    ("renorm_", lambda lib, x: x.renorm_(2, 0, 1.0)),
    ("arccos_", lambda lib, x: x.arccos_()),
    ("squeeze_", lambda lib, x: x.unsqueeze(0).squeeze_(0)),
    ("unsqueeze_", lambda lib, x: x.unsqueeze_(1)),
    ("swapdims_", lambda lib, x: x.swapdims_(0, 1)),
    ("sinc_", lambda lib, x: x.sinc_()),
    ("float_power_", lambda lib, x: x.double().float_power_(2)),
])
def test_in_place_returns_self_and_bumps_the_version(name, call):
    for lib in (kiln, torch):
        x = lib.linspace(-0.9, 0.9, 12, dtype=lib.float32).reshape(3, 4)
        target = x.double() if name == "float_power_" else x.unsqueeze(0) if name == "squeeze_" else x
        before = target._version
        got = call(lib, x) if name not in ("float_power_", "squeeze_") else _call_on(call, lib, target, name)
        assert got is target, f"{name} ({lib.__name__}) must return self"
        assert target._version > before, f"{name} ({lib.__name__}) must bump the version"
    kx = kiln.linspace(-0.9, 0.9, 12).reshape(3, 4)
    tx = torch.linspace(-0.9, 0.9, 12).reshape(3, 4)
    assert_same(_call_on(call, kiln, kx, name), _call_on(call, torch, tx, name), 1e-6, 1e-6)


def _call_on(call, lib, target, name):
    if name == "float_power_":
        return target.float_power_(2) if target.dtype == lib.float64 else call(lib, target)
    if name == "squeeze_":
        return target.squeeze_(0) if target.ndim == 3 else call(lib, target)
    return call(lib, target)


def test_metadata_answers_as_torch():
    for name in ("float32", "float64", "int64", "int8", "uint8", "bool"):
        k, t = to_kiln(np.zeros((2, 3)), name), to_torch(np.zeros((2, 3)), name)
        for attr in ("is_signed", "is_complex", "is_conj", "is_neg", "get_device"):
            assert getattr(k, attr)() == getattr(t, attr)(), (name, attr)
        assert k.nbytes == t.nbytes and k.is_cpu == t.is_cpu
        assert k.layout is kiln.strided
        assert k.resolve_conj() is k and k.resolve_neg() is k and k.conj() is k
        assert kiln.is_same_size(k, k[:1]) == torch.is_same_size(t, t[:1])
    assert kiln.tensor([2.0]).is_nonzero() and not kiln.tensor(0).is_nonzero()
    assert kiln.is_nonzero(kiln.tensor([[True]])) is True
    assert kiln.is_signed(kiln.ones(2)) and kiln.is_complex(kiln.ones(2)) is False
    x = kiln.ones(2, 3)
    assert x.new_empty_strided((2, 3), (1, 2)).stride() == (1, 2)
    assert x.new_empty_strided((2,), (1,), dtype=kiln.int64, requires_grad=False).dtype == kiln.int64


def test_named_results_print_as_torch():
    x = np.array([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
    for fn in (lambda lib, t: lib.kthvalue(t, 2), lambda lib, t: lib.aminmax(t, dim=0), lambda lib, t: lib.frexp(t)):
        got, want = fn(kiln, to_kiln(x, "float32")), fn(torch, to_torch(x, "float32"))
        assert repr(got).replace("kiln", "torch") == repr(want)
        assert type(got).__name__ == type(want).__name__ and got[0].tolist() == want[0].tolist()
    assert kiln.kthvalue(kiln.tensor([3.0, 1.0, 2.0]), 1).indices.item() == 1


def test_data_dependent_ops_break_the_graph():
    """argwhere, bincount, histc without a range and tensor_split by a tensor read values: a clean
    graph break, and the compiled results equal eager."""
    def fn(x, i):
        return (kiln.argwhere(x > 0) * 2, kiln.bincount(i) + 1, kiln.histc(x, 4) * 1,
                kiln.tensor_split(x, i[:2], 0)[1] + 1)

    x, i = kiln.tensor([[-1.0, 2.0], [3.0, -4.0], [0.5, 0.0]]), kiln.tensor([1, 2, 2, 0])
    kiln._dynamo.reset()
    assert kiln._dynamo.explain(fn)(x, i).graph_break_count >= 1
    kiln._dynamo.reset()
    got = kiln.compile(fn, backend="aot_eager")(x, i)
    kiln._dynamo.reset()
    for g, w in zip(got, fn(x, i)):
        assert g.tolist() == w.tolist()


def test_heaviside_has_no_derivative_as_torch():
    for lib in (kiln, torch):
        x = lib.tensor([-1.0, 0.0, 2.0], requires_grad=True)
        y = lib.heaviside(x, lib.tensor([0.5, 0.5, 0.5]))
        assert y.requires_grad and y.tolist() == [0.0, 0.5, 1.0]
        with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
            y.sum().backward()


ERRORS = [
    ("fliplr of 1-D", lambda lib, t: lib.fliplr(t["x"][0])),
    ("flipud of 0-D", lambda lib, t: lib.flipud(t["x"][0, 0])),
    ("adjoint of 1-D", lambda lib, t: t["x"][0].adjoint()),
    ("H of 3-D", lambda lib, t: t["x"].reshape(2, 3, 2).H),
    ("mH of 1-D", lambda lib, t: t["x"][0].mH),
    ("is_nonzero of many", lambda lib, t: t["x"].is_nonzero()),
    ("is_nonzero of none", lambda lib, t: t["x"][:0].is_nonzero()),
    ("sum_to_size not expandable", lambda lib, t: t["x"].sum_to_size(2)),
    ("true_divide rounding_mode", lambda lib, t: lib.true_divide(t["x"], 2, rounding_mode="floor")),
    ("deg2rad_ of int", lambda lib, t: t["i"].deg2rad_()),
    ("float_power_ of float32", lambda lib, t: t["x"].float_power_(2)),
    ("gcd of float", lambda lib, t: lib.gcd(t["x"], t["x"])),
    ("lcm of bool", lambda lib, t: lib.lcm(t["i"] > 0, t["i"] > 0)),
    ("heaviside dtypes", lambda lib, t: lib.heaviside(t["x"], t["x"].double())),
    ("frexp of int", lambda lib, t: lib.frexp(t["i"])),
    ("logcumsumexp of int", lambda lib, t: lib.logcumsumexp(t["i"], 0)),
    ("addmv shapes", lambda lib, t: lib.addmv(t["x"], t["x"], t["x"][0])),
    ("addmv vector size", lambda lib, t: lib.addmv(t["x"][0, :3], t["x"], t["x"][:, 0])),
    ("addr of 2-D", lambda lib, t: lib.addr(t["x"], t["x"], t["x"][0])),
    ("addbmm of 2-D", lambda lib, t: lib.addbmm(t["x"], t["x"], t["x"])),
    ("inner last dims", lambda lib, t: lib.inner(t["x"], t["x"].t())),
    ("vdot of 2-D", lambda lib, t: lib.vdot(t["x"], t["x"])),
    ("vdot dtypes", lambda lib, t: lib.vdot(t["x"][0], t["x"][0].double())),
    ("vdot sizes", lambda lib, t: lib.vdot(t["x"][0], t["x"][0, :2])),
    ("cov of 3-D", lambda lib, t: lib.cov(t["x"].reshape(2, 2, 3))),
    ("cov float fweights", lambda lib, t: lib.cov(t["x"], fweights=t["x"][0, :4])),
    ("cov negative fweights", lambda lib, t: lib.cov(t["x"], fweights=-t["i"][0, :4])),
    ("cov aweights numel", lambda lib, t: lib.cov(t["x"], aweights=t["x"][0, :2])),
    ("renorm of 1-D", lambda lib, t: lib.renorm(t["x"][0], 2, 0, 1.0)),
    ("renorm negative p", lambda lib, t: lib.renorm(t["x"], -1, 0, 1.0)),
    ("renorm of int", lambda lib, t: lib.renorm(t["i"], 2, 0, 1.0)),
    ("cholesky_solve of 1-D", lambda lib, t: lib.cholesky_solve(t["x"][0], t["x"])),
    ("cholesky_solve not square", lambda lib, t: lib.cholesky_solve(t["x"], t["x"])),
    ("cholesky_inverse not square", lambda lib, t: lib.cholesky_inverse(t["x"])),
    ("take_along_dim int32 index", lambda lib, t: lib.take_along_dim(t["x"], t["i"].int(), 0)),
    ("take_along_dim ndim", lambda lib, t: lib.take_along_dim(t["x"], t["i"][0].abs() % 3, 0)),
    ("index_copy int32 index", lambda lib, t: t["x"].index_copy(0, _idx(lib, [0]).int(), t["x"][:1])),
    ("index_copy dtypes", lambda lib, t: t["x"].index_copy(0, _idx(lib, [0]), t["x"][:1].double())),
    ("index_fill 1-D value", lambda lib, t: t["x"].index_fill(0, _idx(lib, [0]), t["x"][0])),
    ("index_fill out of range", lambda lib, t: t["x"].index_fill(0, _idx(lib, [3]), 1.0)),
    ("masked_scatter float mask", lambda lib, t: t["x"].masked_scatter(t["x"], t["x"])),
    ("masked_scatter dtypes", lambda lib, t: t["x"].masked_scatter(t["x"] > 0, t["x"].double())),
    ("masked_scatter short source", lambda lib, t: t["x"].masked_scatter(t["x"] > -10, t["x"][0])),
    ("put numel", lambda lib, t: t["x"].put(_idx(lib, [0, 1]), t["x"][0, :3])),
    ("put dtypes", lambda lib, t: t["x"].put(_idx(lib, [0]), t["x"][0, :1].double())),
    ("scatter_reduce reduce", lambda lib, t: t["x"].scatter_reduce(0, _idx(lib, [[0]]), t["x"], "foo")),
    ("index_copy count", lambda lib, t: t["x"].index_copy(0, _idx(lib, [0, 1]), t["x"][:1])),
    ("index_fill int32 index", lambda lib, t: t["x"].index_fill(0, _idx(lib, [0]).int(), 1.0)),
    ("put int32 index", lambda lib, t: t["x"].put(_idx(lib, [0]).int(), t["x"][0, :1])),
    ("scatter_reduce dtypes", lambda lib, t: t["x"].scatter_reduce(0, _idx(lib, [[0]]), t["x"].double(), "sum")),
    ("tensor_split of 0-D", lambda lib, t: lib.tensor_split(t["x"][0, 0], 2)),
    ("tensor_split 0 sections", lambda lib, t: lib.tensor_split(t["x"], 0)),
    ("hsplit not divisible", lambda lib, t: lib.hsplit(t["x"], 3)),
    ("vsplit of 1-D", lambda lib, t: lib.vsplit(t["x"][0], 2)),
    ("dsplit of 2-D", lambda lib, t: lib.dsplit(t["x"], 2)),
    ("histc of int", lambda lib, t: lib.histc(t["i"])),
    ("histc bins", lambda lib, t: lib.histc(t["x"], 0)),
    ("histc min > max", lambda lib, t: lib.histc(t["x"], 4, 1, 0)),
    ("bincount negative", lambda lib, t: lib.bincount(t["i"][0])),
    ("bincount of 2-D", lambda lib, t: lib.bincount(t["i"].abs())),
    ("bincount of float", lambda lib, t: lib.bincount(t["x"][0])),
    ("bincount minlength", lambda lib, t: lib.bincount(t["i"][0].abs(), minlength=-1)),
    ("bincount weights", lambda lib, t: lib.bincount(t["i"][0].abs(), t["x"][0, :2])),
    ("kthvalue k", lambda lib, t: lib.kthvalue(t["x"], 5, 1)),
    ("kthvalue dim", lambda lib, t: lib.kthvalue(t["x"], 1, 2)),
    ("aminmax of empty", lambda lib, t: lib.aminmax(t["x"][:0])),
    ("aminmax of empty dim", lambda lib, t: lib.aminmax(t["x"][:0], dim=0)),
    ("unsqueeze_ dim", lambda lib, t: t["x"].unsqueeze_(3)),
    ("leaf squeeze_", lambda lib, t: t["x"].requires_grad_().squeeze_()),
]


@pytest.mark.parametrize("desc,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_input_raises_like_torch(desc, call):
    def inputs(lib):
        return {"x": lib.linspace(-2, 2, 12).reshape(3, 4), "i": lib.tensor([[-1, 2, 3, 0], [1, 1, 0, 2]])}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_raises_like_torch(desc, call, inputs)
