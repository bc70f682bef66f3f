"""Order statistics (issue 17): median, nanmedian, quantile, nanquantile, mode, cummax
and cummin, composed from sort, gather and pointwise ops as PyTorch's own quantile is.

The rule that makes values, indices and gradients agree with PyTorch 2.13:
  * which element is chosen comes from a *stable* sort of the detached input (NaN sorts last), so
    ties pick the element PyTorch's CPU kernels pick: median the one at the stable sorted position
    (nanmedian of an all-NaN row: the first NaN, where PyTorch's is whichever std::nth_element
    leaves); mode the last occurrence of the most frequent value (PyTorch's insertion sort does that
    for rows of up to 16 elements; longer rows follow std::sort's unstable order there);
    cummax/cummin the latest index of the running extreme;
  * the values are then `input.gather(dim, indices)`, whose backward scatters the gradient to the
    chosen element: PyTorch's value_selecting_reduction_backward / cummaxmin_backward;
  * the full reductions median() and nanmedian() spread the gradient evenly over every element equal
    to the result, as PyTorch's evenly_distribute_backward (see _spread_gradient).
Only shapes known before the data are produced, so these trace under fake tensors and compile with
no graph break (a tensor q's range check reads values, and is skipped under fake tensors).
"""

import builtins
import math
import numbers

from kiln import _C, return_types
from kiln._composites import _is_fake, _kiln, _wrap_dim
from kiln.amp.autocast_mode import float32_under_autocast as _float32_under_autocast

__all__ = ["median", "nanmedian", "quantile", "nanquantile", "mode", "cummax", "cummin"]


def _reduced_shape(shape, dim, keepdim):
    shape = list(shape)
    if keepdim:
        shape[dim] = 1
    else:
        del shape[dim]
    return shape


def _check_not_bool(kernel, input):
    if input.dtype == _C.bool:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def _check_reduced_size(op, input, dim):
    if input.ndim and input.shape[dim] == 0:
        raise IndexError(f"{op}(): Expected reduction dim {dim} to have non-zero size.")


# --- median, nanmedian ----------------------------------------------------------------------
def _spread_gradient(input, value, ignore_nan):
    """`value` (chosen from the detached input) with PyTorch's gradient for a full median: the output
    gradient divided evenly among the elements equal to the result (or among the NaNs when it is
    NaN). The forward value is exactly `value`: it adds a sum of `input - value` over those elements,
    which is zero. A non-finite result keeps a zero gradient (inf - inf would be NaN)."""
    k = _kiln()
    chosen = (input == value) | (input.isnan() & value.isnan())
    share = k.where(chosen, input - value, k.zeros((), dtype=input.dtype, device=input.device)).sum() / chosen.sum()
    return k.where(value.isfinite(), value + share, value)


def _median_all(op, input, ignore_nan):
    k = _kiln()
    _check_not_bool(f"{op}_cpu", input)
    flat = input.reshape(-1)
    n = flat.numel()
    if n == 0:  # PyTorch: NaN (converted to the input's dtype), with a zero-size gradient
        if input.dtype.is_floating_point:
            return flat.sum() + math.nan
        return k.full((), math.nan, dtype=_C.float32, device=input.device).to(input.dtype)
    ordered = flat.detach().sort(stable=True).values
    position = _median_position(ordered, 0, ignore_nan)
    value = ordered.gather(0, position).reshape(())
    if input.requires_grad and k.is_grad_enabled():
        return _spread_gradient(input, value, ignore_nan)
    return value


