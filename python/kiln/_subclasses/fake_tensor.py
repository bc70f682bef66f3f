"""Fake tensors (PyTorch's torch._subclasses.fake_tensor): tensors with metadata and no data.

`FakeTensorMode` is a context manager; while it is active, factory functions make fake tensors
and every op runs only its meta function (C++, tensor/fake_tensor.h: the Fake dispatch key), so
outputs carry exactly the sizes, strides, dtype and device the real kernels would give, with
views aliasing their base. `mode.from_tensor(t)` converts a real tensor (memoised per tensor).

    mode = FakeTensorMode()
    x = mode.from_tensor(kiln.randn(4, 3))
    with mode:
        y = model(x)            # FakeTensor(..., size=(4, 10))
"""

import contextlib
import weakref

import kiln
from kiln import _C
from kiln._subclasses.creation_meta import as_multi_output_view, multi_output_origin
from kiln._tensor import Tensor

__all__ = [
    "FakeTensor", "FakeTensorMode", "unset_fake_temporarily", "DynamicOutputShapeException",
    "DataDependentOutputException", "UnsupportedFakeTensorException", "is_fake",
]

try:  # defined beside the data-dependent ops' meta functions (the ShapeEnv work) when present
    from kiln._subclasses._exceptions import DataDependentOutputException, DynamicOutputShapeException
except ImportError:  # pragma: no cover - until that module lands
    class DynamicOutputShapeException(RuntimeError):
        """An op whose output shape depends on data (nonzero) ran on fake tensors without a ShapeEnv."""

        def __init__(self, func):
            super().__init__(func)
            self.func = func

    class DataDependentOutputException(RuntimeError):
        """An op whose output is data (item()) ran on fake tensors without a ShapeEnv."""

        def __init__(self, func):
            super().__init__(func)
            self.func = func


class UnsupportedFakeTensorException(RuntimeError):
    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class FakeTensor(Tensor):
    """A tensor of a FakeTensorMode: sizes, strides, dtype and a device, no data.

    `t.device` is the device it pretends to be on; `t.fake_mode` its mode. Ops on it run only
    meta functions. Reading values (item(), tolist(), numpy()) is an error.
    """

    __module__ = "kiln._subclasses.fake_tensor"

    @property
    def fake_mode(self):
        return _mode_of(self)

    @property
    def fake_device(self):
        return self.device

    @staticmethod
    def from_tensor(t, fake_mode):
        return fake_mode.from_tensor(t)

    def __repr__(self, *, tensor_contents=None):
        parts = ["..."]
        if self.device.type != "cpu":
            parts.append(f"device='{self.device}'")
        parts.append("size=" + str(tuple(self.shape)))
        if self.dtype != kiln.get_default_dtype():
            parts.append("dtype=" + repr(self.dtype))
        if self.grad_fn is not None:
            parts.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            parts.append("requires_grad=True")
        return "FakeTensor(" + ", ".join(parts) + ")"

    def __deepcopy__(self, memo):
        out = self.clone()
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, proto):
        raise RuntimeError("cannot pickle a FakeTensor: it has no data")

    @staticmethod
    def _parameter_class():
        """The class of a fake nn.Parameter (nn.Parameter(fake) asks for it: nn.parameter, below
        this module's layer, never imports it)."""
        return _fake_parameter_class()


_C._set_fake_tensor_class(FakeTensor)


def _fake_parameter_class():
    """FakeTensor and nn.Parameter in one class, for from_tensor of parameters (isinstance of
    both holds, so nn.Module registers it as a parameter)."""
    global _FakeParameter
    if _FakeParameter is None:
        from kiln.nn.parameter import Parameter

        class FakeParameter(FakeTensor, Parameter):
            __module__ = "kiln._subclasses.fake_tensor"

            def __new__(cls, data=None, requires_grad=True):
                return Parameter.__new__(cls, data, requires_grad)

            def __repr__(self, *, tensor_contents=None):
                return "Parameter containing:\n" + FakeTensor.__repr__(self)

        _FakeParameter = FakeParameter
    return _FakeParameter


_FakeParameter = None


def is_fake(t):
    """Whether `t` is a fake tensor (of any mode)."""
    return isinstance(t, Tensor) and _C._is_fake(t)


def _mode_of(t):
    cmode = _C._fake_mode_of(t)
    if cmode is None:
        return None
    mode = cmode._pyobj()
    if mode is None:  # the Python mode object died; the C++ one lives on in its tensors
        mode = FakeTensorMode._wrap(cmode)
    return mode


def _safe_is_leaf(t):
    """t.is_leaf, False where asking raises: a split piece whose base changed in place refuses to
    regenerate its history (PyTorch's meta_utils.safe_is_leaf)."""
    try:
        return t.is_leaf
    except RuntimeError:
        return False


