"""Padding modules: ConstantPad1d/2d/3d, ZeroPad1d/2d/3d, ReflectionPad1d/2d/3d, ReplicationPad1d/2d/3d,
CircularPad1d/2d/3d, each F.pad with a fixed mode; `padding` is kept as a tuple of 2, 4 or 6 ints, as
torch's. The circular pads check the input's rank first (the others leave that to F.pad)."""

from kiln.nn import functional as F
from kiln.nn.modules.module import Module


def _ntuple(x, n):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


class _ConstantPadNd(Module):
    __constants__ = ["padding", "value"]

    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _ntuple(padding, 2)


class ConstantPad2d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _ntuple(padding, 4)


class ConstantPad3d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _ntuple(padding, 6)


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _PadNd(Module):
    __constants__ = ["padding"]
    _mode = None

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2)


class ReflectionPad2d(_PadNd):
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 4)


class ReplicationPad1d(_PadNd):
    _mode = "replicate"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2)


class ReplicationPad2d(_PadNd):
    _mode = "replicate"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 4)


class ReflectionPad3d(_PadNd):
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 6)


class ReplicationPad3d(_PadNd):
    _mode = "replicate"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 6)


class _CircularPadNd(_PadNd):
    _mode = "circular"
    _input_dims = None  # the unbatched and batched ranks it accepts

    def _check_input_dim(self, input):
        if input.dim() not in self._input_dims:
            raise ValueError(f"expected {self._input_dims[0]}D or {self._input_dims[1]}D input (got {input.dim()}D "
                             "input)")

    def forward(self, input):
        self._check_input_dim(input)
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    _input_dims = (2, 3)

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2)


class CircularPad2d(_CircularPadNd):
    _input_dims = (3, 4)

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 4)


class CircularPad3d(_CircularPadNd):
    _input_dims = (4, 5)

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 6)
