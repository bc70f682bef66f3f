"""PyTorch's special pointwise functions that kiln composes from its own ops (issue 17): polygamma,
mvlgamma, igamma/igammac (the regularized incomplete gamma functions) and nextafter, with their
Tensor methods and in-place forms.

The numerics are aten's (aten/src/ATen/native/Math.h), evaluated in float64 (but trigamma) and
rounded to the input's dtype (more accurate than torch's float32 kernels, e.g. igammac's small tails):
- polygamma(0) is digamma; polygamma(1) is aten's trigamma in the input's type (reflection below 1/2,
  six recurrence steps, a four-term asymptotic tail: accurate to ~1e-9, kept so because torch's is);
  polygamma(n >= 2) is (-1)^(n+1) n! zeta(n+1, x) by Cephes' Euler-Maclaurin sum (nine terms, twelve
  Bernoulli corrections) for x > 0, and below 0 by the reflection formula
  psi^(n)(x) = (-1)^n psi^(n)(1-x) - pi d^n/dx^n cot(pi x), the derivative a polynomial in cot(pi x).
- igamma/igammac follow Cephes' choice of method by (a, x): the power series of P, the continued
  fraction of Q (x > 1.1, x >= a), and DLMF 8.7.3's series of Q for small x; aten's Temme expansion
  for a near x > 20 is not reproduced (the series and fraction agree with it to ~1e-12 there).
  Their loops run until every element has converged, which reads the data: under kiln.compile
  igamma is a clean graph break and runs eagerly, as unique does.
- nextafter steps the IEEE bit pattern (the float viewed as an integer) by one toward `other`.
Gradients are torch's formulas (derivatives.yaml) through autograd Functions: polygamma's is
polygamma(n+1), igamma's reaches only x (the one for `a` raises, as in torch), nextafter's is the
incoming gradient for `input`, zero for `other`.
"""

import math

from kiln import _C
from kiln._composites import _broadcast_shape, _is_fake, _kiln, _type_name

__all__ = ["polygamma", "polygamma_", "mvlgamma", "mvlgamma_", "igamma", "igamma_", "igammac", "igammac_",
           "nextafter", "nextafter_"]

_MACHEP = 1.11022302462515654042e-16  # Cephes' MACHEP: 2 ** -53
_MAX_ITERATIONS = 2000  # Cephes' MAXITER for the incomplete gamma series and continued fraction


def _as_float(input):
    return input if input.dtype.is_floating_point else input.to(_C.get_default_dtype())


def _functions():
    """The autograd Functions, made on first use (kiln imports this module before kiln.autograd)."""
    if not _FUNCTIONS:
        k = _kiln()

        class PolygammaBackward(k.autograd.Function):
            _backward_name = "PolygammaBackward0"

            @staticmethod
            def forward(ctx, x, n):
                ctx.save_for_backward(x)
                ctx.n = n
                return _polygamma_values(n, x)

            @staticmethod
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * polygamma(ctx.n + 1, x), None

        class IgammaBackward(k.autograd.Function):
            @staticmethod
            def forward(ctx, a, x, upper):
                ctx.save_for_backward(a, x)
                ctx.upper = upper
                return _incomplete_gamma(a, x, upper)

            @staticmethod
            def backward(ctx, grad):
                a, x = ctx.saved_tensors
                if ctx.needs_input_grad[0]:
                    name = "igammac" if ctx.upper else "igamma"
                    raise NotImplementedError(f"the derivative for '{name}: input' is not implemented.")
                # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a); Q = 1 - P
                density = ((a - 1) * x.log() - x - a.lgamma()).exp()
                grad_x = grad * (-density if ctx.upper else density)
                return None, grad_x.sum_to_size(x.shape), None

        class NextafterBackward(k.autograd.Function):
            @staticmethod
            def forward(ctx, input, other):
                ctx.shapes = (tuple(input.shape), tuple(other.shape), other.dtype)
                return _nextafter_values(input, other)

            @staticmethod
            def backward(ctx, grad):
                input_shape, other_shape, other_dtype = ctx.shapes
                return grad.sum_to_size(input_shape), k.zeros(other_shape, dtype=other_dtype)

        _FUNCTIONS.update(polygamma=PolygammaBackward, igamma=IgammaBackward, nextafter=NextafterBackward)
    return _FUNCTIONS


_FUNCTIONS = {}


def _result(value, out):
    return value if out is None else out.copy_(value)


def _require_castable(op, self, result_dtype):
    if not _C.can_cast(result_dtype, self.dtype):
        raise RuntimeError(f"result type {_type_name(result_dtype)} can't be cast to the desired output type "
                           f"{_type_name(self.dtype)}")


