"""The sample inputs of tests/test_decomp.py: op -> a generator of (args, kwargs) over shapes,
dtypes, non-contiguous layouts and special values (CASES), and the helpers that make them."""

import itertools
import math

import numpy as np

import kiln

aten = kiln.ops.aten
F32, F64, I64, I32, U8, BOOL = kiln.float32, kiln.float64, kiln.int64, kiln.int32, kiln.uint8, kiln.bool
FLOATS = [F32, F64]
PW = FLOATS + [kiln.float16, kiln.bfloat16]  # pointwise ops: every float dtype
SHAPES = [(), (5,), (3, 4), (2, 3, 4)]


# --- inputs ----------------------------------------------------------------------------------

_rng = np.random.default_rng(0)


def make(shape, dtype=F32, low=-3.0, high=3.0, nc=False):
    """Random tensor; nc=True gives a non-contiguous one (every other element of a wider buffer)."""
    full = tuple(shape) + ((2,) if nc else ())
    if dtype == BOOL:
        data = _rng.random(full) > 0.5
    elif dtype.is_floating_point:
        data = _rng.uniform(low, high, size=full)
    else:
        lo = 0 if dtype == U8 else int(low) * 3
        data = _rng.integers(lo, int(high) * 3 + 1, size=full)
    if data.size == 0:  # tolist() drops the shape of empty data
        t = kiln.zeros(full, dtype=dtype)
    else:
        t = kiln.tensor(data.tolist() if data.ndim else data.item(), dtype=dtype)
    return t[..., 0] if nc else t


class NoGrad(tuple):
    """Sample arguments whose gradient is not compared (a point where the op is not differentiable)."""


def variants(shapes=SHAPES, dtypes=FLOATS, **kw):
    """(shape, dtype, nc) over shapes x dtypes, non-contiguous for shapes with elements."""
    for dtype in dtypes:
        for shape in shapes:
            yield shape, dtype, False
            if len(shape) > 0:
                yield shape, dtype, True


def unary(dtypes=PW, low=-3.0, high=3.0, extra=()):
    def gen():
        for shape, dtype, nc in variants(dtypes=dtypes):
            yield (make(shape, dtype, low, high, nc),), {}
        for x in extra:  # special values (NaN, infinities, signed zeros): values only
            yield NoGrad((kiln.tensor(x),)), {}
    return gen


BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,)), ((0, 3), (3,))]


def binary(dtypes=PW, low=-3.0, high=3.0, rhs_low=None, rhs_high=None, extra=()):
    def gen():
        for dtype in dtypes:
            for sa, sb in BINARY_SHAPES:
                for nc in (False, True):
                    yield (make(sa, dtype, low, high, nc and sa != ()),
                           make(sb, dtype, rhs_low if rhs_low is not None else low,
                                rhs_high if rhs_high is not None else high, nc)), {}
        for a, b in extra:  # special values and ties: values only
            yield NoGrad((kiln.tensor(a), kiln.tensor(b))), {}
    return gen


SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -2.5]


# --- the table: op -> sample generator -----------------------------------------------------------

