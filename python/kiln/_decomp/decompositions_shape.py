"""Decompositions of the factories, views and shape ops, indexing wrappers and random ops."""

import kiln
from kiln._decomp import register_decomposition
from kiln._decomp.decompositions import broadcast_shape, numel, scalar, to_dtype
from kiln._ops import ops

aten = ops.aten



def _wrap(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _is_contiguous_format(memory_format):
    return memory_format is not None and getattr(memory_format, "_kiln_enum", None) == 0 and \
        getattr(memory_format, "_kiln_enum_kind", None) == "memory_format"


# --- factories -------------------------------------------------------------------------------

def _fill(size, value, dtype, layout, device, pin_memory):
    return aten.full.default(list(size), value, dtype=dtype or kiln.get_default_dtype(), layout=layout,
                             device=device, pin_memory=pin_memory)


@register_decomposition(aten.zeros.default)
def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _fill(size, 0, dtype, layout, device, pin_memory)


@register_decomposition(aten.ones.default)
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _fill(size, 1, dtype, layout, device, pin_memory)


@register_decomposition(aten.new_full.default)
def new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _fill(size, fill_value, dtype or self.dtype, layout, device or self.device, pin_memory)


@register_decomposition(aten.new_zeros.default)
def new_zeros(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _fill(size, 0, dtype or self.dtype, layout, device or self.device, pin_memory)


@register_decomposition(aten.new_ones.default)
def new_ones(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _fill(size, 1, dtype or self.dtype, layout, device or self.device, pin_memory)


@register_decomposition(aten.new_empty.default)
def new_empty(self, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.empty.memory_format(list(size), dtype=dtype or self.dtype, layout=layout,
                                    device=device or self.device, pin_memory=pin_memory)


@register_decomposition(aten.lift_fresh_copy.default)
def lift_fresh_copy(self):
    return aten.clone.default(self)


def _dense_strides(x):
    """Strides of a dense tensor laid out in x's stride order (x's own when x is dense)."""
    order = sorted(range(x.dim()), key=lambda d: (x.stride()[d], x.shape[d]), reverse=True)
    strides = [0] * x.dim()
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(x.shape[d], 1)
    return strides


@register_decomposition(aten.empty_like.default)
def empty_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dtype = dtype or self.dtype
    device = device or self.device
    if _is_contiguous_format(memory_format):
        return aten.empty.memory_format(list(self.shape), dtype=dtype, layout=layout, device=device,
                                        pin_memory=pin_memory)
    return aten.empty_strided.default(list(self.shape), _dense_strides(self), dtype=dtype, layout=layout,
                                      device=device, pin_memory=pin_memory)


@register_decomposition(aten.zeros_like.default)
def zeros_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return aten.full_like.default(self, 0, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
                                  memory_format=memory_format)


@register_decomposition(aten.ones_like.default)
def ones_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return aten.full_like.default(self, 1, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory,
                                  memory_format=memory_format)


@register_decomposition(aten.arange.default)
def arange(end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.arange.start_step(0, end, 1, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)


@register_decomposition(aten.arange.start)
def arange_start(start, end, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.arange.start_step(start, end, 1, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)


@register_decomposition(aten.eye.default)
def eye(n, *, dtype=None, layout=None, device=None, pin_memory=None):
    return aten.eye.m(n, n, dtype=dtype, layout=layout, device=device, pin_memory=pin_memory)


@register_decomposition(aten.eye.m)
def eye_m(n, m, *, dtype=None, layout=None, device=None, pin_memory=None):
    rows = aten.arange.start_step(0, n, 1, dtype=kiln.int64, device=device)
    cols = aten.arange.start_step(0, m, 1, dtype=kiln.int64, device=device)
    diag = aten.eq.Tensor(aten.unsqueeze.default(rows, 1), aten.unsqueeze.default(cols, 0))
    return to_dtype(diag, dtype or kiln.get_default_dtype())


_INT_BITS = {kiln.uint8: 8, kiln.int8: 8, kiln.int16: 16, kiln.int32: 32, kiln.int64: 64}


def _cast_int(value, dtype):
    """A Python number cast to an integer dtype as C++ does (truncation, then wrapping)."""
    if dtype == kiln.bool:
        return int(bool(value))
    bits = _INT_BITS[dtype]
    v = int(value) % (1 << bits)
    return v - (1 << bits) if dtype.is_signed and v >= 1 << (bits - 1) else v


@register_decomposition(aten.linspace.default)
def linspace(start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None):
    # The kernel's two-sided form: the first half steps up from start, the rest down from end
    # (integer outputs cast start and end to the dtype first), in float64.
    dtype = dtype or kiln.get_default_dtype()
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    if not dtype.is_floating_point:
        start, end = _cast_int(start, dtype), _cast_int(end, dtype)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    half = 1 if steps == 1 else steps // 2
    i = aten.arange.start_step(0, steps, 1, dtype=kiln.float64, device=device)
    up = aten.add.Scalar(aten.mul.Scalar(i, step), start)
    down = aten.add.Scalar(aten.mul.Scalar(aten.add.Scalar(aten.neg.default(i), steps - 1), -step), end)
    values = aten.where.self(aten.lt.Scalar(i, half), up, down)
    if not dtype.is_floating_point or dtype == kiln.float64:
        return to_dtype(values, dtype)
    return to_dtype(to_dtype(values, kiln.float32), dtype)


# --- views -----------------------------------------------------------------------------------

def _infer_size(shape, total):
    shape = list(shape)
    if -1 in shape:
        i = shape.index(-1)
        rest = numel(shape[:i] + shape[i + 1:])
        if rest == 0 or total % rest:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {total}")
        shape[i] = total // rest
    if numel(shape) != total:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {total}")
    return shape


def view_strides(old_shape, old_strides, new_shape):
    """Strides viewing (old_shape, old_strides) as new_shape, or None when only a copy can."""
    if numel(old_shape) == 0 or len(old_shape) == 0:
        strides, step = [0] * len(new_shape), 1
        for d in reversed(range(len(new_shape))):
            strides[d] = step
            step *= max(new_shape[d], 1)
        return strides
    strides = [0] * len(new_shape)
    # Walk old dims in chunks that are contiguous with one another; each chunk maps onto a run of new dims.
    new_d = len(new_shape) - 1
    chunk_base = old_strides[-1] if old_strides else 1
    tensor_numel, view_numel = 1, 1
    for old_d in reversed(range(len(old_shape))):
        tensor_numel *= old_shape[old_d]
        if old_d == 0 or (old_shape[old_d - 1] != 1 and old_strides[old_d - 1] != tensor_numel * chunk_base):
            while new_d >= 0 and (view_numel < tensor_numel or new_shape[new_d] == 1):
                strides[new_d] = view_numel * chunk_base
                view_numel *= new_shape[new_d]
                new_d -= 1
            if view_numel != tensor_numel:
                return None
            if old_d > 0:
                chunk_base = old_strides[old_d - 1]
                tensor_numel, view_numel = 1, 1
    return strides if new_d == -1 else None


@register_decomposition(aten.reshape.default)
def reshape(self, shape):
    shape = _infer_size(shape, self.numel())
    if view_strides(list(self.shape), list(self.stride()), shape) is not None:
        return aten.view.default(self, shape)
    return aten.view.default(aten.clone.default(self, memory_format=kiln.contiguous_format), shape)


@register_decomposition(aten.view_as.default)
def view_as(self, other):
    return aten.view.default(self, list(other.shape))


@register_decomposition(aten.reshape_as.default)
def reshape_as(self, other):
    return aten.reshape.default(self, list(other.shape))


@register_decomposition(aten.expand_as.default)
def expand_as(self, other):
    return aten.expand.default(self, list(other.shape))


@register_decomposition(aten.transpose.int)
def transpose(self, dim0, dim1):
    perm = list(range(self.dim()))
    if self.dim() == 0:
        _wrap(dim0, 0), _wrap(dim1, 0)
        return aten.permute.default(self, [])
    a, b = _wrap(dim0, self.dim()), _wrap(dim1, self.dim())
    perm[a], perm[b] = perm[b], perm[a]
    return aten.permute.default(self, perm)


@register_decomposition(aten.t.default)
def t(self):
    if self.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
    return aten.permute.default(self, list(reversed(range(self.dim()))))


@register_decomposition(aten.movedim.int)
def movedim(self, source, destination):
    n = self.dim()
    src, dst = _wrap(source, n), _wrap(destination, n)
    order = [d for d in range(n) if d != src]
    order.insert(dst, src)
    return aten.permute.default(self, order if n else [])


@register_decomposition(aten.squeeze.default)
def squeeze(self):
    return aten.squeeze.dims(self, [d for d in range(self.dim()) if self.shape[d] == 1])


@register_decomposition(aten.narrow.default)
def narrow(self, dim, start, length):
    dim = _wrap(dim, self.dim())
    if start < 0:
        start += self.shape[dim]
    if not (0 <= start <= self.shape[dim] and 0 <= length <= self.shape[dim] - start):
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({self.shape[dim]}).")
    return aten.slice.Tensor(self, dim, start, start + length)


@register_decomposition(aten.unfold.default)
def unfold(self, dimension, size, step):
    # The windows are gathered (index_select), not aliased through as_strided: kiln's as_strided
    # backward does not sum overlapping windows, index_select's does.
    if self.dim() == 0:
        if size > 1:
            raise RuntimeError(f"maximum size for tensor at dimension 0 is 1 but size is {size}")
        return aten.view.default(self, [size])
    d = _wrap(dimension, self.dim())
    n = self.shape[d]
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    windows = (n - size) // step + 1
    starts = aten.mul.Scalar(aten.arange.start_step(0, windows, 1, dtype=kiln.int64, device=self.device), step)
    offsets = aten.arange.start_step(0, size, 1, dtype=kiln.int64, device=self.device)
    index = aten.add.Tensor(aten.unsqueeze.default(starts, 1), aten.unsqueeze.default(offsets, 0))
    picked = aten.index_select.default(self, d, aten.view.default(index, [windows * size]))
    shape = list(self.shape)
    picked = aten.view.default(picked, shape[:d] + [windows, size] + shape[d + 1:])
    order = [i for i in range(self.dim() + 1) if i != d + 1] + [d + 1]
    return aten.permute.default(picked, order)


@register_decomposition(aten.flatten.using_ints)
def flatten(self, start_dim=0, end_dim=-1):
    if self.dim() == 0:
        return aten.reshape.default(self, [1])
    s, e = _wrap(start_dim, self.dim()), _wrap(end_dim, self.dim())
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = list(self.shape)
    return aten.reshape.default(self, shape[:s] + [numel(shape[s:e + 1])] + shape[e + 1:])


@register_decomposition(aten.unflatten.int)
def unflatten(self, dim, sizes):
    d = _wrap(dim, self.dim())
    shape = list(self.shape)
    return aten.view.default(self, shape[:d] + _infer_size(sizes, shape[d]) + shape[d + 1:])


# --- conversions -----------------------------------------------------------------------------

def _to(self, dtype, device, copy, memory_format):
    dtype = dtype or self.dtype
    device = device or self.device
    if dtype == self.dtype and kiln.device(device) == self.device and not copy and memory_format is None:
        return self
    return aten._to_copy.default(self, dtype=dtype, device=device, memory_format=memory_format)


@register_decomposition(aten.to.dtype)
def to_dtype_op(self, dtype, non_blocking=False, copy=False, memory_format=None):
    return _to(self, dtype, None, copy, memory_format)


@register_decomposition(aten.to.device)
def to_device(self, device, dtype=None, non_blocking=False, copy=False, memory_format=None):
    return _to(self, dtype, device, copy, memory_format)


@register_decomposition(aten.to.dtype_layout)
def to_dtype_layout(self, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, copy=False,
                    memory_format=None):
    return _to(self, dtype, device, copy, memory_format)


@register_decomposition(aten.to.other)
def to_other(self, other, non_blocking=False, copy=False, memory_format=None):
    return _to(self, other.dtype, other.device, copy, memory_format)


@register_decomposition(aten.type_as.default)
def type_as(self, other):
    return _to(self, other.dtype, None, False, None)


@register_decomposition(aten.contiguous.default)
def contiguous(self, *, memory_format=kiln.contiguous_format):
    if self.is_contiguous():
        return self
    return aten.clone.default(self, memory_format=kiln.contiguous_format)


# --- joining, splitting, indexing ------------------------------------------------------------

@register_decomposition(aten.stack.default)
def stack(tensors, dim=0):
    if len(tensors) == 0:
        raise RuntimeError("stack expects a non-empty TensorList")
    d = _wrap(dim, tensors[0].dim() + 1)
    for i, x in enumerate(tensors):
        if list(x.shape) != list(tensors[0].shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at "
                               f"entry 0 and {list(x.shape)} at entry {i}")
    return aten.cat.default([aten.unsqueeze.default(x, d) for x in tensors], d)


def _split_sizes(n, split_size):
    if split_size == 0:
        return [0] if n == 0 else None
    sizes = [split_size] * (n // split_size)
    if n % split_size or n == 0:
        sizes.append(n % split_size)
    return sizes


@register_decomposition(aten.split.Tensor)
def split(self, split_size, dim=0):
    d = _wrap(dim, self.dim())
    sizes = _split_sizes(self.shape[d], split_size)
    if sizes is None:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of "
                           f"{self.shape[d]}")
    return aten.split_with_sizes.default(self, sizes, d)


@register_decomposition(aten.split.sizes)
def split_sizes(self, split_size, dim=0):
    return aten.split_with_sizes.default(self, split_size, dim)


@register_decomposition(aten.unbind.int)
def unbind(self, dim=0):
    # the slices, as PyTorch's decomposition (autograd above it still records UnbindBackward0)
    d = _wrap(dim, self.dim())
    return [aten.select.int(self, d, i) for i in range(self.shape[d])]


@register_decomposition(aten.chunk.default)
def chunk(self, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _wrap(dim, self.dim())
    n = self.shape[d]
    split_size = (n + chunks - 1) // chunks
    if split_size == 0 and n == 0:
        return aten.split_with_sizes.default(self, [0] * chunks, d)
    return aten.split.Tensor(self, split_size, d)



@register_decomposition(aten.index_add.default)
def index_add(self, dim, index, source, *, alpha=1):
    # An accumulating index_put along `dim` (whole slices elsewhere), in index order as eager adds.
    # A 0-d self is a 1-element vector; alpha takes self's kind as the eager kernel converts it.
    x = self if self.dim() > 0 else aten.view.default(self, [1])
    d = _wrap(dim, x.dim())
    if self.dtype == kiln.bool:
        alpha = bool(alpha)
    elif not self.dtype.is_floating_point:
        alpha = int(alpha)
    values = source if alpha == 1 and type(alpha) is not bool else aten.mul.Scalar(source, alpha)
    shape = list(x.shape)
    shape[d] = numel(index.shape)
    values = aten.reshape.default(values, shape)
    out = aten.index_put.default(x, [None] * d + [aten.reshape.default(index, [-1])], values, True)
    return out if self.dim() > 0 else aten.view.default(out, [])


@register_decomposition(aten.masked_select.default)
def masked_select(self, mask):
    if mask.dtype != kiln.bool:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {mask.dtype}")
    shape = broadcast_shape(list(self.shape), list(mask.shape))
    return aten.index.Tensor(aten.expand.default(self, shape), [aten.expand.default(mask, shape)])


@register_decomposition(aten.where.default)
def where_nonzero(condition):
    nz = aten.nonzero.default(condition)
    if condition.dim() == 0:  # nonzero is [n, 0]: one index tensor of n zeros
        return [aten.sum.dim_IntList(nz, [1])]
    return [aten.select.int(nz, 1, i) for i in range(condition.dim())]


def _triangle(self, diagonal, lower):
    if self.dim() < 2:
        raise RuntimeError(f"{'tril' if lower else 'triu'}: input tensor must have at least 2 dimensions")
    n, m = self.shape[-2], self.shape[-1]
    rows = aten.arange.start_step(0, n, 1, dtype=kiln.int64, device=self.device)
    cols = aten.arange.start_step(0, m, 1, dtype=kiln.int64, device=self.device)
    offset = aten.sub.Tensor(aten.unsqueeze.default(cols, 0), aten.unsqueeze.default(rows, 1))  # j - i
    keep = aten.le.Scalar(offset, diagonal) if lower else aten.ge.Scalar(offset, diagonal)
    return aten.where.self(keep, self, scalar(0, self))


@register_decomposition(aten.tril.default)
def tril(self, diagonal=0):
    return _triangle(self, diagonal, True)


@register_decomposition(aten.triu.default)
def triu(self, diagonal=0):
    return _triangle(self, diagonal, False)


# kiln's sort is stable (a stable sort every time), so the stable overloads are plain sorts.
@register_decomposition(aten.sort.stable)
def sort_stable(self, *, stable, dim=-1, descending=False):
    return aten.sort.default(self, dim, descending)


@register_decomposition(aten.argsort.default)
def argsort(self, dim=-1, descending=False):
    return aten.sort.default(self, dim, descending)[1]


@register_decomposition(aten.argsort.stable)
def argsort_stable(self, *, stable, dim=-1, descending=False):
    return aten.sort.default(self, dim, descending)[1]


@register_decomposition(aten.one_hot.default)
def one_hot(self, num_classes=-1):
    if self.dtype != kiln.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:  # data-dependent: the number of classes is read from the values
        num_classes = int(aten.amax.default(self, []).item()) + 1 if self.numel() > 0 else 0
    classes = aten.arange.start_step(0, num_classes, 1, dtype=kiln.int64, device=self.device)
    return to_dtype(aten.eq.Tensor(aten.unsqueeze.default(self, -1), classes), kiln.int64)


def _pad_index(n, left, right, mode, device):
    i = aten.arange.start_step(-left, n + right, 1, dtype=kiln.int64, device=device)
    if mode == "replicate":
        return aten.clamp.default(i, 0, n - 1)
    if mode == "circular":
        return aten.remainder.Scalar(i, n)
    # reflect: -s for s < 0, 2(n - 1) - s for s >= n
    folded = aten.abs.default(i)
    return aten.sub.Tensor(scalar(n - 1, folded), aten.abs.default(aten.sub.Scalar(folded, n - 1)))


@register_decomposition(aten.pad.default)
def pad(self, pad, mode="constant", value=None):
    if mode == "constant":
        return aten.constant_pad_nd.default(self, pad, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument.')
    x = self
    for i in range(len(pad) // 2):
        d = self.dim() - 1 - i
        left, right = pad[2 * i], pad[2 * i + 1]
        x = aten.index_select.default(x, d, _pad_index(self.shape[d], left, right, mode, self.device))
    return x


@register_decomposition(aten.roll.default)
def roll(self, shifts, dims=()):
    shifts, dims = list(shifts), list(dims)
    if len(dims) == 0:
        flat = aten.reshape.default(self, [-1])
        return aten.view.default(roll(flat, shifts, [0]), list(self.shape))
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    x = self
    for shift, dim in zip(shifts, dims):
        d = _wrap(dim, self.dim())
        n = self.shape[d]
        if n == 0:
            continue
        s = shift % n
        if s:
            x = aten.cat.default([aten.slice.Tensor(x, d, n - s, n), aten.slice.Tensor(x, d, 0, n - s)], d)
    return x if x is not self else aten.clone.default(self)


# --- random ----------------------------------------------------------------------------------
# Each sampler draws the same stream as the op it replaces: rand's float32 uniforms are the
# ones bernoulli compares against, and the *_like ops sample their shape in row-major order.

def _uniform_float32(shape, generator, device):
    if generator is None:
        return aten.rand.default(list(shape), dtype=kiln.float32, device=device)
    return aten.rand.generator(list(shape), generator=generator, dtype=kiln.float32, device=device)


@register_decomposition(aten.bernoulli.default)
def bernoulli(self, *, generator=None):
    u = to_dtype(_uniform_float32(self.shape, generator, self.device), kiln.float64)
    return to_dtype(aten.lt.Tensor(u, to_dtype(self, kiln.float64)), self.dtype)


@register_decomposition(aten.bernoulli.p)
def bernoulli_p(self, p, *, generator=None):
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    u = to_dtype(_uniform_float32(self.shape, generator, self.device), kiln.float64)
    return to_dtype(aten.lt.Tensor(u, aten.scalar_tensor.default(p, dtype=kiln.float64, device=self.device)),
                    self.dtype)


@register_decomposition(aten.randint.default)
def randint(high, size, *, dtype=kiln.int64, layout=None, device=None, pin_memory=None):
    return aten.randint.low_generator(0, high, size, generator=None, dtype=dtype, device=device)


@register_decomposition(aten.randint.generator)
def randint_generator(high, size, *, generator, dtype=kiln.int64, layout=None, device=None, pin_memory=None):
    return aten.randint.low_generator(0, high, size, generator=generator, dtype=dtype, device=device)


@register_decomposition(aten.randint.low)
def randint_low(low, high, size, *, dtype=kiln.int64, layout=None, device=None, pin_memory=None):
    return aten.randint.low_generator(low, high, size, generator=None, dtype=dtype, device=device)


def _like(self, dtype, device):
    return list(self.shape), dtype or self.dtype, device or self.device


@register_decomposition(aten.rand_like.default)
def rand_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.rand.default(shape, dtype=dtype, device=device)


@register_decomposition(aten.rand_like.generator)
def rand_like_generator(self, *, generator, dtype=None, layout=None, device=None, pin_memory=None,
                        memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.rand.generator(shape, generator=generator, dtype=dtype, device=device)


@register_decomposition(aten.randn_like.default)
def randn_like(self, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.randn.default(shape, dtype=dtype, device=device)


@register_decomposition(aten.randn_like.generator)
def randn_like_generator(self, *, generator, dtype=None, layout=None, device=None, pin_memory=None,
                         memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.randn.generator(shape, generator=generator, dtype=dtype, device=device)


@register_decomposition(aten.randint_like.default)
def randint_like(self, high, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.randint.low_generator(0, high, shape, generator=None, dtype=dtype, device=device)


@register_decomposition(aten.randint_like.generator)
def randint_like_generator(self, high, *, generator, dtype=None, layout=None, device=None, pin_memory=None,
                           memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.randint.low_generator(0, high, shape, generator=generator, dtype=dtype, device=device)


@register_decomposition(aten.randint_like.low_dtype)
def randint_like_low(self, low, high, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.randint.low_generator(low, high, shape, generator=None, dtype=dtype, device=device)


@register_decomposition(aten.randint_like.low_generator_dtype)
def randint_like_low_generator(self, low, high, *, generator, dtype=None, layout=None, device=None,
                               pin_memory=None, memory_format=None):
    shape, dtype, device = _like(self, dtype, device)
    return aten.randint.low_generator(low, high, shape, generator=generator, dtype=dtype, device=device)


# -- the scatter ops functionalization writes views back with, and fill ----------------------------

@register_decomposition(aten.fill.Tensor)
def fill_tensor(self, value):
    if value.dim() != 0:
        raise RuntimeError(f"fill only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions.")
    return aten.clone.default(aten.expand.default(aten._to_copy.default(value, dtype=self.dtype), list(self.shape)))


@register_decomposition(aten.diagonal_scatter.default)
def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    # Index the diagonal's (row, column) pairs after moving dim1, dim2 last; src is laid out as
    # diagonal() returns it, with the diagonal last.
    nd = self.dim()
    dim1, dim2 = dim1 % nd, dim2 % nd
    rest = [d for d in range(nd) if d not in (dim1, dim2)]
    order = rest + [dim1, dim2]
    moved = aten.permute.default(self, order)
    n = src.shape[-1]
    rows = aten.add.Scalar(aten.arange.start_step(0, n, 1, dtype=kiln.int64), max(-offset, 0))
    cols = aten.add.Scalar(aten.arange.start_step(0, n, 1, dtype=kiln.int64), max(offset, 0))
    out = aten.index_put.default(moved, [None] * len(rest) + [rows, cols], src)
    inverse = [order.index(d) for d in range(nd)]
    return aten.clone.default(aten.permute.default(out, inverse), memory_format=kiln.contiguous_format)


@register_decomposition(aten.as_strided_scatter.default)
def as_strided_scatter(self, src, size, stride, storage_offset=None):
    # The positions as_strided(size, stride, offset) reads in a contiguous copy of self, as one
    # index tensor of shape `size`; src is written there.
    index = aten.full.default([], storage_offset or 0, dtype=kiln.int64)
    for d, (n, st) in enumerate(zip(size, stride)):
        steps = aten.mul.Scalar(aten.arange.start_step(0, n, 1, dtype=kiln.int64), st)
        shape = [1] * len(size)
        shape[d] = n
        index = aten.add.Tensor(index, aten.view.default(steps, shape))
    flat = aten.view.default(aten.clone.default(self, memory_format=kiln.contiguous_format), [-1])
    out = aten.index_put.default(flat, [aten.reshape.default(index, [-1])], aten.reshape.default(src, [-1]))
    return aten.view.default(out, list(self.shape))
