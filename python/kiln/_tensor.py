"""kiln.Tensor: the Python class of tensors (a subclass of the C++ kiln._C.TensorBase).

Ops, operators and metadata live in C++; this file adds what reads best in Python: printing,
indexing (basic indexing becomes views, advanced indexing the aten `index` / `index_put_` ops),
iteration, numpy interop and dtype conversion shorthands. Op methods (`x.add`, `x.sum`, ...) are
attached from the op registry by kiln/__init__.py.
"""

import numbers

import kiln  # the package, for kiln.autograd at call time (autograd is the layer above this class)
from kiln import _C
from kiln._device import device as _device
from kiln._size import Size
from kiln._symbolic import SymInt as _SymInt


_op_cache = {}


def _op(full_name):
    fn = _op_cache.get(full_name)
    if fn is None:
        fn = _op_cache[full_name] = _C._overload_function(full_name)
    return fn


def _is_int_like(k):
    if isinstance(k, bool):
        return False
    if isinstance(k, numbers.Integral):
        return True
    return hasattr(k, "__index__") and not isinstance(k, (Tensor, float))


_INT64_MAX = 9223372036854775807


def _slice_bound(k):
    """A slice's start or stop as slice.Tensor takes it: an int, or a SymInt kept symbolic."""
    return k if isinstance(k, _SymInt) else int(k.__index__())


def _is_integer_scalar_tensor(k):
    """A 0-d integer tensor with a value to read: PyTorch indexes with it as with an int (select,
    a view). Fake ones (a trace) stay advanced indices: their value is unknown."""
    return isinstance(k, Tensor) and k.ndim == 0 and k.dtype not in (_C.bool, _C.uint8) and \
        not k.is_floating_point() and not _C._is_fake(k) and k.device.type != "meta"


def _as_index_tensor(k):
    import kiln

    if isinstance(k, Tensor):
        return k
    t = kiln.tensor(k)
    if t.dtype.is_floating_point and t.numel() > 0:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if t.numel() == 0:
        t = t.to(kiln.int64)
    return t