class FakeTensorMode:
    """Runs every op on fake tensors (metadata only) while active; see the module docstring.

    allow_non_fake_inputs: real tensors passed to ops are converted instead of rejected.
    shape_env: a ShapeEnv; from_tensor then gives symbolic sizes (unless static_shapes=True).
    """

    def __init__(self, *, allow_fallback_kernels=True, allow_non_fake_inputs=False, shape_env=None,
                 static_shapes=None, export=False):
        self._cmode = _C._FakeTensorMode(allow_non_fake_inputs)
        self._cmode._set_pyobj(self)
        self._constants = {}  # kiln.tensor(...) made under this mode: storage id -> (fake, real)
        self.shape_env = shape_env
        self.static_shapes = shape_env is None if static_shapes is None else static_shapes
        self.allow_fallback_kernels = allow_fallback_kernels
        self.export = export
        self._memo = {}  # id(real tensor) -> (weakref to it, fake tensor)
        self._enter_stack = []

    @classmethod
    def _wrap(cls, cmode):
        self = cls.__new__(cls)
        self._cmode = cmode
        cmode._set_pyobj(self)
        self.shape_env = None
        self.static_shapes = True
        self.allow_fallback_kernels = True
        self.export = False
        self._memo = {}
        self._constants = {}
        self._enter_stack = []
        return self

    def __del__(self):
        cmode = getattr(self, "_cmode", None)
        if cmode is not None and cmode._pyobj() is self:
            cmode._set_pyobj(None)

    @property
    def allow_non_fake_inputs(self):
        return self._cmode.allow_non_fake_inputs

    @allow_non_fake_inputs.setter
    def allow_non_fake_inputs(self, value):
        self._cmode.allow_non_fake_inputs = bool(value)

    def __repr__(self):
        return f"<kiln._subclasses.fake_tensor.FakeTensorMode object at {hex(id(self))}>"

    # --- activation (reentrant; nests with other modes; restores on exceptions) ---------------
    def __enter__(self):
        _C._push_fake_mode(self._cmode)
        ctx = None
        if self.shape_env is not None and hasattr(self.shape_env, "_enter_symbolic_context"):
            ctx = self.shape_env._enter_symbolic_context()
        self._enter_stack.append(ctx)
        return self

    def __exit__(self, exc_type, exc, tb):
        ctx = self._enter_stack.pop()
        try:
            if ctx is not None:
                ctx.__exit__(exc_type, exc, tb)
        finally:
            _C._pop_fake_mode()
        return False

    def is_our_fake(self, t):
        return isinstance(t, Tensor) and _C._is_fake(t) and _C._fake_mode_of(t) is self._cmode

    # --- conversion ---------------------------------------------------------------------------
    def from_tensor(self, tensor, *, static_shapes=None, source=None, symbolic_context=None, trace=True,
                    dynamic_dims=None, dynamic_strides=None):
        """The fake counterpart of `tensor`: same dtype, sizes, strides, storage offset, device,
        requires_grad and leafness (Parameters stay Parameters; split pieces stay multi-output
        views, Note [Multi-output views of stand-ins]). Memoised per tensor.

        dynamic_dims (with a shape_env): only these dimensions get symbols; the others stay static
        (what Dynamo's automatic dynamic shapes and mark_dynamic ask for). dynamic_strides: the dims
        whose stride gets a symbol where it is not a product of the sizes (stride_derivation)."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"from_tensor(): expected a kiln.Tensor, got {type(tensor).__name__}")
        if self.is_our_fake(tensor):
            return tensor
        hit = self._memo.get(id(tensor))
        if hit is not None and hit[0]() is tensor:
            return hit[1]
        static = self.static_shapes if static_shapes is None else static_shapes
        with unset_fake_temporarily(), kiln.no_grad():
            if self.shape_env is not None and (dynamic_dims is not None or dynamic_strides is not None):
                sizes, strides = _partly_symbolic_layout(self.shape_env, tensor, dynamic_dims or (),
                                                         dynamic_strides or (), source)
                fake = _C._fake_from_tensor(self._cmode, tensor, sizes, strides, tensor.storage_offset())
            elif self.shape_env is not None and not static:
                sizes, strides, offset = self.shape_env.create_symbolic_sizes_strides_storage_offset(
                    tensor, source)
                fake = _C._fake_from_tensor(self._cmode, tensor, list(sizes), list(strides), offset)
            else:
                fake = _C._fake_from_tensor(self._cmode, tensor)
        from kiln.nn.parameter import Parameter

        if isinstance(tensor, Parameter):
            fake = _C._make_subclass(_fake_parameter_class(), fake, tensor.requires_grad)
        elif tensor.requires_grad:
            if _safe_is_leaf(tensor):
                fake = _C._make_subclass(FakeTensor, fake, True)
            else:
                fake = self._non_leaf(tensor, fake)
        key = id(tensor)
        mode = weakref.ref(self)  # not the memo itself: memo -> entry -> callback -> memo was a cycle

        def forget(_, key=key, mode=mode):
            alive = mode()
            if alive is not None:
                alive._memo.pop(key, None)

        self._memo[key] = (weakref.ref(tensor, forget), fake)
        return fake

    def _non_leaf(self, tensor, fake):
        """A non-leaf stays a non-leaf (it has a grad_fn, as the real one does) with the real one's
        strides and storage offset: a strided view of a cloned leaf over enough elements. A plain
        clone was laid out afresh, so an expanded or sliced input requiring grad was traced as a
        contiguous one and Inductor read it so (issue 16). A split piece (or a view of one) stays
        one, which autograd refuses to change in place (Note [Multi-output views of stand-ins])."""
        origin = multi_output_origin(tensor)
        with kiln.enable_grad():
            with unset_fake_temporarily(), kiln.no_grad():
                # symbolic sizes are never 0 (a size symbol stands for 2 or more)
                empty = any(type(n) is int and n == 0 for n in fake.shape)
                extent = fake.storage_offset() + 1 + sum((n - 1) * st for n, st in zip(fake.shape, fake.stride()))
                flat = _C._fake_from_tensor(self._cmode, tensor, [fake.storage_offset() if empty else extent], [1], 0)
            leaf = _C._make_subclass(FakeTensor, flat, True)
            view = leaf.clone().as_strided(fake.shape, fake.stride(), fake.storage_offset())
            return view if origin is None else as_multi_output_view(view, origin)

    def from_real_tensor(self, tensor, *args, **kwargs):
        return self.from_tensor(tensor, *args, **kwargs)


def stride_derivation(sizes, strides, dynamic_strides=()):
    """How a partly symbolic layout writes each stride, as ShapeEnv's CreateSymbolicSizesStridesOffset
    does: from the smallest stride out, a stride of 1 is 1 ("one"), and one equal to a smaller
    stride times its size is that product (("stride*size", j), for dim j); any other stride is a
    symbol of its own where its dim is in `dynamic_strides` ("symbol") and stays an int otherwise
    ("static"). A contiguous tensor's strides are all products of the sizes inside them."""
    order = sorted(range(len(sizes)), key=lambda d: (strides[d], -d))
    products = {}  # stride * size -> the dim it came from (the first, as the C++ picks the first)
    out = [None] * len(sizes)
    for d in order:
        if strides[d] == 1:
            out[d] = "one"
        elif strides[d] in products:
            out[d] = ("stride*size", products[strides[d]])
        else:
            out[d] = "symbol" if d in dynamic_strides else "static"
        products.setdefault(strides[d] * sizes[d], d)
    return out


