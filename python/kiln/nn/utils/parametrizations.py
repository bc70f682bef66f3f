"""torch.nn.utils.parametrizations for kiln: weight_norm and spectral_norm as parametrizations
(see parametrize.py), with PyTorch's state-dict layout.

weight_norm(module) stores `parametrizations.weight.original0` (g, the norms over every dimension but
`dim`) and `original1` (v, the direction); weight = v * g / ||v||. spectral_norm(module) divides the
weight by its largest singular value, estimated by power iteration on the buffers
`parametrizations.weight.0._u` / `_v`, which are updated in training mode on each access.
orthogonal(module) (in _orthogonal.py) keeps the weight orthogonal through the Cayley map or Householder
reflectors; its "matrix_exp" map, PyTorch's default for square weights, needs a kiln.matrix_exp.
"""

import kiln
from kiln.nn import functional as F
from kiln.nn.modules.module import Module
from kiln.nn.utils import parametrize
from kiln.nn.utils._orthogonal import orthogonal  # noqa: F401

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        if dim is None:
            dim = -1
        self.dim = dim

    def forward(self, weight_g, weight_v):
        return kiln._weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        weight_g = kiln.norm_except_dim(weight, 2, self.dim)
        weight_v = weight
        return weight_g, weight_v


def weight_norm(module, name="weight", dim=0):
    """Reparametrizes module.<name> as g * v / ||v|| (norms over every dimension but `dim`; None: the
    whole tensor). Checkpoints of the older nn.utils.weight_norm (`<name>_g`, `<name>_v`) still load."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                 error_msgs):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.size()
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)  # start from a good estimate

    def _reshape_weight_to_matrix(self, weight):
        """`dim` first, the rest flattened: (weight.size(dim), -1)."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        # updates the buffers in place (PyTorch's out=), so that they are the same tensors as before
        with kiln.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(kiln.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(kiln.mv(weight_mat.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # copies: the buffers change at the next access, the graph must keep these values
        u = self._u.clone()
        v = self._v.clone()
        sigma = kiln.dot(u, kiln.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def _transposed_convolutions():
    """The ConvTranspose classes kiln.nn has (their weight is (in, out, ...): the output dimension is 1)."""
    import kiln.nn as nn

    names = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
    return tuple(getattr(nn, n) for n in names if hasattr(nn, n))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrizes module.<name> as weight / sigma(weight), sigma from power iteration (dim: the
    output dimension, 0; 1 for transposed convolutions)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, kiln.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, _transposed_convolutions()) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
