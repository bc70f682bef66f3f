"""PyTorch's small creation and numeric utilities that kiln composes from its own ops (issue 17):
logspace, range (deprecated), asarray, frombuffer, cartesian_prod, combinations, block_diag, vander,
row_stack, unravel_index, trapezoid/trapz/cumulative_trapezoid, histogram, isin, chain_matmul, the
deprecated LU and triangular-solve names (lu, lu_unpack, triangular_solve), detach(_), is_inference,
the unsafe_ split family, empty_permuted, nonzero_static and typename.

Each follows aten's composition where aten has one (Integration.cpp's trapezoid, vander's cumprod,
cartesian_prod's meshgrid, chain_matmul's multi_dot) and torch/functional.py where PyTorch writes it
in Python (unravel_index, block_diag's checks, lu). Shapes never depend on data, except frombuffer's
and asarray's on their host objects: combinations picks its index tuples in Python from the static
length, isin searches a sorted copy of the test elements, histogram counts through searchsorted and
scatter_add, so all of them compile without a graph break.
"""

import builtins
import itertools
import math
import numbers
import operator
import warnings

from kiln import _C, return_types
from kiln._composites import _kiln, _type_name, _wrap_dim

__all__ = ["logspace", "range", "asarray", "frombuffer", "cartesian_prod", "combinations", "block_diag", "vander",
           "row_stack", "unravel_index", "trapezoid", "trapz", "cumulative_trapezoid", "histogram", "isin",
           "chain_matmul", "lu", "lu_unpack", "triangular_solve", "detach", "detach_", "is_inference", "unsafe_chunk",
           "unsafe_split", "unsafe_split_with_sizes", "empty_permuted", "nonzero_static", "typename"]


def _result(value, out):
    return value if out is None else out.copy_(value)


def _finish(value, requires_grad):
    return value.requires_grad_(True) if requires_grad else value


def _number(value):
    return value.item() if isinstance(value, _kiln().Tensor) else value


# --- creation -----------------------------------------------------------------------------------
def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """base ** linspace(start, end, steps): the exponents and powers in float64, rounded once to dtype
    (aten computes each power in the output type; the two agree to the last place or one ulp)."""
    k = _kiln()
    start, end = _number(start), _number(end)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = dtype or (out.dtype if out is not None else _C.get_default_dtype())
    exponents = k.linspace(float(start), float(end), steps, dtype=_C.float64)
    value = k.pow(k.full((), float(base), dtype=_C.float64), exponents)
    value = value.to(dtype) if dtype.is_floating_point or dtype.is_complex else value.trunc().to(dtype)
    return _finish(_result(value, out), requires_grad)


_RANGE_WARNING = ("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).")


