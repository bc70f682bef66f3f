"""kiln.fx.proxy: the Proxy objects that symbolic tracing runs a program on (torch.fx.proxy).

A Proxy stands for the value of one graph Node. Every operation on it (operators, attribute
access, method calls, kiln functions made traceable by the Tracer) records a new Node in the
tracer's graph and returns a Proxy for that node's value. What a Proxy cannot answer without a
concrete value (``bool(p)``, iterating it, ``len(p)``) raises TraceError, as in PyTorch.
"""

import dis
import functools
import inspect
import operator

from kiln.fx.node import Node, map_aggregate as _map_aggregate

__all__ = ["TraceError", "TracerBase", "GraphAppendingTracer", "Proxy", "Attribute", "ParameterProxy"]


class TraceError(ValueError):
    pass


def _is_node(a):
    return isinstance(a, Node)


class TracerBase:
    """What a Proxy needs from its tracer: a graph to add nodes to and the rules turning Python
    values into node arguments."""

    graph = None
    # Tracer options as in PyTorch (recorded for compatibility; stack traces are not recorded).
    record_stack_traces = False
    check_mutable_operations = False
    trace_asserts = False
    proxy_buffer_attributes = False
    traced_func_name = "forward"

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node):
        return Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        args_ = self.create_arg(args)
        kwargs_ = self.create_arg(kwargs)
        assert isinstance(args_, tuple)
        assert isinstance(kwargs_, dict)
        node = self.create_node(kind, target, args_, kwargs_, name, type_expr)
        return self.proxy(node) if proxy_factory_fn is None else proxy_factory_fn(node)

    def create_arg(self, a):
        """Turns a Python value into a node argument: Proxies become their nodes; tuples (named
        ones too), lists, dicts and slices are mapped element by element; constants pass."""
        import kiln

        if isinstance(a, Proxy):
            return a.node
        if hasattr(a, "__fx_create_arg__"):
            return a.__fx_create_arg__(self)
        if isinstance(a, tuple):
            if hasattr(a, "_fields"):
                return type(a)(*[self.create_arg(elem) for elem in a])
            return type(a)([self.create_arg(elem) for elem in a])
        if isinstance(a, list):
            return [self.create_arg(elem) for elem in a]
        if isinstance(a, dict):
            r = {}
            for k, v in a.items():
                k = self.create_arg(k)

                def no_node(arg):
                    if _is_node(arg):
                        raise RuntimeError(f"Keys for dictionaries used as an argument cannot contain a Node. Got key: {k}")
                    return arg

                _map_aggregate(k, no_node)
                r[k] = self.create_arg(v)
            return r
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if isinstance(a, range):
            return range(self.create_arg(a.start), self.create_arg(a.stop), self.create_arg(a.step))
        if _is_node(a):
            return a
        if a is None or a is ... or isinstance(a, _base_types()):
            return a
        if callable(a) and (type(a).__name__ in ("OpOverload", "OpOverloadPacket")):
            return a
        raise NotImplementedError(f"argument of type: {type(a)}")

    def to_bool(self, obj):
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def iter(self, obj):
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy is used in a loop or"
                         " as a *args or **kwargs function argument. See the kiln.fx docs for a more detailed "
                         "explanation of what types of control flow can be traced, and check out the Proxy "
                         "docstring for help troubleshooting Proxy iteration errors")

    def keys(self, obj):
        return Attribute(obj, "keys")()


@functools.lru_cache(None)
def _base_types():
    import kiln

    types = [str, int, float, bool, complex, kiln.dtype, kiln.Tensor, kiln.device, type(kiln.strided)]
    for name in ("SymInt", "SymFloat", "SymBool"):
        t = getattr(kiln, name, None)
        if isinstance(t, type):
            types.append(t)
    return tuple(types)


