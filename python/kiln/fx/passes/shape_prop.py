"""kiln.fx.passes.shape_prop: ShapeProp records each node's tensor metadata (torch.fx.passes.shape_prop).

    ShapeProp(gm).propagate(x)
    gm.graph.nodes[1].meta["tensor_meta"]   # TensorMetadata(shape=kiln.Size([4, 8]), dtype=kiln.float32, ...)

It runs the graph (an Interpreter) on example inputs and stores, for every node producing tensors,
`meta["tensor_meta"]`: a TensorMetadata, or the same nested structure of them as the node's value;
`meta["type"]` is the Python type of the value.
"""

from typing import Any, Dict, NamedTuple, Optional, Tuple

import kiln
from kiln.fx.interpreter import Interpreter
from kiln.fx.node import map_aggregate

__all__ = ["TensorMetadata", "ShapeProp"]


class TensorMetadata(NamedTuple):
    shape: Any  # kiln.Size
    dtype: Any  # kiln.dtype
    requires_grad: bool
    stride: Tuple[int, ...]
    memory_format: Optional[Any]
    is_quantized: bool
    qparams: Dict[str, Any]


def _dense_in_order(shape, stride, order):
    """Whether the strides are those of a dense tensor laid out with dims `order` innermost first
    (dims of size 1 may have any stride, as PyTorch's contiguity checks allow)."""
    expected = 1
    for d in order:
        if shape[d] != 1:
            if stride[d] != expected:
                return False
            expected *= shape[d]
    return True


def _extract_tensor_metadata(result, include_contiguity=True):
    """TensorMetadata of one tensor; memory_format is the first of contiguous_format and
    channels_last (4-d) that the tensor is dense in, else None."""
    shape, stride = tuple(result.shape), tuple(result.stride())
    memory_format = None
    if include_contiguity:
        # Computed from the strides (Tensor.is_contiguous(memory_format=channels_last) is not reliable
        # in kiln yet).
        if _dense_in_order(shape, stride, range(len(shape) - 1, -1, -1)):
            memory_format = kiln.contiguous_format
        elif len(shape) == 4 and _dense_in_order(shape, stride, (1, 3, 2, 0)):
            memory_format = kiln.channels_last
    return TensorMetadata(result.shape, result.dtype, result.requires_grad, stride, memory_format,
                          bool(getattr(result, "is_quantized", False)), {})


class ShapeProp(Interpreter):
    """Runs a GraphModule on example inputs, recording node.meta["tensor_meta"] and meta["type"]."""

    def __init__(self, gm, fake_mode=None):
        super().__init__(gm)
        self.fake_mode = fake_mode

    def run_node(self, n):
        try:
            if self.fake_mode is not None:
                with self.fake_mode:
                    result = super().run_node(n)
            else:
                result = super().run_node(n)
        except Exception as e:
            raise RuntimeError(f"ShapeProp error for: node={n.format_node()} with meta={dict(n.meta)}") from e

        found_tensor = False

        def extract(obj):
            nonlocal found_tensor
            if isinstance(obj, kiln.Tensor):
                found_tensor = True
                return _extract_tensor_metadata(obj)
            return obj

        meta = map_aggregate(result, extract)
        if found_tensor:
            n.meta["tensor_meta"] = meta
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args):
        """Runs the module on `args` (fake tensors under fake_mode); returns its result."""
        if self.fake_mode is not None:
            args = [self.fake_mode.from_tensor(t) if isinstance(t, kiln.Tensor) else t for t in args]
        return super().run(*args)