def range(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The deprecated torch.range: start, start + step, ... up to and including end, in the default
    float dtype unless dtype says otherwise (warns on every call, as torch)."""
    warnings.warn(_RANGE_WARNING, UserWarning, stacklevel=2)
    k = _kiln()
    if end is None:
        raise TypeError("range() missing 1 required positional arguments: \"end\"")
    start, end, step = _number(start), _number(end), _number(step)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    size = int(math.floor((end - start) / step)) + 1
    dtype = dtype or (out.dtype if out is not None else _C.get_default_dtype())
    value = (k.arange(size, dtype=_C.float64) * step + start).to(dtype)
    return _finish(_result(value, out), requires_grad)


def _is_ndarray(obj):
    return type(obj).__name__ == "ndarray"


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor, sharing its memory where it can: a tensor (of the asked dtype) is returned
    itself, a numpy array or buffer is viewed (copy=None/False), other data is copied (copy=False
    refuses it, as torch)."""
    k = _kiln()
    if isinstance(obj, k.Tensor):
        value = obj if dtype is None or obj.dtype == dtype else obj.to(dtype)
        if copy and value is obj:
            value = obj.clone()
        if copy is False and value is not obj:
            raise ValueError(f"can't alias tensor from dtype {_type_name(obj.dtype)} into {_type_name(dtype)}.")
    elif _is_ndarray(obj) or isinstance(obj, (bytes, bytearray, memoryview)):
        import numpy as np

        array = obj if _is_ndarray(obj) else np.frombuffer(obj, dtype=np.uint8)
        # a 0-d array is copied, as PyTorch's asarray copies it (ascontiguousarray made it 1-d)
        value = k.from_numpy(np.ascontiguousarray(array)) if array.flags.writeable and array.ndim else \
            k.tensor(array)
        if copy:
            value = value.clone()
        if dtype is not None and value.dtype != dtype:
            if copy is False:
                raise ValueError(f"can't alias NumPy array from dtype {_type_name(value.dtype)} into "
                                 f"{_type_name(dtype)}.")
            value = value.to(dtype)
    else:
        if copy is False:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        value = k.tensor(obj, dtype=dtype)
    if requires_grad:
        value = value.detach().requires_grad_(True) if value is obj else value.requires_grad_(True)
    return value


_frombuffer_warned = False


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor over a Python buffer's memory (shared, never copied) read as `dtype` from byte
    `offset` on, `count` elements (-1: as many as fit)."""
    global _frombuffer_warned
    import numpy as np

    k = _kiln()
    view = memoryview(buffer)
    length = view.nbytes
    element_size = k.empty(0, dtype=dtype).element_size()
    if length <= 0:
        raise ValueError("both buffer length (0) and count (-1) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({length} bytes) minus 1")
    if count < 0 and (length - offset) % element_size != 0:
        raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} bytes) must be a multiple "
                         f"of element size ({element_size})")
    if count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if count > 0 and offset + count * element_size > length:
        raise ValueError(f"requested buffer length ({count} * {element_size} bytes) after offset ({offset} bytes) "
                         f"must not be greater than actual buffer length ({length} bytes)")
    if view.readonly and not _frombuffer_warned:
        _frombuffer_warned = True
        warnings.warn("The given buffer is not writable, and PyTorch does not support non-writable tensors. This "
                      "means you can write to the underlying (supposedly non-writable) buffer using the tensor. You "
                      "may want to copy the buffer to protect its data or make it writable before converting it to "
                      "a tensor. This type of warning will be suppressed for the rest of this program.",
                      UserWarning, stacklevel=2)
    raw = np.frombuffer(buffer, dtype=np.uint8, count=-1 if count < 0 else count * element_size, offset=offset)
    # A read-only buffer (bytes) is copied: kiln tensors are always writable (torch shares it anyway).
    value = k.from_numpy(raw if raw.flags.writeable else raw.copy()).view(dtype)
    return _finish(value, requires_grad)


# --- combinatorics --------------------------------------------------------------------------------
def cartesian_prod(*tensors):
    """All tuples of one element from each 1-D tensor, as the rows of a (prod(n_i), len) tensor (one
    tensor: that tensor itself)."""
    k = _kiln()
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = k.meshgrid(*tensors, indexing="ij")
    return k.stack([g.flatten() for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a 1-D tensor's elements, in itertools' order, as rows."""
    k = _kiln()
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return input.new_empty(0)
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(builtins.range(input.shape[0]), r))
    if not rows:
        return input.new_empty((0, r))
    index = k.tensor(rows, dtype=_C.int64)
    return input.index_select(0, index.flatten()).reshape(len(rows), r)


def block_diag(*tensors):
    """The tensors (0-D as 1x1, 1-D as one row) down the diagonal of a zero matrix of their promoted dtype."""
    k = _kiln()
    matrices = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.dim()} dimensions")
        matrices.append(t.reshape(1, -1) if t.dim() < 2 else t)
    dtype = matrices[0].dtype if matrices else _C.get_default_dtype()
    for m in matrices[1:]:
        dtype = _C.promote_types(dtype, m.dtype)
    rows = builtins.sum(m.shape[0] for m in matrices)
    cols = builtins.sum(m.shape[1] for m in matrices)
    parts, col = [], 0
    for m in matrices:  # each block padded with zeros left and right to the full width
        left, right = col, cols - col - m.shape[1]
        parts.append(k.nn.functional.pad(m.to(dtype), (left, right)) if m.shape[0] else m.to(dtype).new_zeros((0, cols)))
        col += m.shape[1]
    return k.cat(parts, 0) if parts else k.zeros((rows, cols), dtype=dtype)


def vander(x, N=None, increasing=False):
    """Columns x^(N-1), ..., x^0 (increasing: x^0 first) by aten's cumulative product; integer and
    bool x give int64."""
    k = _kiln()
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    dtype = _C.promote_types(x.dtype, _C.int64)
    ones = k.ones((x.shape[0], builtins.min(n, 1)), dtype=dtype)
    if n > 1:
        powers = x.to(dtype).unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1)
        result = k.cat([ones, powers], 1)
    else:
        result = ones
    return result if increasing else result.flip(1)