def _median_position(ordered, dim, ignore_nan):
    """The position (keepdim-shaped, int64) of the lower median in each row of a stably sorted
    tensor: a row holding NaN gives its first NaN (median) or the median of the rest (nanmedian;
    position 0, a NaN, when all are NaN)."""
    k = _kiln()
    n = ordered.shape[dim]
    if not ordered.dtype.is_floating_point:
        return k.full(_reduced_shape(ordered.shape, dim, True), (n - 1) // 2, dtype=_C.int64, device=ordered.device)
    nans = ordered.isnan().sum(dim, keepdim=True)
    if ignore_nan:
        return ((n - nans - 1) // 2).clamp(min=0)
    return k.where(nans > 0, n - nans, k.full_like(nans, (n - 1) // 2))


def _median_dim(op, result_type, input, dim, keepdim, ignore_nan):
    k = _kiln()
    dim = _wrap_dim(dim, input.ndim)
    _check_not_bool(f"{op}_out", input)
    if input.ndim == 0:
        return result_type((input.clone(), k.zeros((), dtype=_C.int64, device=input.device)))
    _check_reduced_size("median", input, dim)  # nanmedian's message says median() too, as PyTorch's
    ordered, order = input.detach().sort(dim=dim, stable=True)
    indices = order.gather(dim, _median_position(ordered, dim, ignore_nan))
    values = input.gather(dim, indices)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return result_type((values, indices))


def median(input, dim=None, keepdim=False):
    """The lower median of all elements (a 0-d tensor, NaN if any is NaN), or along `dim` as
    (values, indices). Ties choose the element at the stable sorted position, as PyTorch's CPU kernel."""
    if dim is None:
        return _median_all("median", input, ignore_nan=False)
    return _median_dim("median", return_types.median, input, dim, keepdim, ignore_nan=False)


def nanmedian(input, dim=None, keepdim=False):
    """median that ignores NaNs (NaN only where all are NaN)."""
    if dim is None:
        return _median_all("nanmedian", input, ignore_nan=True)
    return _median_dim("nanmedian", return_types.nanmedian, input, dim, keepdim, ignore_nan=True)


# --- quantile, nanquantile ----------------------------------------------------------------------
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(op, input, q, dim, keepdim, interpolation, ignore_nan):
    """PyTorch's quantile_compute: sort each row, turn q into fractional ranks, gather the values
    below and above and interpolate (lerp, so the gradient reaches both neighbours and q)."""
    k = _kiln()
    if input.numel() == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    if isinstance(q, k.Tensor) and q.ndim > 1:
        raise RuntimeError(f"{op}() q must be a scalar or 1D tensor")
    if input.dtype not in (_C.float32, _C.float64):
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype")
    if isinstance(q, k.Tensor):
        if q.dtype != input.dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor")
        if not _is_fake(q) and q.numel() and not builtins.bool(((q >= 0) & (q <= 1)).all().item()):
            raise RuntimeError(f"{op}() q values must be in the range [0, 1]")
    else:
        if not isinstance(q, numbers.Real):
            raise TypeError(f"{op}(): argument 'q' must be float or Tensor, not {type(q).__name__}")
        if not 0 <= q <= 1:
            raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {q:g}")
        q = k.scalar_tensor(q, dtype=input.dtype, device=input.device)
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    # rows to reduce, last: (*kept, n), kept holding the keepdim 1s
    if dim is None or input.ndim == 0:
        kept = [1] * input.ndim if keepdim else []
        rows = input.reshape(kept + [-1])
    else:
        dim = _wrap_dim(dim, input.ndim)
        kept = _reduced_shape(input.shape, dim, keepdim)
        rows = input.movedim(dim, -1).reshape(kept + [input.shape[dim]])
    ordered = rows.sort(-1).values
    last = ordered.shape[-1] - 1
    nans = ordered.isnan()
    q_row = q.reshape(-1)  # ranks are (*kept, len(q))
    if ignore_nan:
        ranks = q_row * ((~nans).sum(-1, keepdim=True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        ranks = (q_row * last).expand(kept + [q_row.shape[0]])
        ranks = ranks.masked_fill(nans.any(-1, keepdim=True), last)
    ranks = {"lower": ranks.floor, "higher": ranks.ceil, "nearest": ranks.round}.get(interpolation, lambda: ranks)()
    below = ranks.to(_C.int64)
    values = ordered.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weights = k.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below
        values = values.lerp(ordered.gather(-1, ranks.ceil().to(_C.int64)), weights)
    return values.squeeze(-1) if q.ndim == 0 else values.movedim(-1, 0)


@_float32_under_autocast
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles of `input` (flattened, or along `dim`); a 1-D q puts its quantiles first."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


@_float32_under_autocast
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaNs (NaN only where a row is all NaN)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


# --- mode ---------------------------------------------------------------------------------------
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along `dim` (the smallest among equally frequent ones) and the index
    of its last occurrence, as PyTorch's CPU kernel returns for rows of up to 16 elements."""
    k = _kiln()
    dim = _wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        return return_types.mode((input.clone(), k.zeros((), dtype=_C.int64, device=input.device)))
    _check_reduced_size("mode", input, dim)
    rows = input.detach().movedim(dim, -1)
    ordered, order = rows.sort(dim=-1, stable=True)
    n = ordered.shape[-1]
    # runs of equal values in each sorted row: run ids, and each element's run length
    starts = k.cat([k.ones_like(ordered.narrow(-1, 0, 1), dtype=_C.bool),
                    ordered.narrow(-1, 1, n - 1) != ordered.narrow(-1, 0, n - 1)], -1)
    run = starts.to(_C.int64).cumsum(-1) - 1
    run_length = k.zeros_like(run).scatter_add(-1, run, k.ones_like(run)).gather(-1, run)
    # the first (smallest) most frequent run, then its last element (the latest original index)
    first_best = (run_length == run_length.amax(-1, keepdim=True)).to(_C.int64).argmax(-1, keepdim=True)
    last_of_run = (run <= run.gather(-1, first_best)).sum(-1, keepdim=True) - 1
    indices = order.gather(-1, last_of_run).movedim(-1, dim)
    values = input.gather(dim, indices)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return return_types.mode((values, indices))


# --- cummax, cummin -----------------------------------------------------------------------------
def _cumulative_extreme(op, result_type, input, dim, later_wins):
    """A running max/min along `dim` as a Hillis-Steele scan (log2(n) steps over shifted halves) of
    (value, index) pairs; `later_wins(later, earlier)` says when the later element replaces the
    running one (ties and NaN: the later, as PyTorch's kernel). The values are gathered from the input."""
    k = _kiln()
    dim = _wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        return result_type((input.clone(), k.zeros((), dtype=_C.int64, device=input.device)))
    values = input.detach()
    n = values.shape[dim]
    position = [1] * input.ndim
    position[dim] = n
    indices = k.arange(n, dtype=_C.int64, device=values.device).reshape(position).expand(values.shape)
    step = 1
    while step < n:
        earlier_v, later_v = values.narrow(dim, 0, n - step), values.narrow(dim, step, n - step)
        earlier_i, later_i = indices.narrow(dim, 0, n - step), indices.narrow(dim, step, n - step)
        take_later = later_wins(later_v, earlier_v)
        values = k.cat([values.narrow(dim, 0, step), k.where(take_later, later_v, earlier_v)], dim)
        indices = k.cat([indices.narrow(dim, 0, step), k.where(take_later, later_i, earlier_i)], dim)
        step *= 2
    indices = indices.contiguous()
    return result_type((input.gather(dim, indices), indices))


def _nan_first(compare):
    def later_wins(later, earlier):
        if not later.dtype.is_floating_point:
            return compare(later, earlier)
        return later.isnan() | (~earlier.isnan() & compare(later, earlier))

    return later_wins


def cummax(input, dim):
    """The running maximum along `dim` and the index where it was (the latest on ties; NaN propagates)."""
    return _cumulative_extreme("cummax", return_types.cummax, input, dim, _nan_first(lambda a, b: a >= b))


def cummin(input, dim):
    """The running minimum along `dim` and the index where it was (the latest on ties; NaN propagates)."""
    return _cumulative_extreme("cummin", return_types.cummin, input, dim, _nan_first(lambda a, b: a <= b))