def _partly_symbolic_layout(shape_env, tensor, dynamic_dims, dynamic_strides, source):
    """Sizes with symbols at `dynamic_dims`; strides as stride_derivation writes them (so a
    contiguous tensor's follow its sizes, and a view's changing outer stride, idx[:, -16:] of a
    growing idx, is a symbol when `dynamic_strides` names its dim)."""
    sizes = [shape_env.create_symbol(s, f"{source}.size()[{d}]") if d in dynamic_dims else s
             for d, s in enumerate(tensor.shape)]
    concrete = list(tensor.stride())
    derivation = stride_derivation(list(tensor.shape), concrete, dynamic_strides)
    strides = [None] * len(sizes)
    for d in sorted(range(len(sizes)), key=lambda d: (concrete[d], -d)):  # a product after its dim
        how = derivation[d]
        if how == "one":
            strides[d] = 1
        elif how == "symbol":
            strides[d] = shape_env.create_symbol(concrete[d], f"{source}.stride()[{d}]")
        elif how == "static":
            strides[d] = concrete[d]
        else:
            strides[d] = strides[how[1]] * sizes[how[1]]
    return sizes, strides


@contextlib.contextmanager
def unset_fake_temporarily():
    """Deactivates any FakeTensorMode for the block (factories make real tensors again)."""
    _C._push_fake_mode(None)
    try:
        yield
    finally:
        _C._pop_fake_mode()


def _active_mode():
    cmode = _C._active_fake_mode()
    if cmode is None:
        return None
    mode = cmode._pyobj()
    return mode if mode is not None else FakeTensorMode._wrap(cmode)


def _tensor_under_fake_mode(make_real):
    """kiln.tensor(...) while a mode is active: the real tensor is built, then converted."""
    mode = _active_mode()
    with unset_fake_temporarily():
        real = make_real()
    with unset_fake_temporarily(), kiln.no_grad():
        fake = _C._fake_from_tensor(mode._cmode, real.detach())
    if real.requires_grad:
        fake = _C._make_subclass(FakeTensor, fake, True)
    # PyTorch's FakeTensor.constant: the data a traced program's literal tensor holds, so make_fx
    # records the real tensor as the graph's constant (a fake one would reach run time). Kept by
    # the mode, keyed by the fake's storage (which the entry keeps alive, so the key stays unique).
    mode._constants[fake._storage_id()] = (fake, real.detach())
    return fake


def constant_of(fake):
    """The real tensor behind a fake that kiln.tensor(...) made under a mode, or None."""
    mode = _mode_of(fake) if isinstance(fake, Tensor) and _C._is_fake(fake) else None
    entry = mode._constants.get(fake._storage_id()) if mode is not None else None
    if entry is None:
        return None
    real = entry[1]
    same_layout = (tuple(real.shape), tuple(real.stride()), real.storage_offset()) == \
        (tuple(fake.shape), tuple(fake.stride()), fake.storage_offset())
    return real if same_layout and real.dtype == fake.dtype else None