def row_stack(tensors, *, out=None):
    """torch's alias of vstack."""
    return _result(_kiln().vstack(tensors), out)


def unravel_index(indices, shape):
    """The coordinates (a tuple of tensors) of flat `indices` in a tensor of `shape` (torch/functional.py)."""
    k = _kiln()
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == _C.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, numbers.Integral):
        shape = (int(shape),)
    elif isinstance(shape, (list, tuple)):
        for dim in shape:
            if not isinstance(dim, numbers.Integral):
                raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(dim)}")
        shape = tuple(int(d) for d in shape)
    else:
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    if any(dim < 0 for dim in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {tuple(shape)}")
    strides = list(reversed(list(itertools.accumulate(reversed(shape[1:] + (1,)), func=operator.mul))))
    coordinates = indices.unsqueeze(-1).floor_divide(k.tensor(strides, dtype=_C.int64)) % k.tensor(shape,
                                                                                                    dtype=_C.int64)
    return coordinates.unbind(-1)


# --- integration (aten's Integration.cpp) ---------------------------------------------------------------
def _zeros_except(y, dim):
    shape = list(y.shape)
    del shape[dim]
    return _kiln().zeros(shape, dtype=y.dtype)


def _spacing(op, y, x, dim):
    """x's differences along dim, viewed to broadcast against y's slices."""
    if x.dim() == 1:
        if x.shape[0] != y.shape[dim]:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point")
        shape = [1] * y.dim()
        shape[dim] = x.shape[0]
        x = x.view(shape)
    elif x.dim() < y.dim():
        x = x.view((1,) * (y.dim() - x.dim()) + tuple(x.shape))
    n = x.shape[dim]
    return x.narrow(dim, 1, n - 1) - x.narrow(dim, 0, n - 1)


def _check_real_dx(op, dx):
    if isinstance(dx, (bool, complex)):
        raise RuntimeError(f"{op}: Currently, we only support dx as a real number.")


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim: with sample points x (a tensor) or spacing dx (default 1)."""
    k = _kiln()
    dim = _wrap_dim(dim, y.dim())
    if x is not None and dx is not None:
        raise TypeError("trapezoid() received an invalid combination of arguments: both x and dx were given")
    if x is not None and isinstance(x, k.Tensor):
        if y.shape[dim] == 0:
            return _zeros_except(y, dim)
        if y.dtype == _C.bool or x.dtype == _C.bool:
            raise RuntimeError("trapezoid: received a bool input for `x` or `y`, but bool is not supported")
        n = y.shape[dim]
        sums = y.narrow(dim, 1, n - 1) + y.narrow(dim, 0, n - 1)
        return (_spacing("trapezoid", y, x, dim) * sums).sum(dim) / 2.0
    dx = 1 if dx is None and x is None else (dx if dx is not None else x)
    if y.shape[dim] == 0:
        return _zeros_except(y, dim)
    if y.dtype == _C.bool:
        raise RuntimeError("trapezoid: received a bool input for `y`, but bool is not supported")
    _check_real_dx("trapezoid", dx)
    ends = y.select(dim, 0) + y.select(dim, -1)
    return (y.sum(dim) - ends * 0.5) * float(dx)


def trapz(y, x=None, *, dx=None, dim=-1):
    """torch's older name of trapezoid."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral along dim (one element fewer than y there)."""
    k = _kiln()
    dim = _wrap_dim(dim, y.dim())
    n = y.shape[dim]
    if x is not None and isinstance(x, k.Tensor):
        if y.dtype == _C.bool or x.dtype == _C.bool:
            raise RuntimeError("cumulative_trapezoid: received a bool input for `x` or `y`, but bool is not supported")
        spacing = _spacing("cumulative_trapezoid", y, x, dim)
        sums = y.narrow(dim, 1, builtins.max(n - 1, 0)) + y.narrow(dim, 0, builtins.max(n - 1, 0))
        return (sums * spacing).cumsum(dim) / 2.0
    dx = 1 if dx is None and x is None else (dx if dx is not None else x)
    if y.dtype == _C.bool:
        raise RuntimeError("cumulative_trapezoid: received a bool input for `y`, but bool is not supported")
    _check_real_dx("cumulative_trapezoid", dx)
    sums = y.narrow(dim, 1, builtins.max(n - 1, 0)) + y.narrow(dim, 0, builtins.max(n - 1, 0))
    return (float(dx) / 2.0 * sums).cumsum(dim)


# --- histogram, isin --------------------------------------------------------------------------------
def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges) of input's values: `bins` equal bins over `range` (default: the data's min
    and max, widened by 1/2 each way when equal) or the given increasing edges. Each value counts in
    the bin whose edges hold it, the last bin closed; values outside count nowhere."""
    k = _kiln()
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{_type_name(input.dtype)}'")
    if isinstance(bins, k.Tensor):
        if bins.dtype != input.dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, but got "
                               f"input with dtype {_type_name(input.dtype).lower()} and bins for dimension 0 with "
                               f"dtype {_type_name(bins.dtype).lower()}")
        edges = bins
    else:
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        if range is not None:
            low, high = float(range[0]), float(range[1])
        elif input.numel() > 0:
            low, high = input.min().item(), input.max().item()
        else:
            low, high = 0.0, 0.0
        if low > high:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {low:g} max {high:g} for "
                               "dimension 0")
        if low == high:
            low, high = low - 0.5, high + 0.5
        edges = k.linspace(low, high, bins + 1, dtype=input.dtype)
    values = input.reshape(-1)
    num_bins = edges.shape[0] - 1
    position = k.searchsorted(edges, values, right=True) - 1
    position = k.where(values == edges[-1], num_bins - 1, position)  # the last bin is closed
    inside = (position >= 0) & (position < num_bins) & ~values.isnan()
    counts = weight.reshape(-1).to(input.dtype) if weight is not None else k.ones_like(values)
    hist = k.zeros(num_bins, dtype=input.dtype).scatter_add(0, position.clamp(0, builtins.max(num_bins - 1, 0)),
                                                            k.where(inside, counts, 0.0))
    if density:
        widths = edges[1:] - edges[:-1]
        hist = hist / (hist.sum() * widths)
    result = return_types.histogram((hist, edges.clone() if edges is bins else edges))
    if out is not None:
        out[0].copy_(result[0])
        out[1].copy_(result[1])
        return return_types.histogram(tuple(out))
    return result


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of elements occurs in test_elements (a binary search of their sorted copy; NaN
    matches nothing). Either side may be a Python number."""
    k = _kiln()
    if not isinstance(elements, k.Tensor) and not isinstance(test_elements, k.Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got ({type(elements).__name__}, "
                        f"{type(test_elements).__name__}), but expected one of:\n"
                        " * (Tensor elements, Tensor test_elements, *, bool assume_unique = False, bool invert = "
                        "False, Tensor out = None)\n"
                        " * (Number element, Tensor test_elements, *, bool assume_unique = False, bool invert = "
                        "False, Tensor out = None)\n"
                        " * (Tensor elements, Number test_element, *, bool assume_unique = False, bool invert = "
                        "False, Tensor out = None)\n")
    if not isinstance(test_elements, k.Tensor):
        found = elements == test_elements
        return ~found if invert else found
    if not isinstance(elements, k.Tensor):
        elements = k.tensor(elements, dtype=k.result_type(test_elements, elements))
    dtype = _C.promote_types(elements.dtype, test_elements.dtype)
    candidates = test_elements.reshape(-1).to(dtype).sort().values
    values = elements.to(dtype)
    if candidates.numel() == 0:
        found = k.zeros(values.shape, dtype=_C.bool)
    else:
        # sort puts NaNs last, where they would derail the binary search: it runs over them as +inf,
        # and the comparison with the real candidate keeps a NaN from matching an inf
        searchable = k.where(candidates.isnan(), math.inf, candidates) if dtype.is_floating_point else candidates
        place = k.searchsorted(searchable, values.reshape(-1)).clamp(max=candidates.numel() - 1)
        found = (candidates[place] == values.reshape(-1)).reshape(values.shape)
    return ~found if invert else found


# --- matrices -------------------------------------------------------------------------------------
_chain_matmul_warned = False


def chain_matmul(*matrices, out=None):
    """The product of 2-D matrices in the cheapest order (deprecated: linalg.multi_dot; warns once)."""
    global _chain_matmul_warned
    from kiln._settings import is_warn_always_enabled

    k = _kiln()
    if not _chain_matmul_warned or is_warn_always_enabled():
        _chain_matmul_warned = True
        warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                      "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                      "multiple parameters.", UserWarning, stacklevel=2)
    if len(matrices) == 0:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    value = matrices[0].clone() if len(matrices) == 1 else k.linalg.multi_dot(list(matrices))
    return _result(value, out)


_lu_warned = False


def lu(A, pivot=True, get_infos=False, out=None):
    """The deprecated torch.lu: (LU, pivots[, infos]) of linalg.lu_factor_ex (warns once)."""
    global _lu_warned
    from kiln._settings import is_warn_always_enabled

    k = _kiln()
    if not _lu_warned or is_warn_always_enabled():
        _lu_warned = True
        warnings.warn("torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will "
                      "be removed in a future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be "
                      "replaced with\nLU, pivots = torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = "
                      "torch.lu(A, compute_pivots, get_infos=True)\nshould be replaced with\nLU, pivots, info = "
                      "torch.linalg.lu_factor_ex(A, compute_pivots)", UserWarning, stacklevel=2)
    LU, pivots, infos = k.linalg.lu_factor_ex(A, pivot=pivot)
    result = (LU, pivots, infos) if get_infos else (LU, pivots)
    if out is not None:
        for target, value in zip(out, result):
            target.resize_(value.shape).copy_(value)
        return tuple(out)
    return result


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) with A = P @ L @ U from lu_factor's compact LU and LAPACK's 1-based row swaps; a part
    not unpacked is an empty tensor."""
    k = _kiln()
    if LU_data.dim() < 2:
        raise RuntimeError(f"torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(LU_data.shape)} instead")
    if LU_pivots.dtype != _C.int32:
        raise RuntimeError(f"torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype. "
                           f"Got: {LU_pivots.dtype}")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    kk = builtins.min(m, n)
    empty = LU_data.new_empty(0)
    if unpack_data:
        L = LU_data[..., :, :kk].tril(-1) + k.eye(m, kk, dtype=LU_data.dtype)
        U = LU_data[..., :kk, :].triu()
    else:
        L = U = empty
    if unpack_pivots:
        batch = tuple(LU_pivots.shape[:-1])
        # the row order after LAPACK's swaps, one swap (a gather and two scatters) per pivot
        order = k.arange(m, dtype=_C.int64).expand(batch + (m,)).clone()
        swaps = LU_pivots.to(_C.int64) - 1
        for i in builtins.range(LU_pivots.shape[-1]):
            j = swaps[..., i:i + 1]
            at_i, at_j = order[..., i:i + 1].clone(), order.gather(-1, j)
            order = order.scatter(-1, j, at_i)
            order[..., i:i + 1] = at_j
        P = k.eye(m, dtype=LU_data.dtype)[order].mT
    else:
        P = empty
    result = return_types.lu_unpack((P, L, U))
    if out is not None:
        for target, value in zip(out, result):
            target.resize_(value.shape).copy_(value)
        return return_types.lu_unpack(tuple(out))
    return result


_triangular_solve_warned = False


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """(X, A's copy) with op(A) X = b, op(A) = A or its transpose (deprecated: linalg.solve_triangular;
    warns once). Both broadcast over the batch dimensions."""
    global _triangular_solve_warned
    from kiln._settings import is_warn_always_enabled

    k = _kiln()
    if not _triangular_solve_warned or is_warn_always_enabled():
        _triangular_solve_warned = True
        warnings.warn("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be "
                      "removed in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed "
                      "and does not return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\n"
                      "should be replaced with\nX = torch.linalg.solve_triangular(A, B).", UserWarning, stacklevel=2)
    if b.dim() < 2 or A.dim() < 2:
        raise RuntimeError(f"torch.triangular_solve: Expected b to have at least 2 dimensions, but it has {b.dim()} "
                           "dimensions instead" if b.dim() < 2 else
                           f"torch.triangular_solve: Expected A to have at least 2 dimensions, but it has {A.dim()} "
                           "dimensions instead")
    batch = k.broadcast_shapes(tuple(b.shape[:-2]), tuple(A.shape[:-2]))
    A_full = A.expand(tuple(batch) + tuple(A.shape[-2:]))
    coefficient = A_full.mT if transpose else A_full
    solution = k.linalg.solve_triangular(coefficient, b.expand(tuple(batch) + tuple(b.shape[-2:])),
                                         upper=upper != transpose, unitriangular=unitriangular)
    result = return_types.triangular_solve((solution, A_full.clone()))
    if out is not None:
        for target, value in zip(out, result):
            target.resize_(value.shape).copy_(value)
        return return_types.triangular_solve(tuple(out))
    return result


# --- autograd and split forms ----------------------------------------------------------------------
def detach(input):
    return input.detach()


def detach_(input):
    return input.detach_()


def is_inference(input):
    if not isinstance(input, _kiln().Tensor):
        raise TypeError(f"is_inference(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    return input.is_inference()


def unsafe_chunk(input, chunks, dim=0):
    """chunk's pieces (torch's unsafe_ forms skip the views' shared version counter; kiln's pieces are
    chunk's views)."""
    return tuple(input.chunk(chunks, dim))


