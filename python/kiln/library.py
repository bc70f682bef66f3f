"""kiln.library: operators defined in Python, as torch.library.

    @kiln.library.custom_op("mylib::scale_add", mutates_args=())
    def scale_add(x: kiln.Tensor, y: kiln.Tensor, alpha: float) -> kiln.Tensor:
        return x * alpha + y

    @scale_add.register_fake
    def _(x, y, alpha):
        return kiln.empty_like(x)

    scale_add.register_autograd(backward, setup_context=setup_context)

An operator defined here is an op of kiln's registry like the built-in ones (python/csrc/
python_library.cc, Note [Python kernels]): kiln.ops.mylib.scale_add.default is its OpOverload,
its schema is inferred from the type hints (or given), its kernels are Python functions per
device, its fake function gives the results' shapes to FakeTensors, make_fx and Dynamo, and
register_autograd makes it differentiable through an autograd.Function. kiln.compile keeps it as
one node of the graph (no graph break); Inductor calls it as an extern kernel between compiled
ones. The lower-level torch.library API is here too: Library(ns, "DEF" | "FRAGMENT" | "IMPL")
with define and impl, and define / impl / register_kernel / register_fake / register_autograd
on an operator's name. opcheck(op, args) tests a definition as torch.library.opcheck does.
"""

import collections.abc
import functools
import inspect
import typing

import kiln
from kiln import _C

__all__ = ["Library", "custom_op", "define", "impl", "register_kernel", "register_fake", "register_autograd",
           "infer_schema", "opcheck", "CustomOpDef"]

# namespace -> the Library("...", "DEF") that owns it: one per namespace, as PyTorch's TORCH_LIBRARY
_defining = {}
_keep_alive = []  # libraries made by the module-level functions (their kernels live as long as kiln)

_DEVICE_KEYS = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}


def _key_for(dispatch_key):
    """kiln's dispatch keys for one of PyTorch's names."""
    if dispatch_key in ("CPU", "CUDA", "Meta", "Autograd", "CompositeImplicitAutograd"):
        return [dispatch_key]
    if dispatch_key == "CompositeExplicitAutograd":  # one kernel for every backend, below autograd
        return ["CPU", "CUDA", "Meta"]
    if dispatch_key in ("AutogradCPU", "AutogradCUDA"):
        return ["Autograd"]
    raise ValueError(f"kiln.library: unsupported dispatch key '{dispatch_key}' (kiln has CPU, CUDA, Meta, "
                     f"Autograd, CompositeImplicitAutograd and CompositeExplicitAutograd)")


class Library:
    """A set of operators in one namespace, as torch.library.Library: kind "DEF" owns the namespace
    (one DEF library per namespace), "FRAGMENT" adds definitions to it, "IMPL" only registers
    kernels. `dispatch_key` is the default key of `impl`."""

    def __init__(self, ns, kind, dispatch_key=""):
        if kind not in ("DEF", "FRAGMENT", "IMPL"):
            raise ValueError(f"Unsupported kind: {kind} (expected DEF, FRAGMENT or IMPL)")
        if not isinstance(ns, str) or not ns.isidentifier():
            raise ValueError(f"kiln.library: a namespace must be an identifier, got {ns!r}")
        if kind != "IMPL" and ns == "aten":
            raise ValueError("kiln.library: the aten namespace is kiln's own; define operators in your own namespace")
        if kind == "DEF":
            if ns in _defining:
                raise RuntimeError(f"Only a single Library(\"{ns}\", \"DEF\") can define the namespace {ns}; "
                                   f"use Library(\"{ns}\", \"FRAGMENT\") to add operators to it")
            _defining[ns] = self
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key

    def __repr__(self):
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})"

    def define(self, schema, alias_analysis="", *, tags=()):
        """Registers `schema` ("name(Tensor x, float a) -> Tensor", or "name.overload(...)") in this
        namespace; returns the operator's name."""
        if self.kind == "IMPL":
            raise RuntimeError(f"Library(\"{self.ns}\", \"IMPL\") cannot define operators")
        if alias_analysis not in ("", "FROM_SCHEMA", "CONSERVATIVE"):
            raise RuntimeError(f"Invalid alias_analysis type {alias_analysis}")
        if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
            tags = (tags,)
        name = schema.split("(", 1)[0].strip()
        if "::" in name:
            namespace, name = name.split("::", 1)
            if namespace != self.ns:
                raise ValueError(f"kiln.library: schema {schema!r} names the namespace {namespace}, "
                                 f"not this library's {self.ns}")
            schema = schema.split("::", 1)[1]
        _C._library_define(f"{self.ns}::{schema}", [str(t) for t in tags])
        return name

    def impl(self, op_name, fn, dispatch_key="", *, with_keyset=False):
        """Registers `fn` as the kernel of `op_name` ("name" or "name.overload", or an OpOverload)
        for `dispatch_key` (this library's default, else CompositeImplicitAutograd)."""
        if with_keyset:
            raise NotImplementedError("kiln.library: with_keyset=True (kernels that take a DispatchKeySet)")
        full = _full_name(op_name, self.ns)
        for key in _key_for(dispatch_key or self.dispatch_key or "CompositeImplicitAutograd"):
            _C._library_impl(full, key, fn)

    def _register_fake(self, op_name, fn):
        full = _full_name(op_name, self.ns)
        for key in ("Meta", "Fake"):
            _C._library_impl(full, key, fn)

    def _destroy(self):
        """Gives the namespace up (PyTorch removes the library's registrations; kiln's registry
        keeps operators for the life of the process)."""
        if _defining.get(self.ns) is self:
            del _defining[self.ns]