# --- polygamma ----------------------------------------------------------------------------------------
# Cephes' zeta: (2j)! / B_2j, the Euler-Maclaurin corrections' denominators
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def _hurwitz_zeta(s, q):
    """zeta(s, q) = sum_k (q + k)^-s for q > 0 and an integer s >= 2 (Cephes' zeta): nine terms of
    the sum, the integral of the rest and twelve Bernoulli corrections at w = q + 9."""
    total = q.pow(-s)
    w = q
    for _ in range(9):
        w = w + 1
        total = total + w.pow(-s)
    b = w.pow(-s)
    total = total + b * w / (s - 1) - 0.5 * b
    rising, k = 1.0, 0.0
    for denominator in _ZETA_A:
        rising *= s + k
        b = b / w
        total = total + rising * b / denominator
        k += 1.0
        rising *= s + k
        b = b / w
        k += 1.0
    return total


def _cot_derivative_coefficients(n):
    """Coefficients (lowest power first) of the polynomial P with d^n/dx^n cot(pi x) = P(cot(pi x)):
    P_0(c) = c and P_{k+1}(c) = -pi (1 + c^2) P_k'(c)."""
    coefficients = [0.0, 1.0]
    for _ in range(n):
        derivative = [i * c for i, c in enumerate(coefficients)][1:] or [0.0]
        grown = [0.0] * (len(derivative) + 2)
        for i, c in enumerate(derivative):
            grown[i] += -math.pi * c
            grown[i + 2] += -math.pi * c
        coefficients = grown
    return coefficients


def _trigamma(x):
    """aten's trigamma, term for term."""
    k = _kiln()
    reflect = x < 0.5
    sin_pi_x = (x * math.pi).sin()
    result = k.where(reflect, -(math.pi * math.pi) / (sin_pi_x * sin_pi_x), 0.0)
    x = k.where(reflect, 1 - x, x)
    for _ in range(6):
        result = result + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    result = result + (1 + 1 / (2 * x) + ixx * (1.0 / 6 - ixx * (1.0 / 30 - ixx * (1.0 / 42)))) / x
    return k.where(reflect, -result, result)


