"""kiln.finfo / kiln.iinfo: the numeric limits of a dtype, with torch.finfo's and torch.iinfo's
attributes, values, equality and printing. A float format is fixed by its width, its mantissa bits
and its largest exponent; every limit follows from those three (IEEE 754 binary formats, and
bfloat16, which is float32 with 16 mantissa bits cut off).
"""

import math

from kiln import _C

# name: (bits, stored mantissa bits, largest exponent)
_FLOAT_FORMATS = {"float16": (16, 10, 15), "bfloat16": (16, 7, 127), "float32": (32, 23, 127), "float64": (64, 52, 1023)}
_INT_FORMATS = {"uint8": (8, False), "int8": (8, True), "int16": (16, True), "int32": (32, True), "int64": (64, True)}
_MISSING = object()


def _name(dtype, fn):
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"{fn}(): argument 'type' (position 1) must be kiln.dtype, not {type(dtype).__name__}")
    return str(dtype).split(".", 1)[1]


class finfo:
    """Limits of a floating-point dtype (the default dtype when omitted): bits, eps (the gap from 1.0
    to the next value), max, min (= -max), tiny and smallest_normal (the smallest positive normal
    value), resolution (10 ** -decimal digits), dtype (its name, a str)."""

    __hash__ = None  # unhashable, as torch.finfo

    def __init__(self, type=_MISSING):
        dtype = _C.get_default_dtype() if type is _MISSING else type
        name = _name(dtype, "finfo")
        name = {"complex64": "float32", "complex128": "float64"}.get(name, name)  # a complex dtype's parts
        if name not in _FLOAT_FORMATS:
            raise TypeError("kiln.finfo() requires a floating point input type. Use kiln.iinfo to handle 'kiln.finfo'")
        bits, mantissa, max_exp = _FLOAT_FORMATS[name]
        self.bits = bits
        self.eps = 2.0 ** -mantissa
        self.max = (2.0 - self.eps) * 2.0 ** max_exp
        self.min = -self.max
        self.smallest_normal = self.tiny = 2.0 ** (1 - max_exp)
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))  # 10 ** -digits10
        self.dtype = name

    def __eq__(self, other):
        if not isinstance(other, finfo):
            return NotImplemented
        return vars(self) == vars(other)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")

    __str__ = __repr__


class iinfo:
    """Limits of an integer dtype: bits, min, max (Python ints) and dtype (its name, a str)."""

    __hash__ = None

    def __init__(self, type=_MISSING):
        if type is _MISSING:
            raise TypeError('iinfo() missing 1 required positional arguments: "type"')
        name = _name(type, "iinfo")
        if name == "bool":
            raise TypeError("kiln.bool is not supported by kiln.iinfo")
        if name not in _INT_FORMATS:
            raise TypeError("kiln.iinfo() requires an integer input type. Use kiln.finfo to handle 'kiln.iinfo'")
        bits, signed = _INT_FORMATS[name]
        self.bits = bits
        self.min = -(1 << (bits - 1)) if signed else 0
        self.max = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        self.dtype = name

    def __eq__(self, other):
        if not isinstance(other, iinfo):
            return NotImplemented
        return vars(self) == vars(other)

    def __repr__(self):
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"

    __str__ = __repr__