class GraphAppendingTracer(TracerBase):
    """The tracer of a Proxy made directly on a graph's node: new nodes are appended to it."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph
        self.scope = None
        self.module_stack = {}
        self.node_name_to_scope = {}


class Proxy:
    """A value under symbolic tracing: the node computing it and the tracer recording uses of it.

    Operators, attribute reads and method calls on a Proxy record call_function, getattr and
    call_method nodes. Control flow that needs the concrete value fails with TraceError:

        if x.sum() > 0:   # TraceError: symbolically traced variables cannot be used as inputs to control flow

    Pass such inputs through ``concrete_args`` to specialise the trace on them instead.
    """

    def __init__(self, node, tracer=None):
        if tracer is None:
            tracer = GraphAppendingTracer(node.graph)
        self.tracer = tracer
        self.node = node

    def __repr__(self):
        return f"Proxy({self.node.name})"

    def __getattr__(self, k):
        # Only called for names not found normally: a tensor attribute or method of the value.
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return Attribute(self, k)

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, d):
        self.__dict__ = d

    def __deepcopy__(self, memo):
        # Proxies refer to live graph nodes: a copy shares the node and the tracer.
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        # `a, b = proxy` unpacks by index: the calling bytecode says how many values it wants.
        frame = inspect.currentframe()
        calling = frame.f_back if frame is not None else None
        if calling is not None:
            for inst in dis.get_instructions(calling.f_code):
                if inst.offset == calling.f_lasti:
                    if inst.opname == "UNPACK_SEQUENCE":
                        return (self[i] for i in range(inst.argval))
                    break
        return self.tracer.iter(self)

    def __abs__(self):
        return self.tracer.create_proxy("call_function", operator.abs, (self,), {})

    def __bool__(self):
        return self.tracer.to_bool(self)

    def keys(self):
        return self.tracer.keys(self)

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want this call to be "
                           "recorded, please call kiln.fx.wrap('len') at module scope")

    # Python's reflected comparisons use the mirrored operator; hashing stays by identity.
    __hash__ = object.__hash__


class Attribute(Proxy):
    """``proxy.attr``: becomes a ``getattr`` node when used as a value, a call_method node when
    called."""

    def __init__(self, root, attr):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self):
        # The getattr node is made lazily: `x.relu()` needs only a call_method node.
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr, (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs):
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


class ParameterProxy(Proxy):
    """A Proxy for a parameter read during tracing: shape, size(), dim() and ndim answer from the
    real parameter (the tracer's param_shapes_constant option)."""

    def __init__(self, tracer, node, name, param):
        super().__init__(node, tracer)
        self.param = param
        self.name = name

    def __repr__(self):
        return f"ParameterProxy({self.name})"

    @property
    def shape(self):
        return self.param.shape

    def size(self, dim=None):
        return self.param.size() if dim is None else self.param.size(dim)

    def dim(self):
        return self.param.dim()

    @property
    def ndim(self):
        return self.param.ndim

    def numel(self):
        return self.param.numel()

    def nelement(self):
        return self.param.nelement()


# Operators: a.__add__(b) -> call_function[target=operator.add](a, b); the reflected forms swap.
_MAGIC_METHODS = ["add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift", "and_", "or_",
                  "xor", "matmul", "getitem", "eq", "ne", "lt", "gt", "le", "ge", "neg", "pos", "invert"]
_REFLECTABLE = ["add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "lshift", "rshift", "and_", "or_", "xor",
                "matmul"]


def _install_magic_methods():
    for method in _MAGIC_METHODS:
        dunder = f"__{method.strip('_')}__"
        target = getattr(operator, method)

        def impl(*args, _target=target, **kwargs):
            return args[0].tracer.create_proxy("call_function", _target, args, kwargs)

        impl.__name__ = dunder
        setattr(Proxy, dunder, impl)

    for method in _REFLECTABLE:
        dunder = f"__r{method.strip('_')}__"
        target = getattr(operator, method)

        def rimpl(self, rhs, _target=target):
            return self.tracer.create_proxy("call_function", _target, (rhs, self), {})

        rimpl.__name__ = dunder
        setattr(Proxy, dunder, rimpl)


_install_magic_methods()