class Tensor(_C.TensorBase):
    __module__ = "kiln"

    # --- metadata ---------------------------------------------------------------------------
    @property
    def shape(self):
        return Size(self._shape_tuple)

    @property
    def device(self):
        return _device(self._device_str)

    @property
    def T(self):
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    # The real and imaginary parts: views (of view_as_real's pairs) for a complex tensor; a real
    # tensor is its own real part and has no imaginary one. Assigning writes through the view.
    @property
    def real(self):
        return _op("aten::real")(self)

    @real.setter
    def real(self, value):
        self.real.copy_(value)

    @property
    def imag(self):
        return _op("aten::imag")(self)

    @imag.setter
    def imag(self, value):
        self.imag.copy_(value)

    @property
    def data(self):
        # Unlike detach(), .data has its own version counter: in-place changes through it are
        # hidden from autograd's saved-tensor checks, as in PyTorch.
        return _C._data_alias(self)

    @data.setter
    def data(self, new):
        if not isinstance(new, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(new).__name__}")
        _C._set_data(self, new)

    # --- autograd (attributes requires_grad, grad, grad_fn, is_leaf live in C++) -------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulates d(self)/d(leaf) into every leaf's `.grad` (kiln.autograd.backward)."""
        kiln.autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def register_hook(self, hook):
        """hook(grad) runs when this tensor's gradient is computed; it may return a replacement."""
        return kiln.autograd._register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(self) runs after each backward accumulates a gradient into this leaf's .grad
        (an optimizer step inside backward); it must return None."""
        hook_id = _C._register_post_accumulate_grad_hook(self, hook)
        return kiln.autograd.RemovableHandle(lambda: _C._remove_post_accumulate_grad_hook(self, hook_id))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._shape_tuple[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self.select(0, i) for i in range(self._shape_tuple[0]))

    def __reversed__(self):
        return self.flip(0) if self.ndim else self

    def __contains__(self, element):
        if isinstance(element, (Tensor, numbers.Number)):
            return bool((self == element).any().item())
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}.")

    def __repr__(self, *, tensor_contents=None):
        from kiln._tensor_str import tensor_repr

        return tensor_repr(self)

    def __format__(self, spec):
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, proto):
        return (_rebuild, (self.tolist(), self.dtype, tuple(self.shape)))

    def __deepcopy__(self, memo):
        out = self.clone()
        memo[id(self)] = out
        return out

    # --- conversions --------------------------------------------------------------------------
    def numpy(self, *, force=False):
        import numpy as np

        if self.device.type == "cuda":
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first.")
        if self.dtype == _C.bfloat16:
            raise TypeError("Got unsupported ScalarType BFloat16")
        return np.asarray(memoryview(self))

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else _device("cuda", device) if isinstance(device, int) else device)

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def bfloat16(self):
        return self.to(_C.bfloat16)

    def int(self):
        return self.to(_C.int32)

    def long(self):
        return self.to(_C.int64)

    def short(self):
        return self.to(_C.int16)

    def char(self):
        return self.to(_C.int8)

    def byte(self):
        return self.to(_C.uint8)

    def bool(self):
        return self.to(_C.bool)

    def type(self, dtype=None, non_blocking=False):
        """With no argument, the legacy type name ('kiln.FloatTensor'); else this tensor converted to
        `dtype` (a kiln.dtype, a legacy type such as kiln.LongTensor, or its name), self if unchanged."""
        from kiln import _tensor_types

        if dtype is None:
            return _tensor_types.type_name(self.dtype)
        return _tensor_types.convert(self, dtype, non_blocking)

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def pin_memory(self, device=None):
        """A copy in page-locked host memory, which copies to CUDA read directly (non_blocking=True
        stays asynchronous). Needs a usable CUDA driver, as PyTorch's does."""
        if device is not None:
            import warnings

            warnings.warn("The argument 'device' of Tensor.pin_memory() is deprecated. Please do not pass this "
                          "argument.", DeprecationWarning, stacklevel=2)
        if not _C._cuda_is_available():
            raise RuntimeError("Tensor.pin_memory(): pinned memory needs a CUDA device, and none is usable: "
                               + _C._cuda_unavailable_reason().splitlines()[0])
        if self.is_pinned():
            return self
        return _C._cuda_pin_memory(self)

    def is_pinned(self, device=None):
        if device is not None:
            import warnings

            warnings.warn("The argument 'device' of Tensor.is_pinned() is deprecated. Please do not pass this "
                          "argument.", DeprecationWarning, stacklevel=2)
        return _C._cuda_is_pinned(self)

    def record_stream(self, stream):
        """This tensor's memory is also used on `stream`: the caching allocator does not reuse it
        until the work queued there so far has finished (torch.Tensor.record_stream)."""
        _C._cuda_record_stream(self, stream._triple)

    # --- new_* factories: same dtype and device as self unless given. Sizes may be one sequence or
    # several ints (x.new_zeros(2, 3)), as in PyTorch.
    def new(self, *args, device=None, **kwargs):
        """The legacy constructor with self's dtype and device: x.new(2, 3) (uninitialized),
        x.new([1, 2]) (data), x.new() (empty)."""
        from kiln import _tensor_types

        return _tensor_types.legacy_new(self.dtype, device or self.device, args, kwargs)

    def _new_factory(self, name, sizes, size, dtype, device, requires_grad, *args):
        """aten.new_<kind>(self, size, ...): recorded as that op in traced graphs, as PyTorch does."""
        from kiln._ops import ops

        if size is None:
            if not sizes:
                raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
            size = sizes if len(sizes) > 1 or _is_int_like(sizes[0]) else sizes[0]
        elif sizes:
            raise TypeError(f"{name}() got multiple values for argument 'size'")
        size = [size] if _is_int_like(size) else list(size)
        out = getattr(ops.aten, name)(self, size, *args, dtype=dtype, device=device)
        return out.requires_grad_() if requires_grad else out

    def new_empty(self, *sizes, size=None, dtype=None, device=None, requires_grad=False):
        return self._new_factory("new_empty", sizes, size, dtype, device, requires_grad)

    def new_zeros(self, *sizes, size=None, dtype=None, device=None, requires_grad=False):
        return self._new_factory("new_zeros", sizes, size, dtype, device, requires_grad)

    def new_ones(self, *sizes, size=None, dtype=None, device=None, requires_grad=False):
        return self._new_factory("new_ones", sizes, size, dtype, device, requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        return self._new_factory("new_full", (), size, dtype, device, requires_grad, fill_value)

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
        import kiln

        return kiln.tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)

    def where(self, condition, other):
        """x.where(condition, y) is where(condition, x, y) (self is not the condition)."""
        import kiln

        return kiln.where(condition, self, other)

    # --- indexing -----------------------------------------------------------------------------
    def _apply_basic_index(self, key, setitem=False):
        """Basic indexing as views; returns (view, advanced) where advanced maps view dims to
        index tensors still to apply. For a store (`setitem`), a slice from 0 (or None) to exactly
        the dim's size with step 1 is no view, as PyTorch's applySlice returns the tensor itself
        there: `p[:1] = 0` on a split piece p names Split in its error, not Slice (fuzz seed 241,
        program 5573)."""
        if not isinstance(key, tuple):
            key = (key,)
        consumed = 0
        for k in key:
            if k is None or k is Ellipsis or isinstance(k, bool):
                continue
            if isinstance(k, Tensor) and k.dtype in (_C.bool, _C.uint8):
                consumed += k.ndim  # a 0-d mask adds a dimension (as None does) and consumes none
            elif isinstance(k, (list, tuple)) and _nested_bools(k):
                consumed += _nested_ndim(k)
            else:
                consumed += 1
        if sum(1 for k in key if k is Ellipsis) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if consumed > self.ndim:
            raise IndexError(f"too many indices for tensor of dimension {self.ndim}")
        result = self
        dim = 0
        advanced = {}
        for k in key:
            if k is None:
                result = result.unsqueeze(dim)
                dim += 1
            elif k is Ellipsis:
                dim += self.ndim - consumed
            elif isinstance(k, bool):
                result = result.unsqueeze(dim)
                advanced[dim] = _C._tensor_from_data([k], None)
                dim += 1
            elif _is_int_like(k) and not isinstance(k, Tensor) or _is_integer_scalar_tensor(k):
                # a 0-d integer tensor indexes as its value does (a view), as in PyTorch
                k = int(k.item()) if isinstance(k, Tensor) else int(k.__index__())
                if not -_INT64_MAX - 1 <= k <= _INT64_MAX:
                    raise ValueError("Overflow when unpacking long long")  # PyTorch's, from its parser
                size = result.shape[dim]
                if k < -size or k >= size:
                    raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {size}")
                result = result.select(dim, k)
            elif isinstance(k, slice):
                start, stop, step = k.start, k.stop, k.step
                step = 1 if step is None else int(step.__index__())
                if step <= 0:
                    raise ValueError("step must be greater than zero")
                # a symbolic bound stays one (x[:, :t] with t a size under dynamic shapes), as
                # slice.Tensor takes SymInts: int() pinned t, so a growing prompt recompiled for
                # every length
                whole = start is None and stop is None
                # a bound left out is 0 or INT64_MAX, as PyTorch's indexing passes it (and its
                # traced graphs record it): slice.Tensor(x, 0, 1, 9223372036854775807) for x[1:]
                start = 0 if start is None else _slice_bound(start)
                stop = _INT64_MAX if stop is None else _slice_bound(stop)
                size = result.shape[dim]
                whole = whole or setitem and start == 0 and type(size) is int and stop == size
                if not (whole and step == 1):
                    args = (result, dim, start, stop) if step == 1 else (result, dim, start, stop, step)
                    result = _op('aten::slice.Tensor')(*args)
                dim += 1
            else:
                index = _as_index_tensor(k)
                if index.dtype in (_C.bool, _C.uint8):
                    if index.dtype == _C.uint8:
                        index = index.to(_C.bool)
                    for j in range(index.ndim):
                        if index.shape[j] != result.shape[dim + j]:
                            raise IndexError(f"The shape of the mask {list(index.shape)} at index {j} does not match "
                                             f"the shape of the indexed tensor {list(result.shape)} at index {dim + j}")
                    if index.ndim == 0:
                        result = result.unsqueeze(dim)
                        advanced[dim] = index.unsqueeze(0).nonzero().select(1, 0)
                        dim += 1
                        continue
                    nz = index.nonzero()
                    for j in range(index.ndim):
                        advanced[dim + j] = nz.select(1, j)
                    dim += index.ndim
                else:
                    advanced[dim] = index
                    dim += 1
        return result, advanced

    # x[key]: TensorBase's mapping slot parses ints, slices, None and Ellipsis in C++ (Note [Basic
    # indexing in C++], python/csrc/python_tensor.cc) and calls this for every other key.
    def _getitem(self, key):
        result, advanced = self._apply_basic_index(key)
        if not advanced:
            return result if result is not self else _op('aten::alias')(self)
        indices = [advanced.get(d) for d in range(max(advanced) + 1)]
        return _op('aten::index.Tensor')(result, indices)

    # x[key] = value: TensorBase's mapping slot runs the common keys and values in C++ (Note [Item
    # assignment in C++], python/csrc/python_tensor.cc), by the same ops in the same order, and
    # calls this for the rest.
    def _setitem(self, key, value):
        if isinstance(key, Tensor) and key.dtype == _C.bool and key.ndim <= self.ndim and \
                not (isinstance(value, Tensor) and value.ndim) and \
                tuple(key.shape) == tuple(self.shape[:key.ndim]):
            # x[mask] = scalar is masked_fill_, as in PyTorch: no nonzero, so a compiled function
            # keeps static shapes (it raised DynamicOutputShapeException under AOT) and a 0-d
            # mask needs no index tensor; a 0-d value that requires grad gets its gradient from
            # masked_fill's (the masked sum), with no data-dependent shape either
            mask = key.view(tuple(key.shape) + (1,) * (self.ndim - key.ndim))
            if isinstance(value, Tensor):
                value = value.to(self.dtype)
            self.masked_fill_(mask, value)
            return
        if not isinstance(value, Tensor):  # made first, as PyTorch does (traced graphs lift it first)
            import kiln

            if type(value) is int and not -_INT64_MAX - 1 <= value <= _INT64_MAX:
                raise ValueError("Overflow when unpacking long long")  # PyTorch's, as the C++ path's

            value = kiln.tensor(value, dtype=self.dtype)
        result, advanced = self._apply_basic_index(key, setitem=True)
        if value.requires_grad and not result.requires_grad and _C.is_grad_enabled():
            _C._track_view(result, self)  # so that the write reaches self's history (CopySlices)
        value_is_0d = value.ndim == 0
        lead = 0  # the value's leading 1s are dropped before it broadcasts, as in PyTorch
        # (`x[0] = v` with v of shape (1, 3)); not from a value of the destination's own shape, which may
        # be the destination itself: `x[2:, 2:] -= y` writes x[2:, 2:] back onto itself, a no-op copy
        # that a (1, 1) slice turned into a copy from an aliasing 0-d view (an overlap error)
        while lead < value.ndim and value.shape[lead] == 1 and tuple(value.shape) != tuple(result.shape):
            lead += 1
        if lead:
            value = value.view(tuple(value.shape[lead:]))
        if advanced:
            indices = [advanced.get(d) for d in range(max(advanced) + 1)]
            if value.dtype != self.dtype and value.ndim == 0 and isinstance(key, Tensor) and key.dtype == _C.bool:
                value = value.to(self.dtype)  # PyTorch takes x[mask] = 0-dim tensor as masked_fill_ (casts)
            # otherwise index_put_ raises on a dtype mismatch, as PyTorch does
            result.index_put_(indices, value)
        elif value_is_0d and tuple(result.shape) != () and value.device.type == "cpu":
            # a 0-d value fills, as PyTorch's copy_to: its fill_ (unlike copy_) records a gradient
            # into an integer split piece, so that is refused as there (fuzz seed 321, program 19750)
            result.fill_(value)
        else:
            if tuple(value.shape) != tuple(result.shape):
                # expanded to the destination first (PyTorch's expand_inplace): `x[0] = x` for x of
                # shape [1, 1, 3] then reads exactly the elements it writes (fuzz seed 81, 566); a value
                # left 0-d by dropping its leading 1s too, so `x[0] = x[:, 0]` is no overlap error
                # (fuzz seed 161, 668)
                value = value.expand(tuple(result.shape))
            result.copy_(value)