def _polygamma_values(n, input):
    """psi^(n)(input) for n >= 1, computed in float64, in input's dtype."""
    k = _kiln()
    if n == 1:  # in the input's float type, as aten's trigamma<scalar_t> (its float32 poles are finite)
        return _trigamma(input)
    x = input.to(_C.float64)
    sign = 1.0 if n % 2 else -1.0  # (-1)^(n+1)
    factorial = math.exp(math.lgamma(n + 1.0))  # aten's exp(lgamma(n + 1))
    positive = x > 0
    # Below 0 the reflection formula needs psi^(n)(1 - x); both branches are computed on safe values.
    q = k.where(positive, x, 1 - x)
    at_q = sign * factorial * _hurwitz_zeta(n + 1.0, q)
    cot = (x * math.pi).cos() / (x * math.pi).sin()
    polynomial = k.zeros_like(x)
    for c in reversed(_cot_derivative_coefficients(n)):
        polynomial = polynomial * cot + c
    reflected = (1.0 if n % 2 == 0 else -1.0) * at_q - math.pi * polynomial
    value = k.where(positive, at_q, reflected)
    # zeta's poles: x = 0, -1, -2, ... and -inf give (-1)^(n+1) inf, +inf gives Cephes' NaN
    pole = (x <= 0) & (x == x.floor())
    value = k.where(pole | (x == -math.inf), sign * math.inf, value)
    value = k.where(x == math.inf, math.nan, value)
    return value.to(input.dtype)


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma: digamma for n = 0."""
    k = _kiln()
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if not isinstance(input, k.Tensor):
        raise TypeError(f"polygamma(): argument 'input' (position 2) must be Tensor, not {type(input).__name__}")
    x = _as_float(input)
    if n == 0:
        return _result(x.digamma(), out)
    return _result(_functions()["polygamma"].apply(x, n), out)


def _polygamma_method(self, n):
    return polygamma(n, self)


def polygamma_(self, n):
    _require_castable("polygamma_", self, _as_float(self).dtype)
    return self.copy_(polygamma(n, self))


# --- mvlgamma -----------------------------------------------------------------------------------------
def mvlgamma(input, p, *, out=None):
    """The multivariate log-gamma log Gamma_p(x) = p(p-1)/4 log(pi) + sum_{j<p} lgamma(x - j/2)
    (aten's composition: lgamma of x + arange(-(p-1)/2, 1/2, 1/2), summed over the last dim)."""
    k = _kiln()
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    x = _as_float(input)
    shifts = k.arange(-p * 0.5 + 0.5, 0.5, 0.5, dtype=x.dtype)
    value = (x.unsqueeze(-1) + shifts).lgamma().sum(-1) + p * (p - 1) * math.log(math.pi) / 4
    return _result(value, out)


def mvlgamma_(self, p):
    _require_castable("mvlgamma_", self, _as_float(self).dtype)
    return self.copy_(mvlgamma(self, p))


# --- igamma, igammac ----------------------------------------------------------------------------------
def _iterate(step, state, converged):
    """Runs state = step(state) until converged(state) holds everywhere (checked every 8 steps) or
    Cephes' iteration limit: the loop count depends on the data (a graph break under kiln.compile)."""
    for i in range(_MAX_ITERATIONS):
        state = step(state)
        if i % 8 == 7 and bool(converged(state).all()):
            break
    return state


def _log_prefactor(a, x):
    """log(x^a e^-x / Gamma(a))."""
    return a * x.log() - x - a.lgamma()


def _lower_series(a, x):
    """P(a, x) by its power series (Cephes' _igam_helper_series)."""
    def step(state):
        r, c, total = state
        r = r + 1
        c = c * x / r
        return r, c, total + c

    ones = _kiln().ones_like(x)
    _, _, total = _iterate(step, (a, ones, ones), lambda s: s[1] <= _MACHEP * s[2])
    return total * _log_prefactor(a, x).exp() / a


def _upper_continued_fraction(a, x):
    """Q(a, x) by Legendre's continued fraction (Cephes' _igamc_helper_continued_fraction), its
    convergents rescaled when they grow past 2^52."""
    k = _kiln()
    big, biginv = 4.503599627370496e15, 2.22044604925031308085e-16
    y = 1 - a
    z = x + y + 1
    state = (k.zeros_like(x), y, z, k.ones_like(x), x, x + 1, z * x, (x + 1) / (z * x), k.ones_like(x))

    def step(state):
        c, y, z, pkm2, qkm2, pkm1, qkm1, answer, _ = state
        c, y, z = c + 1, y + 1, z + 2
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        nonzero = qk != 0
        ratio = pk / k.where(nonzero, qk, 1.0)
        change = k.where(nonzero, ((answer - ratio) / ratio).abs(), 1.0)
        answer = k.where(nonzero, ratio, answer)
        scale = k.where(pk.abs() > big, biginv, 1.0)
        return c, y, z, pkm1 * scale, qkm1 * scale, pk * scale, qk * scale, answer, change

    state = _iterate(step, state, lambda s: s[8] <= _MACHEP)
    return state[7] * _log_prefactor(a, x).exp()


def _upper_series(a, x):
    """Q(a, x) for small x by DLMF 8.7.3 (Cephes' _igamc_helper_series), free of P's cancellation."""
    k = _kiln()

    def step(state):
        n, fac, total, _ = state
        n = n + 1
        fac = fac * -x / n
        term = fac / (a + n)
        return n, fac, total + term, term

    zeros = k.zeros_like(x)
    _, _, total, _ = _iterate(step, (zeros, k.ones_like(x), zeros, k.ones_like(x)),
                              lambda s: s[3].abs() <= _MACHEP * s[2].abs())
    log_x = x.log()
    return -(a * log_x - (a + 1).lgamma()).expm1() - (a * log_x - a.lgamma()).exp() * total


def _incomplete_gamma(a_in, x_in, upper):
    """P(a, x) (upper=False) or Q(a, x), elementwise over the broadcast inputs, with Cephes' special
    values and its choice of method."""
    k = _kiln()
    dtype = a_in.dtype
    a, x = k.broadcast_tensors(a_in.to(_C.float64), x_in.to(_C.float64))
    # Each method runs on every element; the elements it is not chosen for get harmless values.
    safe = (a > 0) & (x > 0) & a.isfinite() & x.isfinite()
    use_fraction = safe & (x > 1.1) & (x >= a)
    small_x_upper = safe & (x <= 1.1) & k.where(x <= 0.5, -0.4 / x.log() >= a, x * 1.1 >= a)
    use_lower_series = safe & ~use_fraction & ~small_x_upper
    one = k.ones_like(a)
    fraction = _upper_continued_fraction(k.where(use_fraction, a, one), k.where(use_fraction, x, 2 * one))
    upper_series = _upper_series(k.where(small_x_upper, a, one), k.where(small_x_upper, x, 0.5 * one))
    lower_series = _lower_series(k.where(use_lower_series, a, one), k.where(use_lower_series, x, 0.5 * one))
    q = k.where(use_fraction, fraction, k.where(small_x_upper, upper_series, 1 - lower_series))
    # Cephes' igam takes 1 - Q only where x > 1 and x > a; elsewhere its own series
    p = k.where((x > 1) & (x > a), 1 - q, k.where(use_lower_series, lower_series, 1 - q))
    value = q if upper else p
    # special values (aten's calc_igamma/calc_igammac), P's first; Q = 1 - P on all but NaN
    nan = math.nan
    special = k.full_like(a, nan)
    special = k.where(x.isinf() & (x > 0), 1.0, special)
    special = k.where(a.isinf() & (a > 0), k.where(x.isinf(), nan, 0.0), special)
    special = k.where(x == 0, 0.0, special)
    special = k.where(a == 0, k.where(x > 0, 1.0, nan), special)
    special = k.where((x < 0) | (a < 0) | x.isnan() | a.isnan(), nan, special)
    if upper:
        special = 1 - special
    return k.where(safe, value, special).to(dtype)


def _igamma(op, input, other, upper, out):
    k = _kiln()
    for position, (name, value) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(value, k.Tensor):
            raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, not "
                            f"{type(value).__name__}")
    dtype = _C.promote_types(input.dtype, other.dtype)
    if not dtype.is_floating_point:
        raise NotImplementedError(f"\"{op}_cpu\" not implemented for '{_type_name(dtype)}'")
    _broadcast_shape(tuple(input.shape), tuple(other.shape))  # raises torch's error for mismatched sizes
    a, x = input.to(dtype), other.to(dtype)
    return _result(_functions()["igamma"].apply(a, x, upper), out)