def _full_name(op, ns=None):
    """The registry name of an operator given as an OpOverload, a CustomOpDef or a string
    ("mylib::foo", "mylib::foo.overload", or "foo" within `ns`)."""
    if isinstance(op, CustomOpDef):
        return op._full_name
    if isinstance(op, kiln._ops.OpOverload):
        return op._full_name
    if isinstance(op, kiln._ops.OpOverloadPacket):
        return op._qualified_name
    if not isinstance(op, str):
        raise TypeError(f"kiln.library: expected an operator name, OpOverload or CustomOpDef, got {type(op).__name__}")
    if "::" not in op:
        if ns is None:
            raise ValueError(f"kiln.library: expected a qualified name \"namespace::name\", got {op!r}")
        op = f"{ns}::{op}"
    return op[:-len(".default")] if op.endswith(".default") else op


def _library_for(full_name, lib):
    if lib is not None:
        return lib
    lib = Library(full_name.split("::", 1)[0], "FRAGMENT")
    _keep_alive.append(lib)
    return lib


def define(qualname, schema, *, lib=None, tags=()):
    """Defines the operator `qualname` ("mylib::foo") with `schema` ("(Tensor x) -> Tensor")."""
    if "::" not in qualname:
        raise ValueError(f"define(qualname, ...): expected \"namespace::name\", got {qualname!r}")
    ns, name = qualname.split("::", 1)
    lib = _library_for(qualname, lib)
    lib.define(name + schema, tags=tags)


def _device_keys(device_types):
    if device_types is None:
        return ["CPU", "CUDA"]  # every device: the function is device-generic
    if isinstance(device_types, str):
        device_types = [device_types]
    keys = []
    for d in device_types:
        d = str(d)
        if d not in _DEVICE_KEYS:
            raise ValueError(f"kiln.library: unsupported device type '{d}' (expected cpu, cuda or meta)")
        keys.append(_DEVICE_KEYS[d])
    return keys


def impl(qualname, types, func=None, *, lib=None):
    """Registers `func` for the operator's device types ("cpu", "cuda", a list of them,
    "default" for every device) or a dispatch key name; usable as a decorator."""
    def register(fn):
        full = _full_name(qualname)
        names = [types] if isinstance(types, str) else list(types)
        for t in names:
            keys = _device_keys(None) if t == "default" else \
                _device_keys(t) if t in _DEVICE_KEYS else _key_for(t)
            for key in keys:
                _C._library_impl(full, key, fn)
        return fn

    return register if func is None else register(func)