def _nested_bools(k):
    while isinstance(k, (list, tuple)) and k:
        k = k[0]
    return isinstance(k, bool)


def _nested_ndim(k):
    n = 0
    while isinstance(k, (list, tuple)):
        n += 1
        k = k[0] if k else None
    return n


def _rebuild(data, dtype, shape):
    import kiln

    return kiln.tensor(data, dtype=dtype).reshape(shape)


# --- PyTorch's composite functions as Tensor methods (issue 17): x.unbind(), x.clip(), x.median(),
# x.unique(), x.i0(), ... are the functions of kiln/_composites.py, _order_stats.py, _set_ops.py and
# _windows.py with self as `input`. movedim replaces the registry's (ints only) method: it also takes sequences of dims, as
# PyTorch's does.
def _install_composite_methods():
    from kiln import _composites

    for name in ("unbind", "swapaxes", "swapdims", "moveaxis", "movedim", "clip", "clip_", "tile", "diag", "diff",
                 "outer", "ger", "logaddexp", "logaddexp2", "nanmean", "allclose", "isclose", "equal", "cross",
                 "kron", "take", "fill_diagonal_", "repeat_interleave", "trace", "broadcast_to", "rot90",
                 "diag_embed", "nonzero"):
        setattr(Tensor, name, getattr(_composites, name))
    from kiln import _order_stats, _set_ops

    for name in ("median", "nanmedian", "quantile", "nanquantile", "mode", "cummax", "cummin"):
        setattr(Tensor, name, getattr(_order_stats, name))
    for name in ("unique", "unique_consecutive"):  # PyTorch has no Tensor.bucketize / searchsorted
        setattr(Tensor, name, getattr(_set_ops, name))
    from kiln import _windows

    for name in ("i0", "i0_"):
        setattr(Tensor, name, getattr(_windows, name))