def _pointwise_cases():
    c = {}
    c[aten.fmax.default] = binary(extra=[(SPECIAL, SPECIAL[::-1])])
    c[aten.fmin.default] = binary(extra=[(SPECIAL, SPECIAL[::-1])])
    c[aten.hypot.default] = binary()
    c[aten.copysign.Tensor] = binary(dtypes=PW + [I64], extra=[(SPECIAL, SPECIAL[::-1])])
    c[aten.copysign.Scalar] = lambda: (((make(s, d, nc=nc), v), {}) for (s, d, nc), v in
                                       zip(variants(dtypes=PW + [I64]), [-1.0, 2, -0.0, 0.5] * 20))
    c[aten.floor_divide.default] = binary(dtypes=PW + [I64], rhs_low=1, rhs_high=4)
    c[aten.floor_divide.Scalar] = lambda: ((((make(s, d, nc=nc)), 2.5), {}) for s, d, nc in
                                          variants(dtypes=PW + [I64]))
    c[aten.xlogy.Tensor] = binary(dtypes=PW + [I64], rhs_low=0.0, rhs_high=3.0,
                                 extra=[([0.0, 0.0, 1.0, 2.0], [0.0, float("nan"), 0.0, 3.0])])
    c[aten.xlogy.Scalar_Other] = lambda: (((make(s, d, 0.0, 3.0, nc), v), {}) for (s, d, nc), v in
                                          zip(variants(dtypes=PW + [I64]), [2.0, 0.5, 3, -1.0] * 20))
    c[aten.xlogy.Scalar_Self] = lambda: (((v, make(s, d, 0.0, 3.0, nc)), {}) for (s, d, nc), v in
                                         zip(variants(dtypes=PW + [I64]), [2.0, 0.0, 3, -1.5] * 20))
    c[aten.remainder.Scalar_Tensor] = lambda: (((v, make(s, d, 1, 4, nc)), {}) for (s, d, nc), v in
                                               zip(variants(dtypes=PW + [I64]), [2.5, 7, -3, 0.75] * 20))
    for op in (aten.bitwise_left_shift.Tensor_Scalar, aten.__lshift__.Scalar):
        c[op] = lambda: (((make(s, d, 0, 10, nc), 3), {}) for s, d, nc in variants(dtypes=[I64, I32, U8]))
    for op in (aten.bitwise_right_shift.Tensor_Scalar, aten.__rshift__.Scalar):
        c[op] = lambda: (((make(s, d, -10, 10, nc), 2), {}) for s, d, nc in variants(dtypes=[I64, I32, U8]))
    c[aten.bitwise_left_shift.Scalar_Tensor] = lambda: (((5, make(s, d, 0, 6, nc)), {}) for s, d, nc in
                                                        variants(dtypes=[I64, I32, U8]))
    c[aten.bitwise_right_shift.Scalar_Tensor] = lambda: (((-100, make(s, d, 0, 6, nc)), {}) for s, d, nc in
                                                         variants(dtypes=[I64, I32, U8]))
    c[aten.__lshift__.Tensor] = lambda: (((make(s, d, 0, 10, nc), make(s, d, 0, 5, nc)), {}) for s, d, nc in
                                         variants(dtypes=[I64, I32, U8]))
    c[aten.__rshift__.Tensor] = lambda: (((make(s, d, -10, 10, nc), make(s, d, 0, 5, nc)), {}) for s, d, nc in
                                         variants(dtypes=[I64, I32, U8]))
    c[aten.rsub.Tensor] = lambda: ((a, {"alpha": al}) for (a, _), al in zip(binary(PW + [I64])(), [1, 2] * 40))
    c[aten.rsub.Scalar] = lambda: (((make(s, d, nc=nc), 1.5, al), {}) for (s, d, nc), al in
                                   zip(variants(dtypes=PW + [I64]), [1, 2, 3] * 20))
    c[aten.max.other] = binary(dtypes=PW + [I64])
    c[aten.min.other] = binary(dtypes=PW + [I64])
    c[aten.clamp_min.default] = lambda: (((make(s, d, nc=nc), 0.5), {}) for s, d, nc in variants(dtypes=PW + [I64]))
    c[aten.clamp_max.default] = lambda: (((make(s, d, nc=nc), -0.5), {}) for s, d, nc in variants(dtypes=PW + [I64]))
    c[aten.clamp_min.Tensor] = binary(dtypes=PW + [I64], extra=[(SPECIAL, SPECIAL[::-1])])
    c[aten.clamp_max.Tensor] = binary(dtypes=PW + [I64], extra=[(SPECIAL, SPECIAL[::-1])])
    c[aten.lerp.Scalar] = lambda: (((a, b, w), {}) for ((a, b), _), w in zip(binary()(), [0.25, 0.75, -1.5, 2.0] * 10))
    c[aten.lerp.Tensor] = lambda: (((a, b, make(b.shape, a.dtype, 0, 1)), {}) for (a, b), _ in binary()())
    c[aten.addcmul.default] = lambda: (((a, b, make(b.shape, b.dtype, nc=True)), {"value": v}) for ((a, b), _), v in
                                       zip(binary(PW + [I64])(), [1, 2, -3] * 20))
    c[aten.addcdiv.default] = lambda: (((a, b, make(b.shape, a.dtype, 1, 3)), {"value": v}) for ((a, b), _), v in
                                       zip(binary()(), [1, 0.5, -3] * 20))
    c[aten.masked_fill.Scalar] = lambda: (((make(s, d, nc=nc), make(s, BOOL), 7), {}) for s, d, nc in
                                          variants(dtypes=PW + [I64, BOOL]))
    c[aten.masked_fill.Tensor] = lambda: (((make(s, d, nc=nc), make(s[-1:], BOOL), make((), d)), {}) for s, d, nc in
                                          variants(dtypes=PW + [I64]))
    c[aten.where.ScalarOther] = lambda: (((make(s, BOOL), make(s, d, nc=nc), 2.5), {}) for s, d, nc in
                                         variants(dtypes=PW + [I64]))
    c[aten.where.ScalarSelf] = lambda: (((make(s, BOOL), -1, make(s, d, nc=nc)), {}) for s, d, nc in
                                        variants(dtypes=PW + [I64, BOOL]))
    c[aten.where.Scalar] = lambda: (((make(s, BOOL, nc=nc), a, b), {}) for (s, _, nc), (a, b) in
                                    zip(variants(dtypes=[BOOL]), [(1, 2), (1.5, 2), (True, False), (3, 0.5)] * 5))
    c[aten.exp2.default] = unary(PW + [I64])
    c[aten.silu.default] = unary()
    c[aten.mish.default] = unary(low=-30, high=30)
    c[aten.frac.default] = unary()
    # ties at every decimals (2.5, 0.125, 1250 and 35 round to even), big and tiny values
    c[aten.round.decimals] = lambda: itertools.chain(
        (((make(s, d, low=-300, high=300, nc=nc),), {"decimals": k}) for (s, d, nc), k in
         zip(variants(dtypes=PW), [0, 1, 2, -1, -2, 3] * 8)),
        ((NoGrad((kiln.tensor([2.5, -0.125, 1250.0, 35.0, 1e-30, 3e30, 0.0, -0.0], dtype=d),)), {"decimals": k})
         for d in PW for k in (0, 2, -1, -2, 1, 3)))
    c[aten.square.default] = unary(PW + [I64, BOOL])
    c[aten.isfinite.default] = unary(PW + [I64, BOOL], extra=[SPECIAL])
    c[aten.absolute.default] = unary(PW + [I64])
    c[aten.negative.default] = unary(PW + [I64])
    c[aten.positive.default] = unary(PW + [I64])
    c[aten.relu6.default] = unary(low=-8, high=8)
    c[aten.softplus.default] = lambda: ((a, kw) for (a, _), kw in zip(unary(low=-30, high=30)(),
                                        [{}, {"beta": 2, "threshold": 5}, {"beta": 0.5}] * 20))
    c[aten.threshold.default] = lambda: (((make(s, d, nc=nc), 0.5, -2), {}) for s, d, nc in
                                         variants(dtypes=PW + [I64]))
    c[aten.hardsigmoid.default] = unary(low=-5, high=5)
    c[aten.hardswish.default] = unary(low=-5, high=5)
    c[aten.logit.default] = lambda: itertools_chain(
        ((a, kw) for (a, _), kw in zip(unary(low=0.02, high=0.98)(), [{}, {"eps": 0.1}, {"eps": 1e-6}] * 20)),
        # outside (0, 1) logit is NaN (no eps) or clamped: values only
        ((NoGrad((kiln.tensor([-0.2, 0.0, 0.05, 0.5, 1.0, 1.2], dtype=d),)), kw) for d in FLOATS
         for kw in [{}, {"eps": 0.1}]))
    c[aten.nan_to_num.default] = lambda: itertools_chain(
        ((((kiln.tensor(SPECIAL, dtype=d)),), kw) for d in PW + [kiln.float16] for kw in
         [{}, {"nan": 1.5, "posinf": 9.0}, {"neginf": -7.0}]),
        (((make((3, 4), I64),), {}),))
    c[aten.softmax.int] = lambda: (((make(s, d, nc=nc), -1), kw) for (s, d, nc), kw in
                                   zip(variants(), [{}, {"dtype": F64}] * 20))
    c[aten.log_softmax.int] = lambda: (((make(s, d, nc=nc), 0), kw) for (s, d, nc), kw in
                                       zip(variants(), [{}, {"dtype": F64}] * 20))
    return c


