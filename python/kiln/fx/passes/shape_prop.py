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


def _extract_tensor_metadata(result, include_contiguity=True):
    """TensorMetadata of one tensor; memory_format is the first layout the tensor is contiguous in."""
    memory_format = None
    if include_contiguity:
        for fmt in (kiln.contiguous_format, kiln.channels_last):
            try:
                contiguous = result.is_contiguous(memory_format=fmt)
            except (TypeError, RuntimeError):
                contiguous = fmt is kiln.contiguous_format and result.is_contiguous()
            if contiguous:
                memory_format = fmt
                break
    return TensorMetadata(result.shape, result.dtype, result.requires_grad, tuple(result.stride()), memory_format,
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