_install_composite_methods()


def _install_more_methods():
    """The methods of kiln/_aliases.py, _pointwise_more.py, _matrix_more.py, _index_ops_more.py,
    _nn_toplevel.py, _special_more.py, _utilities_more.py and _tensor_methods_extra.py (issue 17), bound once kiln/__init__.py has attached the registry's methods the aliases name.
    The *_scatter methods are the registry's functions with self as `input`."""
    import kiln
    from kiln import (_aliases, _index_ops_more, _matrix_more, _nn_toplevel, _pointwise_more, _special_more,
                      _tensor_methods_extra, _utilities_more)

    _aliases.install_methods(Tensor)
    for module in (_nn_toplevel, _special_more, _utilities_more, _tensor_methods_extra):
        module.install_methods(Tensor)
    for module, names in (
            (_pointwise_more, ("deg2rad", "deg2rad_", "rad2deg", "rad2deg_", "sinc", "sinc_", "float_power",
                               "float_power_", "heaviside", "heaviside_", "gcd", "gcd_", "lcm", "lcm_", "ldexp",
                               "ldexp_", "frexp", "isposinf", "isneginf", "isreal", "logcumsumexp")),
            (_matrix_more, ("addmv", "addmv_", "addr", "addr_", "addbmm", "addbmm_", "addmm_", "baddbmm_", "inner",
                            "vdot", "diagflat", "cov", "corrcoef", "dist", "renorm", "renorm_", "cholesky_solve",
                            "cholesky_inverse")),
            (_index_ops_more, ("take_along_dim", "index_copy", "index_copy_", "index_fill", "index_fill_",
                               "masked_scatter", "masked_scatter_", "put", "put_", "scatter_reduce",
                               "scatter_reduce_", "tensor_split", "hsplit", "vsplit", "dsplit", "histc", "bincount",
                               "kthvalue", "aminmax"))):
        for name in names:
            setattr(Tensor, name, getattr(module, name))
    for name in ("select_scatter", "slice_scatter", "diagonal_scatter", "as_strided_scatter"):
        setattr(Tensor, name, getattr(kiln, name))
