"""Decompositions of the complex-number functions (tensor/ops/complex.cc) onto the core views
between complex numbers and pairs of reals (view_as_real, view_as_complex) and conj_physical:
the same compositions the C++ composites make."""

import math

from kiln._decomp import register_decomposition
from kiln._ops import ops

aten = ops.aten


@register_decomposition(aten.real.default)
def real(self):
    if not self.dtype.is_complex:
        return aten.alias.default(self)
    return aten.select.int(aten.view_as_real.default(self), -1, 0)


@register_decomposition(aten.imag.default)
def imag(self):
    if not self.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return aten.select.int(aten.view_as_real.default(self), -1, 1)


@register_decomposition(aten.conj.default)
def conj(self):
    return aten.conj_physical.default(self) if self.dtype.is_complex else aten.alias.default(self)


@register_decomposition([aten.resolve_conj.default, aten.resolve_neg.default])
def resolve_conj(self):
    return aten.alias.default(self)  # kiln has no lazy conjugate or negative bits to resolve


@register_decomposition(aten.angle.default)
def angle(self):
    if self.dtype.is_complex:
        return aten.atan2.default(imag(self), real(self))
    x = self if self.dtype.is_floating_point else aten._to_copy.default(self, dtype=_default_float())
    pi = aten.where.self(aten.lt.Scalar(x, 0), aten.full.default([], math.pi, dtype=x.dtype),
                         aten.mul.Scalar(x, 0))
    return aten.where.self(aten.isnan.default(x), x, pi)


def _default_float():
    import kiln
    return kiln.get_default_dtype()


def _from_parts(re, im):
    import kiln
    shape = list(kiln.broadcast_shapes(re.shape, im.shape))
    pairs = aten.stack.default([aten.expand.default(re, shape), aten.expand.default(im, shape)], -1)
    return aten.view_as_complex.default(pairs)


@register_decomposition(aten.complex.default)
def complex(real, imag):
    return _from_parts(real, imag)


@register_decomposition(aten.polar.default)
def polar(abs, angle):
    return _from_parts(aten.mul.Tensor(abs, aten.cos.default(angle)), aten.mul.Tensor(abs, aten.sin.default(angle)))