def igamma(input, other, *, out=None):
    """The regularized lower incomplete gamma function P(input, other)."""
    return _igamma("igamma", input, other, False, out)


def igammac(input, other, *, out=None):
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P(input, other)."""
    return _igamma("igammac", input, other, True, out)


def igamma_(self, other):
    value = igamma(self, other)
    _require_castable("igamma_", self, value.dtype)
    return self.copy_(value)


def igammac_(self, other):
    value = igammac(self, other)
    _require_castable("igammac_", self, value.dtype)
    return self.copy_(value)


# --- nextafter ----------------------------------------------------------------------------------------
_BITS = {_C.float64: _C.int64, _C.float32: _C.int32, _C.float16: _C.int16, _C.bfloat16: _C.int16}


def _nextafter_values(input, other):
    """The float after input toward other: input's bit pattern plus or minus one (its magnitude grows
    when moving away from 0), the smallest subnormal from 0, other itself where they are equal."""
    k = _kiln()
    x, y = k.broadcast_tensors(input, other)
    x = x.contiguous()
    bits = x.view(_BITS[x.dtype])
    away_from_zero = (y > x) == (x > 0)
    stepped = k.where(away_from_zero, bits + 1, bits - 1).view(x.dtype)
    tiny = k.ones((), dtype=bits.dtype).view(x.dtype)  # bit pattern 1: the smallest subnormal
    from_zero = k.where(y > 0, tiny, -tiny)
    value = k.where(x == 0, from_zero, stepped)
    value = k.where(x == y, y, value)
    return k.where(x.isnan() | y.isnan(), math.nan, value)


def nextafter(input, other, *, out=None):
    """The next representable floating-point value after input in the direction of other."""
    k = _kiln()
    for position, (name, value) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(value, k.Tensor):
            raise TypeError(f"nextafter(): argument '{name}' (position {position}) must be Tensor, not "
                            f"{type(value).__name__}")
    dtype = _C.promote_types(input.dtype, other.dtype)
    if dtype not in _BITS:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{_type_name(dtype)}'")
    _broadcast_shape(tuple(input.shape), tuple(other.shape))
    return _result(_functions()["nextafter"].apply(input.to(dtype), other.to(dtype)), out)


def nextafter_(self, other):
    value = nextafter(self, other)
    _require_castable("nextafter_", self, value.dtype)
    return self.copy_(value)


def install_methods(tensor_class):
    """Tensor.polygamma(n) (self first, unlike torch.polygamma), mvlgamma, igamma(c), nextafter and
    their in-place forms."""
    tensor_class.polygamma = _polygamma_method
    for name in ("polygamma_", "mvlgamma", "mvlgamma_", "igamma", "igamma_", "igammac", "igammac_", "nextafter",
                 "nextafter_"):
        setattr(tensor_class, name, globals()[name])
