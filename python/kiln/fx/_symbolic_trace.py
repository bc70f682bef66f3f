"""kiln.fx symbolic tracing: Tracer, symbolic_trace and wrap (torch.fx._symbolic_trace).

The Tracer runs a module's forward on Proxies. Every operation on a Proxy records a node; calls
of submodules become call_module nodes when the module is a leaf (kiln.nn layers) and are traced
through otherwise; parameters and buffers read from the module become get_attr nodes.

kiln's functions have no __torch_function__ protocol, so the Tracer makes them traceable the way
torch.fx handles `wrap`ped functions: while it traces, the kiln op functions (`kiln.relu`,
`kiln.add`, ...), `kiln.nn.functional`'s functions, `math`'s functions and every function named
with `kiln.fx.wrap` are replaced (in the kiln namespaces and in the globals of each traced
forward) by wrappers that record a call_function node when a Proxy is among their arguments and
call the original otherwise; kiln.Tensor's op methods and `__getitem__` likewise record a
call_method node when a real tensor is called with a Proxy argument. Everything is restored
when tracing ends.
"""

import builtins
import functools
import inspect
import math
import types
import warnings

import kiln
from kiln import nn
from kiln.fx.graph import Graph
from kiln.fx.graph_module import GraphModule
from kiln.fx.node import has_side_effect
from kiln.fx.proxy import ParameterProxy, Proxy, TracerBase, _map_aggregate

__all__ = ["Tracer", "symbolic_trace", "wrap", "PH"]

_orig_module_call = nn.Module.__call__
_orig_module_getattr = nn.Module.__getattr__

# Functions named by kiln.fx.wrap: (id of the globals dict, name) -> that globals dict.
_wrapped_fns_to_patch = {}
_CO_VARARGS = inspect.CO_VARARGS
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS


class PHBase:
    """A placeholder marker inside concrete_args: that leaf stays an input of the graph."""

    def __repr__(self):
        return "PH"


PH = PHBase()


@has_side_effect
def _assert_is_none(value, msg):
    assert value is None, msg


@has_side_effect
def _assert(condition, message):
    """The check a concrete_args specialisation records (torch._assert): dead-code elimination keeps it."""
    assert condition, message


def _patch_function(fn, nargs):
    """`fn` with its *args/**kwargs (and keyword-only) parameters turned into `nargs` positional
    ones, so the tracer can pass a Proxy for each."""
    fn = inspect.unwrap(fn)
    co = fn.__code__
    code = co.replace(co_flags=co.co_flags & ~(_CO_VARARGS | _CO_VARKEYWORDS), co_argcount=nargs,
                      co_kwonlyargcount=0)
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def wrap(fn_or_name):
    """Makes a module-level function a leaf of symbolic tracing: calls of it with Proxy arguments
    are recorded as one call_function node instead of being traced through.

        kiln.fx.wrap("len")           # at module scope
        kiln.fx.wrap(my_helper)

    Must be called at the top level of a module."""
    if not callable(fn_or_name) and not isinstance(fn_or_name, str):
        raise RuntimeError("Unsupported type for global function! Must be either a callable or string name")
    fn_name = fn_or_name.__name__ if callable(fn_or_name) else fn_or_name
    frame = inspect.currentframe()
    f = frame.f_back if frame is not None else None
    if f is None or f.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    _wrapped_fns_to_patch[(id(f.f_globals), fn_name)] = f.f_globals
    return fn_or_name


def _find_proxy(*objects):
    found = []

    def find(x):
        if isinstance(x, Proxy) and not found:
            found.append(x)
        return x

    _map_aggregate(objects, find)
    return found[0] if found else None


# Wrappers depend only on the function they wrap (the Proxy carries its tracer), so they are
# made once: id(original) -> (original, wrapper).
_wrapper_cache = {}


def _create_wrapped_func(orig_fn):
    cached = _wrapper_cache.get(id(orig_fn))
    if cached is not None and cached[0] is orig_fn:
        return cached[1]
    wrapped = _make_wrapper(orig_fn)
    _wrapper_cache[id(orig_fn)] = (orig_fn, wrapped)
    return wrapped


