"""parameters_to_vector / vector_to_parameters, as torch.nn.utils."""

import kiln
from kiln._tensor import Tensor


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter, flattened, in order."""
    return kiln.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of `vec` into the parameters (in place)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected kiln.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for param in parameters:
        num_param = param.numel()
        param.detach().copy_(vec[pointer:pointer + num_param].view_as(param))
        pointer += num_param