def register_kernel(op, device_types, func=None, /, *, lib=None):
    """The kernel of `op` for `device_types` ("cpu", "cuda", a list, None: all)."""
    def register(fn):
        full = _full_name(op)
        for key in _device_keys(device_types):
            _C._library_impl(full, key, fn)
        return fn

    return register if func is None else register(func)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1):
    """The fake function of `op`: called with FakeTensors (or meta tensors), it makes results
    with the right sizes, strides and dtypes without computing anything."""
    def register(fn):
        full = _full_name(op)
        for key in ("Meta", "Fake"):
            _C._library_impl(full, key, fn)
        return fn

    return register if func is None else register(func)


def register_autograd(op, backward, /, *, setup_context=None, lib=None):
    """Makes `op` differentiable: `setup_context(ctx, inputs, output)` saves what the backward
    needs, `backward(ctx, *grads)` returns one gradient per input of the op (None for one that
    needs none), as torch.library.register_autograd."""
    if not callable(backward):
        raise TypeError(f"register_autograd(): expected backward to be a function, got {type(backward).__name__}")
    if setup_context is not None and not callable(setup_context):
        raise TypeError(f"register_autograd(): expected setup_context to be a function, got "
                        f"{type(setup_context).__name__}")
    full = _full_name(op)
    overload = kiln._ops.overload_named(full)
    schema = overload._schema
    _C._library_impl(full, "Autograd", _autograd_kernel(overload, schema, backward, setup_context))


def _autograd_kernel(overload, schema, backward, setup_context):
    """The op's Autograd kernel (Note [Python kernels]): an autograd.Function over the op, whose
    forward calls it again under no_grad, which runs below autograd."""
    names = [a.name for a in schema.arguments]
    keyword = [a.kwarg_only for a in schema.arguments]
    op_name = schema.name + ("." + schema.overload_name if schema.overload_name else "")
    # the user's backward runs as written, never captured by a compile around the backward call
    # (Note [Python kernels run as written] in python/csrc/python_library.cc)
    backward = _C._dynamo._scoped_call(backward, None)

    def call(values):
        args = [v for v, k in zip(values, keyword) if not k]
        kwargs = {n: v for n, v, k in zip(names, values, keyword) if k}
        return overload(*args, **kwargs)

    class Function(kiln.autograd.Function):
        @staticmethod
        def forward(*values):
            return call(values)

        @staticmethod
        def setup_context(ctx, inputs, output):
            if setup_context is not None:
                setup_context(ctx, inputs, output)

        @staticmethod
        def backward(ctx, *grads):
            got = backward(ctx, *grads)
            got = got if isinstance(got, tuple) else (got,) if len(names) == 1 else got
            if not isinstance(got, (tuple, list)) or len(got) != len(names):
                raise RuntimeError(f"{op_name}: the backward registered with register_autograd must return a "
                                   f"tuple of {len(names)} gradients (one per input, None where there is none), "
                                   f"got {got!r}")
            return tuple(got)

    Function.__name__ = f"{op_name.split('::')[-1]}_backward"
    Function._backward_name = f"{op_name}Backward"

    def kernel(*args, **kwargs):
        values = list(args) + [kwargs[n] for n, k in zip(names, keyword) if k]
        return Function.apply(*values)

    return kernel


# --- custom_op -------------------------------------------------------------------------------------
class CustomOpDef:
    """What @custom_op makes: calling it calls the operator; `register_kernel`, `register_fake`
    and `register_autograd` add to it (torch.library.CustomOpDef)."""

    def __init__(self, namespace, name, schema, fn):
        self._namespace, self._name = namespace, name
        self._full_name = f"{namespace}::{name}"
        self._init_fn = fn
        self.__name__ = name
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self._lib = Library(namespace, "FRAGMENT")
        self._lib.define(name + schema)
        self._opoverload = kiln._ops.overload_named(self._full_name)

    def __repr__(self):
        return f"<CustomOpDef({self._full_name})>"

    def __call__(self, *args, **kwargs):
        return self._opoverload(*args, **kwargs)

    def register_kernel(self, device_types, fn=None, /):
        return register_kernel(self, device_types, fn)

    def register_fake(self, fn, /):
        return register_fake(self, fn)

    def register_autograd(self, backward, /, *, setup_context=None):
        register_autograd(self, backward, setup_context=setup_context)