def _make_wrapper(orig_fn):
    @functools.wraps(orig_fn)
    def wrapped(*args, **kwargs):
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            out = proxy.tracer.create_proxy("call_function", orig_fn, args, kwargs)
            out.node.meta["is_wrapped"] = True
            return out
        return orig_fn(*args, **kwargs)

    wrapped.__fx_already_patched = True
    wrapped.__fx_orig = orig_fn
    return wrapped


def _make_method_wrapper(name, orig):
    """A Tensor method that records a call_method node when a Proxy is among its arguments (a real
    tensor combined with traced values: `self.buffer.mul(x)`, `self.table[:x.size(0)]`)."""

    @functools.wraps(orig)
    def wrapped(self, *args, **kwargs):
        proxy = _find_proxy(args, kwargs)
        if proxy is not None:
            return proxy.tracer.create_proxy("call_method", name, (self,) + args, kwargs)
        return orig(self, *args, **kwargs)

    wrapped.__fx_already_patched = True
    return wrapped


@functools.lru_cache(None)
def _tensor_method_wrappers():
    """(name, wrapper) for the Tensor methods of kiln's ops and indexing, made once."""
    names = {name for _q, name, variants in kiln._C._packets() if variants & 2} | {"__getitem__"}
    out = []
    for name in sorted(names):
        # __getitem__ is TensorBase's mapping slot (Note [Basic indexing in C++])
        orig = getattr(kiln.Tensor, name) if name == "__getitem__" else kiln.Tensor.__dict__.get(name)
        if orig is not None and callable(orig):
            out.append((name, _make_method_wrapper(name, orig)))
    return tuple(out)