def itertools_chain(*its):
    for it in its:
        yield from it


def _backward_cases():
    c = {}

    def gx(low=-3.0, high=3.0, extra_args=(), dtypes=PW):
        def gen():
            for shape, dtype, nc in variants(dtypes=dtypes):
                yield (make(shape, dtype, nc=nc), make(shape, dtype, low, high, not nc)) + tuple(extra_args), {}
        return gen
    c[aten.threshold_backward.default] = gx(extra_args=(0.5,), dtypes=PW + [I64])
    c[aten.gelu_backward.default] = lambda: itertools_chain(gx()(), ((a, {"approximate": "tanh"}) for a, _ in gx()()))
    c[aten.sigmoid_backward.default] = gx(0, 1)
    c[aten.tanh_backward.default] = gx(-1, 1)
    c[aten.silu_backward.default] = gx()
    c[aten.leaky_relu_backward.default] = gx(extra_args=(0.1, False))
    c[aten.hardtanh_backward.default] = gx(extra_args=(-1.0, 1.0))
    c[aten.elu_backward.default] = lambda: itertools_chain(
        (((g, 1.0, 1.0, 1.0, False, x), {}) for (g, x), _ in gx()()),
        (((g, 1.5, 1.05, 2.0, False, x), {}) for (g, x), _ in gx()()),
        (((g, 1.5, 1.05, 2.0, True, x), {}) for (g, x), _ in gx(-1.5, 3)()))
    c[aten.softplus_backward.default] = lambda: itertools_chain(gx(extra_args=(1.0, 20.0))(),
                                                                gx(extra_args=(2.0, 3.0))())
    c[aten.hardsigmoid_backward.default] = gx(-5, 5)
    c[aten.hardswish_backward.default] = gx(-5, 5)
    c[aten.mish_backward.default] = gx(-20, 20)
    c[aten.logit_backward.default] = lambda: itertools_chain(
        gx(-0.2, 1.2)(), ((a, {"eps": 0.1}) for a, _ in gx(-0.2, 1.2)()))
    c[aten._softmax_backward_data.default] = lambda: (
        ((make(s, d, nc=nc), aten._softmax.default(make(s, d), -1, False), -1, d), {})
        for s, d, nc in variants())
    c[aten._log_softmax_backward_data.default] = lambda: (
        ((make(s, d, nc=nc), aten._log_softmax.default(make(s, d), 0, False), 0, d), {})
        for s, d, nc in variants())
    return c


def _reduction_cases():
    c = {}
    all_dtypes = FLOATS + [I64, BOOL]
    c[aten.sum.default] = lambda: itertools_chain(((a, {}) for a, _ in unary(FLOATS + [I64, BOOL])()),
                                                  (((make((3, 4), I32),), {"dtype": F64}),))
    c[aten.max.default] = unary(FLOATS + [I64, BOOL], extra=[SPECIAL])
    c[aten.min.default] = unary(FLOATS + [I64, BOOL], extra=[SPECIAL])
    c[aten.all.default] = lambda: (((make(s, d, 0, 2, nc),), {}) for s, d, nc in variants(dtypes=all_dtypes + [U8]))
    c[aten.all.dim] = lambda: (((make(s, d, 0, 2, nc), -1, k), {}) for (s, d, nc), k in
                               zip(variants(shapes=SHAPES[1:], dtypes=all_dtypes + [U8]), [True, False] * 30))
    c[aten.all.dims] = lambda: (((make(s, d, 0, 2, nc), dims, k), {}) for (s, d, nc), (dims, k) in
                                zip(variants(shapes=SHAPES[2:], dtypes=all_dtypes),
                                    [([0, 1], False), (None, True), ([1], True)] * 30))
    c[aten.count_nonzero.dim_IntList] = lambda: (((make(s, d, -1, 1, nc), dims), {}) for (s, d, nc), dims in
                                                 zip(variants(shapes=SHAPES[2:], dtypes=all_dtypes), [[0], [0, 1], []] * 20))
    c[aten.count_nonzero.default] = lambda: (((make(s, d, -1, 1, nc),), {"dim": dim}) for (s, d, nc), dim in
                                             zip(variants(shapes=SHAPES[1:], dtypes=all_dtypes), [None, 0, -1] * 20))

    def stat(extra_args_list, shapes=((5,), (3, 4), (2, 3, 4))):
        def gen():
            for (s, d, nc), extra in zip(variants(shapes=shapes), extra_args_list * 10):
                args, kw = extra
                yield (make(s, d, nc=nc),) + args, kw
        return gen
    c[aten.var.default] = stat([((), {}), ((False,), {})])
    c[aten.std.default] = stat([((), {}), ((False,), {})])
    c[aten.std.dim] = stat([(([0], True, False), {}), (([-1], False, True), {})])
    c[aten.std.correction] = stat([((None,), {"correction": 2}), (([0],), {"keepdim": True}), ((), {})])
    c[aten.var_mean.default] = stat([((), {}), ((False,), {})])
    c[aten.var_mean.dim] = stat([(([0], True, False), {}), (([-1], False, True), {})])
    c[aten.var_mean.correction] = stat([((None,), {"correction": 0}), (([0],), {"keepdim": True})])
    c[aten.std_mean.default] = stat([((), {}), ((False,), {})])
    c[aten.std_mean.dim] = stat([(([0], True, False), {}), (([-1], False, True), {})])
    c[aten.std_mean.correction] = stat([((None,), {"correction": 0}), (([0],), {"keepdim": True})])
    c[aten.logsumexp.default] = lambda: itertools_chain(
        (((make(s, d, -50, 50, nc), [0], k), {}) for (s, d, nc), k in zip(variants(shapes=SHAPES[1:]), [True, False] * 20)),
        (((kiln.tensor([[-math.inf, -math.inf], [math.inf, 1.0]]), [1]), {}),),
        (((make((3, 4), I64), [1]), {}),))
    norm_args = [((2,), {}), ((1, [1]), {}), ((math.inf, None, True), {}), ((-math.inf, [0]), {}),
                 ((0,), {}), ((3.5, [0, 1]), {}), ((2, None), {"dtype": F64})]
    c[aten.linalg_vector_norm.default] = stat(norm_args, shapes=((3, 4), (2, 3, 4)))
    c[aten.norm.ScalarOpt_dtype] = stat([((2,), {"dtype": F64}), ((None,), {"dtype": F64})])
    c[aten.norm.Scalar] = stat([((), {}), ((1,), {}), ((3,), {})])
    c[aten.norm.ScalarOpt_dim_dtype] = stat([((2, [0], True), {"dtype": F64})])
    c[aten.norm.ScalarOpt_dim] = stat([((2, [0]), {}), ((1, [-1], True), {}), ((None, [0]), {})])
    c[aten.cumprod.default] = lambda: itertools_chain(
        (((make(s, d, -2, 2, nc), -1), {}) for s, d, nc in variants(shapes=SHAPES[1:], dtypes=FLOATS + [I64, I32, BOOL])),
        (((make((3, 4), F32), 0), {"dtype": F64}),),
        (((kiln.tensor([2.0, 0.0, 3.0, -1.0]), 0), {}),))
    return c


