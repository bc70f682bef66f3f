"""Tensor methods real code calls that kiln composes in Python (issue 17): the complex conversions
(cfloat, cdouble, __complex__), the random fills exponential_, geometric_, cauchy_ and log_normal_,
index_reduce (with torch.index_reduce), conj_physical_, as_subclass, the Python-callable maps apply_,
map_ and map2_, dim_order, and the device predicates of accelerators kiln does not have.

The random fills transform uniform draws of kiln's generator by the inverse of each distribution's
CDF, as aten's CPU kernels do, so the values follow the same law (not PyTorch's random stream):
  exponential: -log(1 - U) / lambda      geometric: ceil(log(1 - U) / log1p(-p))
  cauchy:      median + sigma * tan(pi (U - 1/2))     log_normal: exp(mean + std * N(0, 1))
index_reduce is scatter_reduce with the 1-D index spread along `dim` over source's shape.
"""

import math

from kiln import _C
from kiln._composites import _kiln, _type_name, _wrap_dim

__all__ = ["index_reduce"]


# --- complex conversions ------------------------------------------------------------------------------
def cfloat(self, memory_format=None):
    return self.to(_C.complex64)


def cdouble(self, memory_format=None):
    return self.to(_C.complex128)


def __complex__(self):
    if self.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return complex(self.item())


def conj_physical_(self):
    """Conjugates a complex tensor in place (a real one is left as it is)."""
    return self.copy_(self.conj_physical()) if self.dtype.is_complex else self


# --- random fills ------------------------------------------------------------------------------------
def _uniform_like(self, generator):
    """U(0, 1) draws of self's shape in float64 (the transforms below need its range near 0 and 1)."""
    return _kiln().empty(self.shape, dtype=_C.float64).uniform_(0.0, 1.0, generator=generator)


def _fill(self, values):
    with _kiln().no_grad():
        return self.copy_(values)


def _require_float(self, distribution):
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{distribution} distribution is a continuous probability distribution. dtype must be a "
                           f"floating point but you specified {_type_name(self.dtype)}")


def exponential_(self, lambd=1.0, *, generator=None):
    if not lambd > 0.0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    _require_float(self, "Exponential")
    return _fill(self, -(-_uniform_like(self, generator)).log1p() / lambd)


def geometric_(self, p, *, generator=None):
    """The number of Bernoulli(p) trials up to the first success (1, 2, ...); integer tensors too."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p:g}")
    return _fill(self, ((-_uniform_like(self, generator)).log1p() / math.log1p(-p)).ceil().clamp(min=1))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    if not sigma > 0.0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma:g}")
    _require_float(self, "Cauchy")
    return _fill(self, median + sigma * ((_uniform_like(self, generator) - 0.5) * math.pi).tan())


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    if not std > 0.0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std:g}")
    _require_float(self, "LogNormal")
    draws = _kiln().empty(self.shape, dtype=_C.float64).normal_(mean, std, generator=generator)
    return _fill(self, draws.exp())


# --- index_reduce ------------------------------------------------------------------------------------
_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _spread_index(op, self, dim, index, source, reduce):
    """scatter_reduce's index: index[i] at every position of source's slice i along dim."""
    if reduce not in _INDEX_REDUCTIONS:
        raise RuntimeError(f"{op}(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if index.dtype not in (_C.int64, _C.int32):
        raise RuntimeError(f"{op}_(): Expected dtype int32/int64 for index but got: {_type_name(index.dtype)}")
    if index.dim() > 1:
        raise IndexError(f"{op}_(): Index is supposed to be a vector")
    if self.dtype != source.dtype:
        raise RuntimeError(f"{op}_(): self ({_type_name(self.dtype)}) and source ({_type_name(source.dtype)}) must "
                           "have the same scalar type")
    dim = _wrap_dim(dim, max(self.dim(), 1))
    if index.numel() != (source.shape[dim] if source.dim() else 1):
        raise IndexError(f"{op}_(): Number of indices ({index.numel()}) should be equal to source.size(dim) "
                         f"({source.shape[dim] if source.dim() else 1})")
    shape = [1] * source.dim()
    if source.dim():
        shape[dim] = index.numel()
    return dim, index.to(_C.int64).reshape(shape).expand(source.shape)


def index_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    """input with source's slices reduced into the rows `index` names along dim ("prod", "mean",
    "amax" or "amin"; include_self=False leaves input's own value out of rows that receive any)."""
    dim, spread = _spread_index("index_reduce", input, dim, index, source, reduce)
    value = input.scatter_reduce(dim, spread, source, reduce, include_self=include_self)
    return value if out is None else out.copy_(value)


def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    dim, spread = _spread_index("index_reduce", self, dim, index, source, reduce)
    return self.scatter_reduce_(dim, spread, source, reduce, include_self=include_self)


# --- Python-level conveniences -------------------------------------------------------------------------
def as_subclass(self, cls):
    """self as an instance of cls (a Tensor subclass), sharing its data and its place in the autograd
    graph. A leaf that requires grad becomes a new leaf over the same data (torch's shares the leaf
    itself: there gradients reach the original; here the new tensor's .grad)."""
    k = _kiln()
    if not (isinstance(cls, type) and issubclass(cls, k.Tensor)):
        raise TypeError(f"as_subclass(): argument 'cls' must be a subclass of Tensor, not {cls!r}")
    if self.grad_fn is not None:
        alias = _C._alias_with_history(self, self.grad_fn, self.output_nr)
        alias.__class__ = cls
        return alias
    return _C._make_subclass(cls, self, self.requires_grad)


def _check_cpu(op, self):
    if self.device.type != "cpu":
        raise TypeError(f"{op} is only implemented on CPU tensors")


def _map_in_place(self, function, *others):
    k = _kiln()
    others = [o.broadcast_to(self.shape) for o in others]
    columns = [self.reshape(-1).tolist()] + [o.reshape(-1).tolist() for o in others]
    values = [function(*items) for items in zip(*columns)]
    with k.no_grad():
        return self.copy_(k.tensor(values, dtype=self.dtype).reshape(self.shape) if values else self)


def apply_(self, callable):
    """Replaces each element x by callable(x) (Python numbers; slow: CPU only)."""
    _check_cpu("apply_", self)
    return _map_in_place(self, callable)


def map_(self, tensor, callable):
    """self[i] = callable(self[i], tensor[i]), tensor broadcast to self's shape."""
    _check_cpu("map_", self)
    return _map_in_place(self, callable, tensor)


def map2_(self, x, y, callable):
    _check_cpu("map2_", self)
    return _map_in_place(self, callable, x, y)


def dim_order(self, *, ambiguity_check=False):
    """The dimensions from outermost to innermost in memory (largest stride first; ties keep order)."""
    return tuple(sorted(range(self.dim()), key=lambda d: -self.stride(d)))


def _false(self):
    return False


def install_methods(tensor_class):
    for function in (cfloat, cdouble, __complex__, conj_physical_, exponential_, geometric_, cauchy_, log_normal_,
                     index_reduce, index_reduce_, as_subclass, apply_, map_, map2_, dim_order):
        setattr(tensor_class, function.__name__, function)
    # accelerators kiln does not have: every kiln tensor is on the cpu
    for name in ("is_mps", "is_xla", "is_xpu", "is_ipu", "is_maia", "is_mtia", "is_nested"):
        setattr(tensor_class, name, property(_false))