def custom_op(name, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """Wraps a function into a custom operator "namespace::name" (torch.library.custom_op):
    `mutates_args` names the Tensor arguments it writes ("unknown": any of them), `device_types`
    the devices `fn` is the kernel for (None: all), `schema` overrides the inferred one."""
    def wrap(func):
        if "::" not in name:
            raise ValueError(f"custom_op: expected name \"namespace::name\", got {name!r}")
        namespace, opname = name.split("::", 1)
        if not opname.isidentifier():
            raise ValueError(f"custom_op: {opname!r} is not a valid operator name")
        text = infer_schema(func, mutates_args=mutates_args) if schema is None else schema
        op = CustomOpDef(namespace, opname, text, func)
        register_kernel(op, device_types, func)
        return op

    return wrap if fn is None else wrap(fn)


# --- schema inference --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _schema_types():
    """Python annotation -> schema type, for parameters (torch.library.infer_schema's table)."""
    scalar = typing.Union[int, float, bool]
    rows = [  # (type, schema type, T[] too, T?[] too, T[]? too)
        (kiln.Tensor, "Tensor", True, True, False),
        (int, "SymInt", True, False, True),
        (float, "float", True, False, True),
        (bool, "bool", True, False, True),
        (str, "str", False, False, False),
        (scalar, "Scalar", False, False, False),
        (_C.dtype, "ScalarType", False, False, False),
        (kiln.device, "Device", False, False, False),
    ]
    table = {}

    def sequences(t):
        return (typing.Sequence[t], typing.List[t], list[t], collections.abc.Sequence[t])  # noqa: UP006

    for t, text, as_list, optional_items, optional_list in rows:
        table[t] = text
        table[typing.Optional[t]] = text + "?"
        if as_list:
            for s in sequences(t):
                table[s] = text + "[]"
        if optional_items:
            for s in sequences(typing.Optional[t]):
                table[s] = text + "?[]"
        if optional_list:
            for s in sequences(t):
                table[typing.Optional[s]] = text + "[]?"
    return table


_RETURN_TYPES = {kiln.Tensor: "Tensor", typing.List[kiln.Tensor]: "Tensor[]", list[kiln.Tensor]: "Tensor[]",  # noqa: UP006
                 int: "SymInt", float: "float", bool: "bool", typing.Union[int, float, bool]: "Scalar"}


def _default_text(value, fail):
    if value is None or isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, (str, kiln.device)):
        return f'"{value}"'
    if isinstance(value, _C.dtype):
        return str(value).split(".", 1)[-1]
    fail(f"has an unsupported default value type {type(value)}")