def unsafe_split(input, split_size, dim=0):
    return tuple(input.split(split_size, dim))


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    return tuple(input.split_with_sizes(split_sizes, dim))


def install_methods(tensor_class):
    """Tensor.histogram, lu, triangular_solve and the unsafe_ split forms (self first; torch has no
    Tensor.isin)."""
    def triangular_solve_method(self, A, upper=True, transpose=False, unitriangular=False):
        return triangular_solve(self, A, upper, transpose, unitriangular)

    def lu_method(self, pivot=True, get_infos=False):
        return lu(self, pivot, get_infos)

    tensor_class.triangular_solve = triangular_solve_method
    tensor_class.lu = lu_method
    for name in ("histogram", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes"):
        setattr(tensor_class, name, globals()[name])


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialized tensor of logical `size` whose dims lie in memory in the order
    `physical_layout` gives, outermost first: the dense tensor of the permuted sizes, permuted back
    (aten's empty_permuted)."""
    k = _kiln()
    size, physical_layout = list(size), list(physical_layout)
    if len(size) != len(physical_layout):
        raise RuntimeError("Number of dimensions in size does not match the length of the physical_layout; i.e. "
                           f"len(size) = {len(size)} is not equal to len(physical_layout) = {len(physical_layout)}")
    seen = set()
    for i, d in enumerate(physical_layout):
        if not 0 <= d < len(size):
            raise RuntimeError(f"Dimension out of range (expected to be between 0 and {len(size) - 1}, but got {d} at "
                               f"index {i}).  NB: negative dims not currently supported; file an issue if you want it.")
        if d in seen:
            raise RuntimeError("Duplicate dim not allowed")
        seen.add(d)
    inverse = [0] * len(size)
    for i, d in enumerate(physical_layout):
        inverse[d] = i
    dense = k.empty([size[d] for d in physical_layout], dtype=dtype, layout=layout, device=device,
                    pin_memory=pin_memory)
    out = dense.permute(inverse) if size else dense
    return out.requires_grad_(requires_grad) if requires_grad else out


def nonzero_static(input, *, size, fill_value=-1):
    """The first `size` rows of input.nonzero() (int64 coordinates, row-major order), padded with
    `fill_value`: a static shape, so compiled code needs no data-dependent size. The rank of each
    nonzero element (a cumulative sum) picks its row; the rest go to a discarded slot."""
    k = _kiln()
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    size = int(size)
    shape = list(input.shape)
    if not shape:
        return k.empty((size, 0), dtype=k.int64, device=input.device)
    flat = (input != 0).reshape(-1)
    rank = flat.to(k.int64).cumsum(0) - 1
    slot = k.where(flat & (rank < size), rank, size)
    picked = k.full((size + 1,), -1, dtype=k.int64, device=input.device)
    picked = picked.scatter(0, slot, k.arange(flat.numel(), device=input.device))[:size]
    coords, rest = [], picked.clamp(min=0)
    for n in reversed(shape):
        coords.append(rest % n if n else rest)
        rest = rest // n if n else rest
    out = k.stack(coords[::-1], 1)
    return k.where((picked >= 0).unsqueeze(1), out, k.full((), fill_value, dtype=k.int64, device=input.device))


def typename(obj):
    """The type of `obj` as PyTorch names it: a tensor's type() ("torch.FloatTensor"), else the
    module and qualified name of its class (of itself, for a class or function)."""
    k = _kiln()
    if isinstance(obj, k.Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"