class _Patcher:
    """Replaces dict entries and class attributes for the duration of a trace, then restores them."""

    def __init__(self):
        self._undo = []

    def patch(self, frame_dict, name, new_fn):
        if name not in frame_dict and hasattr(builtins, name):
            self._undo.append(lambda d=frame_dict, n=name: d.pop(n, None))
        elif getattr(frame_dict.get(name), "__fx_already_patched", False):
            return
        else:
            self._undo.append(lambda d=frame_dict, n=name, v=frame_dict[name]: d.__setitem__(n, v))
        frame_dict[name] = new_fn

    def patch_method(self, cls, name, new_fn):
        orig = getattr(cls, name)
        if getattr(orig, "__fx_already_patched", False):
            return
        self._undo.append(lambda c=cls, n=name, v=cls.__dict__.get(name, None), had=name in cls.__dict__:
                          setattr(c, n, v) if had else delattr(c, n))
        setattr(cls, name, new_fn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self._undo:
            self._undo.pop()()


@functools.lru_cache(None)
def _kiln_functions():
    """The callables the Tracer records as call_function nodes when given Proxies: kiln's op
    functions, kiln.nn.functional's functions and math's functions."""
    import kiln.nn.functional as F

    fns = {}
    for _qualified, name, variants in kiln._C._packets():
        if variants & 1:
            obj = getattr(kiln, name, None)
            if callable(obj) and not isinstance(obj, type):
                fns[id(obj)] = obj
    for name in F.__all__:
        obj = getattr(F, name, None)
        if callable(obj):
            fns[id(obj)] = obj
    for name in dir(math):
        obj = getattr(math, name)
        if callable(obj) and not name.startswith("_"):
            fns[id(obj)] = obj
    return fns


class Tracer(TracerBase):
    """Turns a module or function into a Graph by running it on Proxies (torch.fx.Tracer).

    Override is_leaf_module to choose which submodules become call_module nodes, create_arg to
    change how values become node arguments, and create_proxy/create_node to annotate nodes."""

    def __init__(self, autowrap_modules=(math,), autowrap_functions=(), param_shapes_constant=False):
        super().__init__()
        self._autowrap_modules = tuple(autowrap_modules)
        self._autowrap_function_ids = set()
        self._autowrap_extra = {}
        for mod in autowrap_modules:
            for name, value in vars(mod).items():
                if callable(value) and not name.startswith("_"):
                    self._autowrap_function_ids.add(id(value))
                    self._autowrap_extra[id(value)] = value
        for fn in autowrap_functions:
            self._autowrap_function_ids.add(id(fn))
            self._autowrap_extra[id(fn)] = fn
        self.param_shapes_constant = param_shapes_constant
        self.submodule_paths = None
        self.root = None
        self.graph = None
        self.tensor_attrs = {}
        self.scope = None
        self.module_stack = {}
        self.num_calls = {}
        self.node_name_to_scope = {}

    # -- value -> argument -------------------------------------------------------------------

    def create_arg(self, a):
        """Parameters and buffers of the root become get_attr nodes; other tensors are stored on
        the root as `_tensor_constant<N>` and read back with get_attr."""
        if isinstance(a, nn.Parameter):
            for n_, p_ in self.root.named_parameters():
                if a is p_:
                    return self.create_node("get_attr", n_, (), {})
            raise NotImplementedError(f"parameter {a} is not a member of this module")
        if isinstance(a, kiln.Tensor):
            for n_, b_ in self.root.named_buffers():
                if a is b_:
                    return self.create_node("get_attr", n_, (), {})
            qualname = self._tensor_attr_name(a)
            if qualname is None:
                i = 0
                while True:
                    qualname = f"_tensor_constant{i}"
                    if not hasattr(self.root, qualname):
                        break
                    i += 1
                self.tensor_attrs[id(a)] = (qualname, a)
                setattr(self.root, qualname, a)
            return self.create_node("get_attr", qualname, (), {})
        return super().create_arg(a)

    def _tensor_attr_name(self, t):
        entry = self.tensor_attrs.get(id(t))
        return entry[0] if entry is not None and entry[1] is t else None

    # -- modules -------------------------------------------------------------------------------

    def is_leaf_module(self, m, module_qualified_name):
        """kiln.nn's own layers are leaves (recorded as call_module); containers and user modules
        are traced through."""
        module = type(m).__module__ or ""
        return (module == "kiln.nn" or module.startswith("kiln.nn.")) and not isinstance(
            m, (nn.Sequential, nn.ModuleList, nn.ModuleDict))

    def path_of_module(self, mod):
        """The qualified name of `mod` inside the root (NameError if it is not a submodule)."""
        if self.submodule_paths is not None:
            path = self.submodule_paths.get(mod)
            if path is None:
                raise NameError("module is not installed as a submodule")
            return path
        for n, p in self.root.named_modules():
            if mod is p:
                return n
        raise NameError("module is not installed as a submodule")

    def call_module(self, m, forward, args, kwargs):
        """A call of submodule `m`: a call_module node for a leaf, its forward traced otherwise."""
        module_qualified_name = self.path_of_module(m)
        # module_stack (path -> (qualified name, type)) is pushed and popped around the call, so
        # nodes made inside it carry it as meta["nn_module_stack"]; repeated calls get "@<n>".
        num_calls = self.num_calls.get(module_qualified_name, 0)
        key = f"{module_qualified_name}@{num_calls}" if num_calls > 0 else module_qualified_name
        self.module_stack[key] = (module_qualified_name, type(m))
        self.num_calls[module_qualified_name] = num_calls + 1
        try:
            if not self.is_leaf_module(m, module_qualified_name):
                self._patch_globals_of(getattr(type(m), "forward", None))
                return forward(*args, **kwargs)
            return self.create_proxy("call_module", module_qualified_name, args, kwargs)
        finally:
            self.module_stack.pop(key, None)

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        if self.module_stack:
            node.meta["nn_module_stack"] = dict(self.module_stack)
        return node

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        """A module attribute read during tracing: parameters of the root become (cached) get_attr
        proxies; buffers too when proxy_buffer_attributes is set."""

        def proxy_for(collection):
            for n, p in collection:
                if attr_val is p:
                    if n not in parameter_proxy_cache:
                        factory = None
                        if self.param_shapes_constant:
                            factory = lambda node, n=n: ParameterProxy(self, node, n, attr_val)  # noqa: E731
                        parameter_proxy_cache[n] = self.create_proxy("get_attr", n, (), {},
                                                                     proxy_factory_fn=factory)
                    return parameter_proxy_cache[n]
            return None

        if isinstance(attr_val, nn.Parameter):
            p = proxy_for(self.root.named_parameters())
            if p is not None:
                return p
        if self.proxy_buffer_attributes and isinstance(attr_val, kiln.Tensor):
            p = proxy_for(self.root.named_buffers())
            if p is not None:
                return p
        return attr_val

    # -- the trace -----------------------------------------------------------------------------

    def create_args_for_root(self, root_fn, is_module, concrete_args=None):
        """The placeholders (or concrete values) the traced function is called with."""
        fn_for_analysis = inspect.unwrap(root_fn)
        co = fn_for_analysis.__code__
        total_args = co.co_argcount + co.co_kwonlyargcount
        names_iter = iter(co.co_varnames)
        args = []
        skip = 0
        if is_module:
            if total_args == 0:
                raise RuntimeError("``self`` argument cannot be part of *args expansion!")
            skip = 1
            next(names_iter)
            args.append(self.root)
        sig = inspect.signature(fn_for_analysis)
        arg_names = [next(names_iter) for _ in range(skip, total_args)]
        if isinstance(concrete_args, tuple):
            if len(arg_names) != len(concrete_args):
                raise RuntimeError(f"Tracing expected {len(arg_names)} arguments but got {len(concrete_args)} "
                                   "concrete arguments")
            concrete_args = dict(zip(arg_names, concrete_args))
        elif concrete_args is not None and not isinstance(concrete_args, dict):
            raise TypeError(f"concrete_args must be a dict or a tuple, got {type(concrete_args).__name__}")
        if concrete_args:
            unknown = [k for k in concrete_args if k not in arg_names]
            if unknown:
                raise RuntimeError(f"concrete_args names {unknown} are not parameters of "
                                   f"{getattr(fn_for_analysis, '__qualname__', fn_for_analysis)}; "
                                   f"its parameters are {arg_names}")
        for name in arg_names:
            args.append(self._proxy_placeholder(name, concrete_args, sig, fn_for_analysis))
        if co.co_kwonlyargcount > 0 or co.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS):
            # `*args` / `**kwargs` become placeholders of their own ("*args"), and the function is
            # called with them as plain positional parameters.
            if co.co_flags & _CO_VARARGS:
                args.append(self._proxy_placeholder("*" + next(names_iter), concrete_args, sig, fn_for_analysis))
            if co.co_flags & _CO_VARKEYWORDS:
                args.append(self._proxy_placeholder("**" + next(names_iter), concrete_args, sig, fn_for_analysis))
            root_fn = _patch_function(root_fn, len(args))
        return root_fn, args

    def _proxy_placeholder(self, name, concrete_args, sig, fn_for_analysis):
        if concrete_args is not None and name in concrete_args:
            cnt = 0

            def replace_ph(x):
                nonlocal cnt
                cnt += 1
                param = sig.parameters[name]
                default = () if param.default is inspect.Parameter.empty else (param.default,)
                out = self.create_proxy("placeholder", f"{name}_{cnt}", default, {})
                if isinstance(x, PHBase):
                    return out
                if type(x) in (bool, int, float, str):
                    self.create_proxy("call_function", _assert,
                                      (out == x, f"{name} has been specialized to have value {x} but got another value"),
                                      {})
                elif x is None:
                    self.create_proxy("call_function", _assert_is_none,
                                      (out, f"{name} has been specialized to have value None but got another value"),
                                      {})
                else:
                    warnings.warn(f"Was not able to add assertion to guarantee correct input {name} to specialized "
                                  "function. It is up to the user to make sure that your inputs match the inputs "
                                  "you specialized the function with.")
                return x

            return _map_aggregate(concrete_args[name], replace_ph)
        if name[0] == "*":
            default = ()
        else:
            param = sig.parameters[name]
            default = () if param.default is inspect.Parameter.empty else (param.default,)
        return self.create_proxy("placeholder", name, default, {},
                                 type_expr=fn_for_analysis.__annotations__.get(name, None))

    def _patch_globals_of(self, fn):
        patcher = getattr(self, "_patcher", None)
        fn = inspect.unwrap(fn) if fn is not None else None
        globs = getattr(fn, "__globals__", None)
        if patcher is None or globs is None or id(globs) in self._patched_globals:
            return
        self._patched_globals.add(id(globs))
        for name, value in list(globs.items()):
            if id(value) in self._wrap_ids and not name.startswith("__"):
                patcher.patch(globs, name, _create_wrapped_func(value))

    def trace(self, root, concrete_args=None):
        """Runs `root` (a module's forward, or a function) on Proxies; returns the Graph."""
        if isinstance(root, nn.Module):
            self.root = root
            fn = getattr(type(root), self.traced_func_name)
            self.submodule_paths = {mod: name for name, mod in root.named_modules()}
        else:
            self.root = nn.Module()
            fn = root
        self.graph = Graph(tracer_cls=type(self))
        self.tensor_attrs = {}
        self.module_stack = {}
        self.num_calls = {}

        def collect_tensor_attrs(m, prefix_atoms):
            for k, v in m.__dict__.items():
                if isinstance(v, kiln.Tensor):
                    self.tensor_attrs[id(v)] = (".".join(prefix_atoms + [k]), v)
            for k, v in m.named_children():
                collect_tensor_attrs(v, prefix_atoms + [k])

        collect_tensor_attrs(self.root, [])

        self._wrap_ids = dict(_kiln_functions())
        self._wrap_ids.update(self._autowrap_extra)
        self._patched_globals = set()
        parameter_proxy_cache = {}
        tracer = self

        @functools.wraps(_orig_module_getattr)
        def module_getattr_wrapper(mod, attr):
            attr_val = _orig_module_getattr(mod, attr)
            return tracer.getattr(attr, attr_val, parameter_proxy_cache)

        @functools.wraps(_orig_module_call)
        def module_call_wrapper(mod, *args, **kwargs):
            def forward(*args, **kwargs):
                return _orig_module_call(mod, *args, **kwargs)

            return tracer.call_module(mod, forward, args, kwargs)

        with _Patcher() as patcher:
            self._patcher = patcher
            try:
                fn, args = self.create_args_for_root(fn, isinstance(root, nn.Module), concrete_args)
                patcher.patch_method(nn.Module, "__getattr__", module_getattr_wrapper)
                patcher.patch_method(nn.Module, "__call__", module_call_wrapper)
                for name, wrapper in _tensor_method_wrappers():
                    patcher.patch_method(kiln.Tensor, name, wrapper)
                # kiln's namespaces, then the traced function's globals, then wrap()ped names.
                import kiln.nn.functional as F

                for namespace in (vars(kiln), vars(F)) + tuple(vars(mod) for mod in self._autowrap_modules):
                    for name, value in list(namespace.items()):
                        if id(value) in self._wrap_ids and not name.startswith("__"):
                            patcher.patch(namespace, name, _create_wrapped_func(value))
                self._patch_globals_of(fn)
                for (_, name), globs in _wrapped_fns_to_patch.items():
                    if name not in globs and hasattr(builtins, name):
                        orig = getattr(builtins, name)
                    else:
                        orig = globs[name]
                    patcher.patch(globs, name, _create_wrapped_func(orig))
                result = fn(*args)
                self.create_node("output", "output", (self.create_arg(result),), {},
                                 type_expr=fn.__annotations__.get("return", None)
                                 if hasattr(fn, "__annotations__") else None)
            finally:
                self._patcher = None
        self.submodule_paths = None
        return self.graph

    def __deepcopy__(self, memo):
        new = Tracer()
        for k, v in self.__dict__.items():
            if k not in ("_patcher",):
                setattr(new, k, v)
        return new


def symbolic_trace(root, concrete_args=None):
    """Symbolically traces `root` (an nn.Module or a function) into a GraphModule.

        gm = kiln.fx.symbolic_trace(model)
        gm = kiln.fx.symbolic_trace(f, concrete_args={"flag": True})   # specialises on flag
    """
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = root.__class__.__name__ if isinstance(root, nn.Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