def infer_schema(prototype_function, /, *, mutates_args, op_name=None):
    """The schema of `prototype_function` from its type hints, as torch.library.infer_schema:
    "(Tensor x, SymInt n, float scale=1.0) -> Tensor" ("name(...) -> ..." with `op_name`).
    Tensor arguments named in `mutates_args` (or all, for "unknown") are written: Tensor(a<i>!)."""
    sig = inspect.signature(prototype_function)
    hints = typing.get_type_hints(prototype_function) if any(
        isinstance(p.annotation, str) for p in sig.parameters.values()) or isinstance(sig.return_annotation, str) \
        else {}

    def fail(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")

    if isinstance(mutates_args, str):
        if mutates_args != "unknown":
            raise ValueError("mutates_args must either be a sequence of the names of the arguments that are mutated "
                             "or the string 'unknown'. ")
    else:
        mutates_args = tuple(mutates_args)
    table = _schema_types()
    params, seen, keyword = [], set(), False
    for idx, (name, p) in enumerate(sig.parameters.items()):
        if p.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            fail("We do not support positional-only args, varargs, or varkwargs.")
        if p.kind == inspect.Parameter.KEYWORD_ONLY and not keyword:
            params.append("*")
            keyword = True
        annotation = hints.get(name, p.annotation)
        if annotation is inspect.Parameter.empty:
            fail(f"Parameter {name} must have a type annotation.")
        text = table.get(annotation) if _hashable(annotation) else None
        if text is None:
            fail(f"Parameter {name} has unsupported type {p.annotation}.")
        mutated = (mutates_args == "unknown" and text.startswith("Tensor")) or \
            (mutates_args != "unknown" and name in mutates_args)
        if mutated:
            if not text.startswith("Tensor"):
                fail(f"Parameter {name} is in mutable_args but only Tensors or collections of Tensors can be mutated")
            text = f"Tensor(a{idx}!)" + text[len("Tensor"):]
        seen.add(name)
        if p.default is inspect.Parameter.empty:
            params.append(f"{text} {name}")
        else:
            params.append(f"{text} {name}={_default_text(p.default, lambda w: fail(f'Parameter {name} {w}.'))}")
    if mutates_args != "unknown":
        missing = set(mutates_args) - seen
        if missing:
            fail(f"{missing} in mutates_args were not found in the custom op's signature. mutates_args should "
                 f"contain the names of all args that the custom op mutates, or just the string 'unknown' if you "
                 f"don't know.")
    ret = hints.get("return", sig.return_annotation)
    if ret is None:
        returns = "()"
    elif ret is inspect.Parameter.empty:
        fail("No return type annotation was provided. Please add one.")
    elif typing.get_origin(ret) is tuple:
        items = typing.get_args(ret)
        if any(not _hashable(t) or t not in _RETURN_TYPES for t in items):
            fail(f"Return has unsupported type {ret}.")
        inner = ", ".join(_RETURN_TYPES[t] for t in items)
        returns = f"(({inner}))" if len(items) == 1 else f"({inner})"
    else:
        if not _hashable(ret) or ret not in _RETURN_TYPES:
            fail(f"Return has unsupported type {ret}.")
        returns = _RETURN_TYPES[ret]
    head = "" if op_name is None else op_name
    return f"{head}({', '.join(params)}) -> {returns}"


def _hashable(t):
    try:
        hash(t)
        return True
    except TypeError:
        return False


# --- opcheck -----------------------------------------------------------------------------------------
_OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def _tensors(values):
    out = []
    for v in values:
        if isinstance(v, kiln.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(_tensors(v))
    return out


def _clone(values):
    if isinstance(values, kiln.Tensor):
        return values.detach().clone().requires_grad_(values.requires_grad)
    if isinstance(values, (list, tuple)):
        return type(values)(_clone(v) for v in values)
    if isinstance(values, dict):
        return {k: _clone(v) for k, v in values.items()}
    return values


def _same(a, b, rtol, atol):
    return a.shape == b.shape and a.dtype == b.dtype and kiln.allclose(
        a.detach().float() if a.is_floating_point() else a.detach(),
        b.detach().float() if b.is_floating_point() else b.detach(), rtol=rtol, atol=atol, equal_nan=True)


def _check_schema(overload, args, kwargs):
    """Arguments the call changes are the ones its schema marks written (Tensor(a!))."""
    def by_name(args, kwargs):
        return {**dict(zip(names, args)), **kwargs}

    names = [a.name for a in overload._schema.arguments]
    written = {a.name for a in overload._schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    before = by_name(*_clone((args, kwargs)))
    overload(*args, **kwargs)
    for name, new in by_name(args, kwargs).items():
        for o, n in zip(_tensors([before[name]]), _tensors([new])):
            if name not in written and not _same(o, n, 0, 0):
                raise RuntimeError(f"opcheck: {overload._schema.name} changed its argument '{name}', which its "
                                   f"schema does not mark as written (list it in mutates_args)")


def _check_autograd_registration(overload, args, kwargs):
    """An operator called with inputs that require grad has a backward (register_autograd) or is
    made of other ops (CompositeImplicitAutograd)."""
    needs = any(t.requires_grad for t in _tensors(list(args) + list(kwargs.values())))
    if not needs:
        return
    full = overload._full_name
    if not (_C._library_has_kernel(full, "Autograd") or _C._library_has_kernel(full, "CompositeImplicitAutograd")):
        raise RuntimeError(f"opcheck: {overload._schema.name} was called with inputs that require grad but has no "
                           f"backward: register one with register_autograd (or call it under no_grad)")


def _check_faketensor(overload, args, kwargs):
    """The fake function's results have the real results' sizes, strides, dtypes and devices."""
    from kiln._subclasses import FakeTensorMode

    with kiln.no_grad():
        real = overload(*_clone(args), **_clone(kwargs))
        with FakeTensorMode() as mode:
            convert = lambda v: mode.from_tensor(v) if isinstance(v, kiln.Tensor) else (  # noqa: E731
                type(v)(convert(x) for x in v) if isinstance(v, (list, tuple)) else v)
            fake = overload(*[convert(a) for a in args], **{k: convert(v) for k, v in kwargs.items()})
    for i, (r, f) in enumerate(zip(_tensors([real]), _tensors([fake]))):
        for what in ("shape", "dtype", "device"):
            if getattr(r, what) != getattr(f, what):
                raise RuntimeError(f"opcheck: {overload._schema.name}'s fake function gave result {i} "
                                   f"{what} {getattr(f, what)}, its kernel {getattr(r, what)}")
        if r.numel() > 1 and r.stride() != f.stride():
            raise RuntimeError(f"opcheck: {overload._schema.name}'s fake function gave result {i} strides "
                               f"{f.stride()}, its kernel {r.stride()}")


def _check_aot_dispatch(overload, args, kwargs, rtol, atol):
    """Traced by AOTAutograd (forward and backward graphs, functionalized, run as traced) equals
    eager: results and input gradients."""
    from kiln._functorch.aot_autograd import aot_function

    def run(fn, args, kwargs):
        out = fn(*args, **kwargs)
        results = _tensors([out])
        leaves = [t for t in _tensors(list(args) + list(kwargs.values())) if t.requires_grad]
        grads = []
        diff = [r for r in results if r.requires_grad]
        if leaves and diff:
            grads = kiln.autograd.grad([r.sum() for r in diff], leaves, allow_unused=True)
        return results, grads

    want = run(overload, _clone(args), _clone(kwargs))
    as_traced = lambda gm, example_inputs: gm  # noqa: E731
    got = run(aot_function(lambda *a, **k: overload(*a, **k), as_traced), _clone(args), _clone(kwargs))
    for kind, w, g in (("result", want[0], got[0]), ("gradient", want[1], got[1])):
        for i, (a, b) in enumerate(zip(w, g)):
            if (a is None) != (b is None) or (a is not None and not _same(a, b, rtol, atol)):
                raise RuntimeError(f"opcheck: {overload._schema.name} compiled gave another {kind} {i} than eager")


def opcheck(op, args, kwargs=None, *, test_utils=_OPCHECK_TESTS, raise_exception=True, atol=None, rtol=None):
    """Checks an operator's definition on one call, as torch.library.opcheck: its schema's
    mutations ("test_schema"), a backward where inputs require grad ("test_autograd_registration"),
    its fake function against its kernel ("test_faketensor"), and compiled against eager
    ("test_aot_dispatch_dynamic"; kiln compiles static shapes). Returns {test: "SUCCESS" or the
    exception} with raise_exception=False; raises the first failure otherwise."""
    overload = kiln._ops.overload_named(_full_name(op)) if not isinstance(op, kiln._ops.OpOverload) else op
    kwargs = dict(kwargs or {})
    if isinstance(test_utils, str):
        test_utils = (test_utils,)
    unknown = set(test_utils) - set(_OPCHECK_TESTS)
    if unknown:
        raise ValueError(f"opcheck: unknown tests {sorted(unknown)} (expected some of {list(_OPCHECK_TESTS)})")
    if (atol is None) != (rtol is None):
        raise ValueError("opcheck: give both atol and rtol, or neither")
    rtol, atol = (1.3e-6, 1e-5) if rtol is None else (rtol, atol)
    checks = {
        "test_schema": lambda: _check_schema(overload, _clone(args), _clone(kwargs)),
        "test_autograd_registration": lambda: _check_autograd_registration(overload, args, kwargs),
        "test_faketensor": lambda: _check_faketensor(overload, args, kwargs),
        "test_aot_dispatch_dynamic": lambda: _check_aot_dispatch(overload, args, kwargs, rtol, atol),
    }
    results = {}
    for name in test_utils:
        try:
            checks[name]()
            results[name] = "SUCCESS"
        except Exception as e:  # noqa: BLE001  (each test's failure is reported as itself)
            if raise_exception:
                raise
            results[name] = e
    return results