def _nn_cases():
    c = {}
    c[aten.dot.default] = lambda: (((make((7,), d, nc=nc), make((7,), d)), {}) for d in FLOATS + [I64]
                                   for nc in (False, True))
    c[aten.mv.default] = lambda: (((make((3, 5), d, nc=nc), make((5,), d)), {}) for d in FLOATS for nc in (False, True))
    c[aten.baddbmm.default] = lambda: (((make(sh, d), make((2, 3, 4), d, nc=True), make((2, 4, 5), d)), kw)
                                       for d in FLOATS for sh in [(2, 3, 5), (5,)]
                                       for kw in [{}, {"beta": 0.5, "alpha": 2}, {"beta": 0}])
    c[aten.matmul.default] = lambda: (((make(a, d, nc=nc), make(b, d)), {}) for d in FLOATS for nc in (False, True)
                                      for a, b in [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)),
                                                   ((2, 3, 4), (4, 5)), ((2, 3, 4), (4,)), ((4,), (2, 4, 5)),
                                                   ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5))])
    c[aten.linear.default] = lambda: (((make(x, d, nc=nc), make((5, 4), d), b), {}) for d in FLOATS
                                      for nc in (False, True) for x in [(4,), (3, 4), (2, 3, 4), (2, 2, 3, 4)]
                                      for b in [None, make((5,), d)])
    c[aten._addmm_activation.default] = lambda: (((make(sh, d), make((3, 4), d, nc=True), make((4, 5), d)), kw)
                                                 for d in FLOATS for sh in [(3, 5), (5,)]
                                                 for kw in [{}, {"use_gelu": True}, {"beta": 0.5, "alpha": 2}])
    c[aten.conv2d.default] = lambda: (((make(x, d, nc=nc), make((6, 3 // g, 3, 3), d), b) + args, {})
                                      for d in FLOATS for nc in (False, True) for x in [(2, 3, 7, 6), (3, 5, 5)]
                                      for b in [None, make((6,), d)]
                                      for args, g in [((), 1), (([2, 1], 1), 1), ((1, [1, 2], 2), 1),
                                                      ((1, 1, 1, 3), 3)] if x[-3] % g == 0)
    c[aten.max_pool2d.default] = lambda: (((make((2, 3, 7, 6), d, nc=nc), [3, 2]) + args, {}) for d in FLOATS
                                          for nc in (False, True)
                                          for args in [(), ([2, 2], [1, 1]), ([1, 2], 0, [1, 2], True)])
    c[aten.adaptive_avg_pool2d.default] = lambda: (((make((2, 3, 7, 6), d, nc=nc), sz), {}) for d in FLOATS
                                                   for nc in (False, True) for sz in [[3, 3], [1, 1], [7, 6]])

    def bn_gen():
        for d in FLOATS:
            for shape in [(4, 3), (2, 3, 5), (2, 3, 4, 4)]:
                for training in (True, False):
                    w, b = make((3,), d), make((3,), d)
                    rm, rv = make((3,), d), make((3,), d, 0.5, 2)
                    yield (make(shape, d, nc=True), w, b, rm, rv, training, 0.1, 1e-5), {}
                yield (make(shape, d), None, None, None, None, True, 0.1, 1e-5), {}
    c[aten.native_batch_norm.default] = bn_gen
    c[aten._native_batch_norm_legit_functional.default] = lambda: (a for a in bn_gen() if a[0][3] is not None)
    c[aten.batch_norm.default] = lambda: ((a + (False,), kw) for a, kw in bn_gen())
    c[aten.layer_norm.default] = lambda: (((make((2, 3, 4), d, nc=nc), ns, w, b), {"eps": 1e-3}) for d in FLOATS
                                          for nc in (False, True) for ns, w, b in
                                          [([4], make((4,), d), make((4,), d)), ([3, 4], None, None)])
    c[aten.group_norm.default] = lambda: (((make((2, 6, 3, 2), d, nc=nc), g, w, b), {}) for d in FLOATS
                                          for nc in (False, True) for g, w, b in
                                          [(3, make((6,), d), make((6,), d)), (2, None, None)])

    def bnb_gen():
        for d in FLOATS:
            for shape in [(4, 3), (2, 3, 4, 4)]:
                x = make(shape, d)
                w, rm, rv = make((3,), d), make((3,), d), make((3,), d, 0.5, 2)
                _, sm, si = aten.native_batch_norm.default(x, w, None, None, None, True, 0.1, 1e-5)
                for train in (True, False):
                    for mask in ([True, True, True], [True, False, False], [False, True, True]):
                        yield (make(shape, d, nc=True), x, w, rm, rv, sm, si, train, 1e-5, mask), {}
                yield (make(shape, d), x, None, rm, rv, sm, si, True, 1e-5, [True, False, True]), {}
    c[aten.native_batch_norm_backward.default] = bnb_gen
    c[aten.dropout.default] = lambda: (((make((4, 5), d, nc=nc), p, t), {}) for d in FLOATS for nc in (False, True)
                                       for p, t in [(0.3, True), (0.3, False), (0.0, True), (1.0, True)])
    c[aten.native_dropout_backward.default] = lambda: (((make((4, 5), d, nc=nc), make((4, 5), BOOL), s), {})
                                                       for d in FLOATS for nc in (False, True) for s in [1.0, 1.25])

    def loss(low=-2.0, high=2.0, tlow=-2.0, thigh=2.0, extra=((), ())):
        def gen():
            for d in FLOATS:
                for shape in [(5,), (3, 4), (2, 3, 4)]:
                    for r in (0, 1, 2):
                        for e in extra:
                            yield (make(shape, d, low, high, nc=True), make(shape, d, tlow, thigh), r) + e, {}
        return gen
    c[aten.mse_loss.default] = loss()
    c[aten.l1_loss.default] = loss()
    c[aten.smooth_l1_loss.default] = loss(extra=((1.0,), (0.5,), (0.0,)))
    c[aten.huber_loss.default] = loss(extra=((1.0,), (0.5,)))

    def loss_bw(extra=((),), low=-2.0, high=2.0, tlow=-2.0, thigh=2.0):
        def gen():
            for args, _ in loss(low, high, tlow, thigh, extra)():
                x, t, r, e = args[0], args[1], args[2], args[3:]
                g = make(x.shape if r == 0 else (), x.dtype)
                yield (g, x, t, r) + e, {}
        return gen
    c[aten.mse_loss_backward.default] = loss_bw()
    c[aten.smooth_l1_loss_backward.default] = loss_bw(extra=((1.0,), (0.5,), (0.0,)))
    c[aten.huber_loss_backward.default] = loss_bw(extra=((1.0,), (0.5,)))

    def bce(logits):
        def gen():
            for d in FLOATS:
                for shape in [(5,), (3, 4)]:
                    for r in (0, 1, 2):
                        for w in (None, make(shape[-1:], d, 0.5, 2)):
                            x = make(shape, d, -3, 3, nc=True) if logits else make(shape, d, 0.02, 0.98, nc=True)
                            args = (x, make(shape, d, 0, 1), w)
                            if logits:
                                args += (make(shape[-1:], d, 0.5, 2) if r == 1 else None,)
                            yield args + (r,), {}
            # Saturated inputs (the -100 clamp; x = 0 where |x| has its kink): values only.
            yield NoGrad((kiln.tensor([0.0, 1.0, 0.5, 1.0]), kiln.tensor([1.0, 0.0, 0.5, 1.0])) +
                         ((None,) if not logits else (None, None)) + (0,)), {}
        return gen
    c[aten.binary_cross_entropy.default] = bce(False)
    c[aten.binary_cross_entropy_with_logits.default] = bce(True)

    def bce_bw():
        for (x, t, w, r), _ in bce(False)():
            yield (make(x.shape if r == 0 else (), x.dtype), x, t, w, r), {}
    c[aten.binary_cross_entropy_backward.default] = bce_bw

    def nll_inputs(two_d):
        for d in FLOATS:
            shapes = [((4, 5), (4,)), ((5,), ())] if not two_d else [((2, 5, 3, 2), (2, 3, 2))]
            for xs, ts in shapes:
                for r in (0, 1, 2):
                    for w in (None, make((5,), d, 0.5, 2)):
                        for ii in (-100, 2):
                            t = make(ts, I64, 0, 1.67) if ts else kiln.tensor(3)
                            yield make(xs, d, nc=True), t, w, r, ii
    c[aten.nll_loss_forward.default] = lambda: ((a, {}) for a in nll_inputs(False))
    c[aten.nll_loss2d_forward.default] = lambda: ((a, {}) for a in nll_inputs(True))
    c[aten.nll_loss.default] = lambda: ((a, {}) for a in nll_inputs(False))
    c[aten.nll_loss2d.default] = lambda: ((a, {}) for a in nll_inputs(True))
    c[aten.nll_loss_nd.default] = lambda: itertools_chain(((a, {}) for a in nll_inputs(False)),
                                                          ((a, {}) for a in nll_inputs(True)))

    def nll_bw(two_d):
        op = aten.nll_loss2d_forward.default if two_d else aten.nll_loss_forward.default
        for x, t, w, r, ii in nll_inputs(two_d):
            out, total = op(x, t, w, r, ii)
            yield (make(out.shape, x.dtype), x, t, w, r, ii, total), {}
    c[aten.nll_loss_backward.default] = lambda: nll_bw(False)
    c[aten.nll_loss2d_backward.default] = lambda: nll_bw(True)

    def ce_gen():
        for d in FLOATS:
            for xs, ts in [((4, 5), (4,)), ((5,), ()), ((2, 5, 3), (2, 3))]:
                for r in (0, 1, 2):
                    for w in (None, make((5,), d, 0.5, 2)):
                        for ls in (0.0, 0.2):
                            t = make(ts, I64, 0, 1.67) if ts else kiln.tensor(3)
                            yield (make(xs, d, nc=True), t, w, r, 1, ls), {}
                            probs = aten._softmax.default(make(xs, d), 1 if len(xs) > 1 else 0, False)
                            yield (make(xs, d), probs, w, r, -100, ls), {}
    c[aten.cross_entropy_loss.default] = ce_gen
    return c


def _shape_cases():
    c = {}
    fkw = [{}, {"dtype": I64}, {"dtype": F64}]
    c[aten.zeros.default] = lambda: (((s,), kw) for s in [[], [3, 4], [0, 2]] for kw in fkw)
    c[aten.ones.default] = lambda: (((s,), kw) for s in [[], [3, 4], [0, 2]] for kw in fkw)
    like_kw = [{}, {"dtype": I64}, {"memory_format": kiln.contiguous_format}, {"memory_format": kiln.preserve_format}]
    c[aten.empty_like.default] = lambda: (((make(s, d, nc=nc).transpose(0, -1) if s else make(s, d),), kw)
                                          for s, d, nc in variants(dtypes=[F32, I64]) for kw in like_kw)
    c[aten.zeros_like.default] = c[aten.empty_like.default]
    c[aten.ones_like.default] = c[aten.empty_like.default]
    new_kw = [{}, {"dtype": I64}, {"dtype": F64, "device": "cpu"}]
    c[aten.new_empty.default] = lambda: (((make([2, 3], d), s), kw) for s in [[], [3, 4], [0, 2]]
                                         for d in (F32, I64) for kw in new_kw)
    c[aten.new_zeros.default] = c[aten.new_empty.default]
    c[aten.new_ones.default] = c[aten.new_empty.default]
    c[aten.new_full.default] = lambda: (((make([2, 3], d), s, v), kw) for s in [[], [3, 4], [0, 2]]
                                        for d in (F32, I64) for v in (2, -1.5) for kw in new_kw)
    c[aten.lift_fresh_copy.default] = lambda: (((make(s, d, nc=nc),), {}) for s, d, nc in variants(dtypes=[F32, I64]))
    c[aten.arange.default] = lambda: (((e,), kw) for e in [5, 5.5, 0] for kw in [{}, {"dtype": F64}])
    c[aten.arange.start] = lambda: (((s, e), kw) for s, e in [(2, 7), (-1.5, 3), (3, 3)] for kw in [{}, {"dtype": F32}])
    c[aten.eye.default] = lambda: (((n,), kw) for n in [0, 1, 4] for kw in fkw + [{"dtype": BOOL}])
    c[aten.eye.m] = lambda: (((n, m), kw) for n, m in [(3, 5), (4, 2), (0, 3)] for kw in fkw)
    c[aten.linspace.default] = lambda: (((a, b, n), kw) for a, b, n in [(0, 1, 5), (-2, 3, 7), (3.5, -1, 10), (1, 2, 1),
                                                                        (0, 1, 0)]
                                        for kw in [{}, {"dtype": F64}, {"dtype": I64}, {"dtype": U8}])

    def view_gen(shapes_args):
        def gen():
            for d in [F32, I64]:
                for shape, args in shapes_args:
                    for nc in (False, True):
                        yield (make(shape, d, nc=nc),) + args, {}
                    if len(shape) >= 2:
                        yield (make(shape[::-1], d).transpose(0, -1),) + args, {}
        return gen
    c[aten.reshape.default] = view_gen([((3, 4), ([4, 3],)), ((3, 4), ([-1],)), ((2, 3, 4), ([6, -1],)),
                                        ((2, 3, 4), ([2, 12],)), ((), ([1, 1],)), ((0, 3), ([3, 0],))])
    c[aten.transpose.int] = view_gen([((3, 4), (0, 1)), ((2, 3, 4), (-1, 0)), ((5,), (0, 0))])
    c[aten.t.default] = view_gen([((3, 4), ()), ((5,), ()), ((), ())])
    c[aten.expand_as.default] = lambda: (((make((3, 1), d, nc=nc), make((2, 3, 4), d)), {}) for d in [F32, I64]
                                         for nc in (False, True))
    c[aten.view_as.default] = lambda: (((make((3, 4), d), make((2, 6), d)), {}) for d in [F32, I64])
    c[aten.reshape_as.default] = lambda: (((make((3, 4), d, nc=nc), make((2, 6), d)), {}) for d in [F32, I64]
                                          for nc in (False, True))
    c[aten.squeeze.default] = view_gen([((3, 1, 4, 1), ()), ((1,), ()), ((), ()), ((2, 3), ())])
    c[aten.narrow.default] = view_gen([((5, 4), (0, 1, 3)), ((5, 4), (-1, -3, 2)), ((2, 3, 4), (1, 0, 0))])
    c[aten.unfold.default] = view_gen([((7,), (0, 3, 2)), ((3, 8), (1, 2, 3)), ((4, 5), (0, 4, 1)), ((), (0, 1, 1))])
    c[aten.flatten.using_ints] = view_gen([((2, 3, 4), ()), ((2, 3, 4), (1, 2)), ((2, 3, 4), (0, 1)), ((), ()),
                                           ((5,), (0, 0))])
    c[aten.unflatten.int] = view_gen([((6, 4), (0, [2, 3])), ((2, 12), (-1, [3, -1])), ((5,), (0, [5]))])
    c[aten.movedim.int] = view_gen([((2, 3, 4), (0, 2)), ((2, 3, 4), (-1, 0)), ((5,), (0, 0))])
    c[aten.to.dtype] = lambda: (((make(s, d, nc=nc), dt), kw) for s, d, nc in variants(dtypes=[F32, I64])
                                for dt in [F32, F64, I32, BOOL] for kw in [{}, {"copy": True}])
    c[aten.to.device] = lambda: (((make(s, d, nc=nc), "cpu"), kw) for s, d, nc in variants(dtypes=[F32])
                                 for kw in [{}, {"dtype": F64}, {"copy": True}])
    c[aten.to.dtype_layout] = lambda: (((make(s, d, nc=nc),), kw) for s, d, nc in variants(dtypes=[F32, I64])
                                       for kw in [{"dtype": F64}, {"device": "cpu"}, {"dtype": I32, "copy": True}])
    c[aten.to.other] = lambda: (((make(s, d, nc=nc), make((), o)), {}) for s, d, nc in variants(dtypes=[F32, I64])
                                for o in [F64, I64])
    c[aten.type_as.default] = c[aten.to.other]
    c[aten.contiguous.default] = lambda: (((make(s, d, nc=nc),), {}) for s, d, nc in variants(dtypes=[F32, I64]))
    c[aten.stack.default] = lambda: ((([make(s, d, nc=nc), make(s, d), make(s, d)], dim), {})
                                     for s, d, nc in variants(dtypes=[F32, I64]) for dim in [0, -1])
    c[aten.split.Tensor] = lambda: (((make(s, d, nc=nc), k, dim), {}) for s, d, nc in
                                    variants(shapes=[(7, 4), (0, 3)], dtypes=[F32, I64]) for k, dim in [(2, 0), (3, -1), (4, 0)])
    c[aten.split.sizes] = lambda: (((make((7, 4), d, nc=nc), sz, 0), {}) for d in [F32, I64] for nc in (False, True)
                                   for sz in [[3, 4], [7], [0, 2, 5]])
    c[aten.unbind.int] = lambda: (((make(s, d, nc=nc), dim), {}) for s, d, nc in
                                  variants(shapes=[(3, 4), (0, 3), (2, 1, 3)], dtypes=[F32, I64]) for dim in [0, -1])
    c[aten.chunk.default] = lambda: (((make(s, d, nc=nc), k, dim), {}) for s, d, nc in
                                     variants(shapes=[(7, 4), (0, 3)], dtypes=[F32, I64]) for k, dim in [(2, 0), (3, -1), (9, 0)])
    # self broadcast against the mask: values only (kiln's masked_select backward fails there:
    # it expands the gradient to the mask's shape, not self's).
    c[aten.masked_select.default] = lambda: (((make(s, d, nc=nc), make(m, BOOL)) if s == m or len(s) > len(m) else
                                              NoGrad((make(s, d, nc=nc), make(m, BOOL))), {})
                                             for d in [F32, I64, BOOL] for nc in (False, True)
                                             for s, m in [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4))])
    c[aten.where.default] = lambda: (((make(s, d, -1, 1, nc),), {}) for s, d, nc in variants(dtypes=[BOOL, F32, I64]))
    c[aten.tril.default] = lambda: (((make(s, d, nc=nc),), {"diagonal": k}) for s, d, nc in
                                    variants(shapes=[(3, 4), (2, 4, 3), (0, 2)], dtypes=[F32, I64, BOOL]) for k in [0, 1, -2])
    c[aten.triu.default] = c[aten.tril.default]
    c[aten.sort.stable] = lambda: (((make(s, d, -2, 2, nc),), {"stable": st, "dim": dim, "descending": de})
                                   for s, d, nc in variants(shapes=[(8,), (3, 6)], dtypes=[F32, I64, BOOL])
                                   for st, dim, de in [(True, -1, False), (None, 0, True), (False, -1, True)])
    c[aten.argsort.default] = lambda: (((make(s, d, -2, 2, nc), dim, de), {}) for s, d, nc in
                                       variants(shapes=[(8,), (3, 6)], dtypes=[F32, I64]) for dim, de in [(-1, False), (0, True)])
    c[aten.argsort.stable] = lambda: (((make(s, d, -2, 2, nc),), {"stable": True, "dim": 0, "descending": de}) for s, d, nc in
                                      variants(shapes=[(8,), (3, 6)], dtypes=[F32, I64]) for de in (False, True))
    c[aten.one_hot.default] = lambda: (((make(s, I64, 0, 1.34, nc),), kw) for s, _, nc in
                                       variants(shapes=[(5,), (3, 4)], dtypes=[I64]) for kw in [{}, {"num_classes": 6}])
    c[aten.pad.default] = lambda: (((make((2, 3, 5, 4), d, nc=nc), p), kw) for d in [F32, I64] for nc in (False, True)
                                   for p in [[1, 2], [1, 0, 2, 3], [-1, 2, 0, 1]]
                                   for kw in [{}, {"value": 2.5 if d == F32 else 2},
                                              {"mode": "reflect"}, {"mode": "replicate"}, {"mode": "circular"}]
                                   if not (p[0] < 0 and kw.get("mode") == "reflect"))
    c[aten.roll.default] = lambda: (((make(s, d, nc=nc), sh, dims), {}) for s, d, nc in
                                    variants(shapes=[(5,), (3, 4)], dtypes=[F32, I64])
                                    for sh, dims in [([2], [0]), ([-1], []), ([7], [0]), ([0], [0])])
    c.update(_random_cases())
    return c


def _random_cases():
    c = {}

    def gen_(g):
        return kiln.Generator().manual_seed(1234) if g else None
    # A generator built for each call: (args, kwargs) hold a marker replaced at call time.
    c[aten.bernoulli.default] = lambda: (((make(s, d, 0, 1, nc),), kw) for s, d, nc in variants(dtypes=[F32, F64])
                                         for kw in [{}, {"generator": GEN}])
    c[aten.bernoulli.p] = lambda: (((make(s, d, nc=nc), p), kw) for s, d, nc in variants(dtypes=[F32, F64])
                                   for p in [0.3, 0.7] for kw in [{}, {"generator": GEN}])
    c[aten.randint.default] = lambda: (((10, s), kw) for s in [[3, 4], [0], [7]] for kw in [{}, {"dtype": I32}])
    c[aten.randint.generator] = lambda: (((10, s), {"generator": GEN}) for s in [[3, 4], [7]])
    c[aten.randint.low] = lambda: (((-5, 10, s), kw) for s in [[3, 4], [7]] for kw in [{}, {"dtype": F32}])
    like = lambda gen_kw: lambda: (((make(s, d, nc=nc),), dict(kw, **gen_kw)) for s, d, nc in
                                   variants(dtypes=[F32, F64]) for kw in [{}, {"dtype": F64}])
    c[aten.rand_like.default] = like({})
    c[aten.rand_like.generator] = like({"generator": GEN})
    c[aten.randn_like.default] = like({})
    c[aten.randn_like.generator] = like({"generator": GEN})
    ilike = lambda extra, gen_kw: lambda: (((make(s, d, nc=nc),) + extra, dict(kw, **gen_kw)) for s, d, nc in
                                           variants(dtypes=[F32, I64]) for kw in [{}, {"dtype": I32}])
    c[aten.randint_like.default] = ilike((10,), {})
    c[aten.randint_like.generator] = ilike((10,), {"generator": GEN})
    c[aten.randint_like.low_dtype] = ilike((-3, 10), {})
    c[aten.randint_like.low_generator_dtype] = ilike((-3, 10), {"generator": GEN})
    # the scatter ops functionalization writes views back with
    c[aten.fill.Tensor] = lambda: (((make(s, d, nc=nc), make((), d)), {}) for s, d, nc in variants(dtypes=[F32, I64]))
    c[aten.diagonal_scatter.default] = _diag_scatter_cases
    c[aten.index_add.default] = _index_add_cases
    c[aten.as_strided_scatter.default] = lambda: (
        ((make((3, 4), d), make(size, d), size, stride, off), {}) for d in [F32, I64]
        for size, stride, off in [([2, 2], [1, 2], 1), ([3], [4], 0), ([2, 3], [4, 1], 4)])
    return c


def _index_add_cases():
    # Repeated indices (the accumulation), every dim, int32 indices, alpha of each kind, 0-d self.
    for d in [F32, F64, I64, BOOL]:
        for nc in (False, True):
            yield (make((4, 3), d, nc=nc), 0, kiln.tensor([3, 0, 3]), make((3, 3), d, nc=nc)), {}
            yield (make((2, 3, 4), d, nc=nc), -1, kiln.tensor([1, 1], dtype=I32), make((2, 3, 2), d)), {"alpha": 2}
        yield (make((5,), d), 0, kiln.tensor([4, 0, 4, 4]), make((4,), d)), {}
        yield (make((), d), 0, kiln.tensor(0), make((), d)), {}
    yield (make((2, 3, 4)), 1, kiln.tensor([2, 0, 2, 2]), make((2, 4, 4))), {"alpha": -0.5}
    yield (make((3, 4), I64), 1, kiln.tensor([0, 3]), make((3, 2), I64)), {"alpha": 2.5}  # alpha truncates


def _diag_scatter_cases():
    for d in [F32, I64]:
        for off, n in [(0, 4), (2, 3), (-1, 3)]:
            yield (make((4, 5), d), make((n,), d), off), {}
        yield (make((2, 3, 4), d), make((4, 2), d), 0, 0, 1), {}
        yield (make((3, 4), d, nc=True), make((3,), d), 0, 1, 0), {}


def _linalg_cases():
    """The public linear-algebra functions over well-conditioned (square: A + 3I; spd: A A^T + 3I) and
    rectangular matrices, batched and strided."""
    def square(shape, d, nc=False):
        return make(shape, d, -1, 1, nc) + 3 * kiln.eye(shape[-1], dtype=d)

    def spd(shape, d):
        a = make(shape, d, -1, 1)
        return a @ a.mT + 3 * kiln.eye(shape[-1], dtype=d)
    sq = lambda: (((square(s, d, nc),), {}) for d in FLOATS for s in [(3, 3), (2, 4, 4)]  # noqa: E731
                  for nc in (False, True))
    rect = lambda kw=None: (((make(s, d, nc=nc),), kw or {}) for d in FLOATS  # noqa: E731
                            for s in [(4, 3), (3, 5), (2, 3, 3)] for nc in (False, True))
    c = {}
    for op in (aten.linalg_inv.default, aten.inverse.default, aten.linalg_det.default, aten.det.default,
               aten.linalg_slogdet.default, aten.slogdet.default, aten.logdet.default, aten.linalg_lu_factor.default):
        c[op] = sq
    c[aten.linalg_solve.default] = lambda: (((square(a, d), make(b, d)), kw) for d in FLOATS
                                            for a, b, kw in [((3, 3), (3,), {}), ((2, 3, 3), (3, 2), {}),
                                                             ((3, 3), (2, 3), {"left": False})])
    c[aten.linalg_solve_ex.default] = c[aten.linalg_solve.default]
    for op in (aten.linalg_cholesky.default, aten.cholesky.default):
        c[op] = lambda: (((spd(s, d),), {}) for d in FLOATS for s in [(3, 3), (2, 4, 4)])
    for op in (aten.linalg_eigh.default, aten.linalg_eigvalsh.default):
        c[op] = lambda: (((spd(s, d),), kw) for d in FLOATS for s in [(3, 3), (2, 4, 4)] for kw in [{}, {"UPLO": "U"}])
    c[aten.qr.default] = lambda: (((make(s, d, nc=nc),), kw) for d in FLOATS for nc in (False, True)
                                  for s, kw in [((4, 3), {}), ((3, 5), {}), ((3, 5), {"some": False})])
    c[aten.linalg_svd.default] = lambda: rect({"full_matrices": False})
    c[aten.linalg_svdvals.default] = rect
    c[aten.svd.default] = lambda: itertools_chain(rect(), rect({"compute_uv": False}))
    return c


def _complex_cases():
    """The complex-number functions over complex64/complex128 and real inputs, broadcast and strided."""
    def cplx(shape, d, nc=False):
        return kiln.complex(make(shape, d, nc=nc), make(shape, d, nc=nc))
    c = {}
    unary = lambda: (((cplx(s, d, nc),), {}) for d in FLOATS for s in [(3,), (2, 3)]  # noqa: E731
                     for nc in (False, True))
    for op in (aten.real.default, aten.imag.default, aten.conj.default, aten.resolve_conj.default,
               aten.resolve_neg.default):
        c[op] = unary
    c[aten.angle.default] = lambda: itertools_chain(unary(), (((make((2, 3), d),), {}) for d in FLOATS),
                                                    [((kiln.tensor([-2, 0, 3]),), {})])
    parts = lambda: (((make(a, d), make(b, d)), {}) for d in FLOATS  # noqa: E731
                     for a, b in [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3))])
    c[aten.complex.default] = parts
    c[aten.polar.default] = lambda: (((make(a, d, 0.1, 2), make(b, d)), {}) for d in FLOATS
                                     for a, b in [((3,), (3,)), ((2, 3), (3,))])
    return c


GEN = object()  # stands for a freshly seeded kiln.Generator in random samples


CASES = {}
for _part in (_pointwise_cases, _backward_cases, _reduction_cases, _nn_cases, _shape_cases, _linalg_cases,
              _complex_cases):
    CASES.update(_part())
# the decompositions read off element functions (kiln/_decomp/element_functions.py): unary samples
for _full in kiln._C._inductor.pointwise_ops():
    CASES.setdefault(kiln._ops.overload_named(_full), unary(low=-6.0, high=6.0))
