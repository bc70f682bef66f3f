"""torch.nn.modules.utils's helpers at PyTorch's import path (defined in kiln.nn._arg_tuples)."""

from kiln.nn._arg_tuples import (  # noqa: F401
    _list_with_default, _ntuple, _pair, _quadruple, _reverse_repeat_tuple, _single, _triple,
)
