"""Python source for an FX graph: the `forward` a GraphModule runs (`gm.code`).

One line per node, in graph order; placeholders become parameters; each value is dropped
(`x = None`) right after its last use so intermediates are freed as early as eager would free
them. Callables are written by their import path (`kiln.relu`, `kiln.ops.aten.add.Tensor`,
`operator.getitem` as `x[0]`) or, failing that, bound as globals of the generated module.
"""

import builtins
import inspect
import keyword
import math
import operator
import re

import kiln
from kiln.fx.traceback import provenance_comment

_BINARY = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
    operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
    operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
    operator.rshift: ">>", operator.eq: "==", operator.ne: "!=", operator.lt: "<",
    operator.le: "<=", operator.gt: ">", operator.ge: ">=",
}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}

_DTYPE_ABBR = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
               "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8"}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PythonCode:
    """Generated source plus the globals it runs with."""

    def __init__(self, src, globals_, lineno_map=None):
        self.src = src
        self.globals = globals_
        self._lineno_map = lineno_map or {}


def _is_ident(s):
    return bool(_IDENT.match(s)) and not keyword.iskeyword(s)


def _attr_path(root, path):
    """`self.layer1.conv`, or getattr(...) where an atom is not an identifier (`layer1.0`)."""
    out = root
    for atom in path.split("."):
        out = f"{out}.{atom}" if _is_ident(atom) else f"getattr({out}, {atom!r})"
    return out


def _kiln_path(obj):
    """The dotted path under `kiln` that names obj, if any (checked by lookup)."""
    if isinstance(obj, kiln._ops.OpOverload):
        return "kiln.ops." + str(obj)
    if isinstance(obj, kiln._ops.OpOverloadPacket):
        return "kiln.ops." + str(obj)
    name = getattr(obj, "__name__", None)
    module = getattr(obj, "__module__", None) or ""
    if isinstance(obj, kiln._C._OpFunction):
        module = "kiln"  # kiln.relu and friends are op functions defined on the kiln module
    if not isinstance(name, str) or not module.startswith("kiln"):
        return None
    for prefix in ("kiln", module, module.replace("._", ".")):
        parts = prefix.split(".")[1:]
        target = kiln
        try:
            for p in parts:
                target = getattr(target, p)
            if getattr(target, name) is obj:
                return ".".join(["kiln"] + parts + [name])
        except AttributeError:
            continue
    return None


def pretty_target(obj):
    """How graph printing names a call_function target: `kiln.relu`, `operator.add`, `aten.add.Tensor`."""
    if isinstance(obj, (kiln._ops.OpOverload, kiln._ops.OpOverloadPacket)):
        return str(obj)
    path = _kiln_path(obj)
    if path is not None:
        return path
    name = getattr(obj, "__name__", None)
    module = getattr(obj, "__module__", None)
    if name is None:
        return repr(obj)
    if module == "builtins":
        return f"builtins.{name}"
    if module == "_operator":
        return f"operator.{name}"
    qual = getattr(obj, "__qualname__", name)
    return f"{module}.{qual}" if module else qual


def tensor_annotation(val):
    """`"f32[3, 4]"` for a tensor value, as PyTorch prints make_fx graphs."""
    dtype = str(val.dtype).replace("kiln.", "")
    sizes = ", ".join(str(s) for s in val.shape)
    return f'"{_DTYPE_ABBR.get(dtype, dtype)}[{sizes}]"'


class _Globals:
    def __init__(self, taken=()):
        self.taken = set(taken)  # node names: globals never shadow a local value
        self.ns = {"kiln": kiln, "device": kiln.device, "inf": math.inf, "nan": math.nan,
                   "NoneType": type(None), "operator": operator}

    def add(self, hint, obj):
        """A name under which the generated code can reach obj."""
        if getattr(builtins, hint, None) is obj:
            return hint
        for name, existing in self.ns.items():
            if existing is obj:
                return name
        base = re.sub(r"[^0-9a-zA-Z_]+", "_", hint) or "_global"
        if base[0].isdigit() or not _is_ident(base):
            base = "_" + base
        name, i = base, 0
        while name in self.ns or name in self.taken or hasattr(builtins, name):
            i += 1
            name = f"{base}_{i}"
        self.ns[name] = obj
        return name

    def callable_name(self, fn):
        path = _kiln_path(fn)
        if path is not None:
            return path
        if getattr(builtins, getattr(fn, "__name__", ""), None) is fn:
            return fn.__name__
        if getattr(operator, getattr(fn, "__name__", ""), None) is fn:
            return "operator." + fn.__name__
        return self.add(getattr(fn, "__name__", type(fn).__name__), fn)


def _repr(arg, g):
    from kiln.fx.node import Node
    if isinstance(arg, Node):
        return arg.name
    if isinstance(arg, tuple) and not hasattr(arg, "_fields") and type(arg) is tuple:
        inner = ", ".join(_repr(a, g) for a in arg)
        return f"({inner},)" if len(arg) == 1 else f"({inner})"
    if type(arg) is list:
        return "[" + ", ".join(_repr(a, g) for a in arg) + "]"
    if type(arg) is dict:
        return "{" + ", ".join(f"{_repr(k, g)}: {_repr(v, g)}" for k, v in arg.items()) + "}"
    if isinstance(arg, slice):
        return f"slice({_repr(arg.start, g)}, {_repr(arg.stop, g)}, {_repr(arg.step, g)})"
    if isinstance(arg, float):
        if math.isinf(arg):
            return "inf" if arg > 0 else "-inf"
        if math.isnan(arg):
            return "nan"
        return repr(arg)
    if arg is None or isinstance(arg, (bool, int, str, bytes)) or arg is Ellipsis:
        return repr(arg)
    if isinstance(arg, kiln.dtype):
        return str(arg)
    if isinstance(arg, kiln.device):
        return repr(arg)
    if getattr(arg, "_kiln_enum_kind", None) is not None:
        return "kiln." + arg._name
    if callable(arg) and (inspect.isfunction(arg) or inspect.isbuiltin(arg) or inspect.isclass(arg)
                          or isinstance(arg, (kiln._ops.OpOverload, kiln._ops.OpOverloadPacket))):
        return g.callable_name(arg)
    return g.add("_" + type(arg).__name__.lower(), arg)


def _format_args(args, kwargs, g):
    parts = [_repr(a, g) for a in args]
    parts += [f"{k} = {_repr(v, g)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def python_code(graph, root_module="self", verbose=False):
    nodes = list(graph.nodes)
    g = _Globals(n.name for n in nodes)
    # The last node reading each value: the value is released right after it.
    last_use = {}
    for node in nodes:
        for inp in node.all_input_nodes:
            last_use[inp] = node
    releases = {}
    for value, user in last_use.items():
        releases.setdefault(user, []).append(value)

    params, body = [], []
    last_provenance = None  # a graph with no stack traces prints none of these comments
    for node in nodes:
        annotation = ""
        if verbose and node.op not in ("placeholder", "output"):
            # the user's line a node came from, once per run of nodes from the same line
            provenance = provenance_comment(node.meta.get("stack_trace"))
            if provenance != last_provenance:  # PyTorch's words where a run of nodes has none
                body.append(provenance if provenance is not None else "# No stacktrace found for following nodes")
            last_provenance = provenance
        if verbose:
            val = node.meta.get("val") if "val" in node.meta else None
            if isinstance(val, kiln.Tensor):
                annotation = ": " + tensor_annotation(val)
        if node.op == "placeholder":
            p = node.target
            if node.type is not None and not annotation:
                annotation = ": " + getattr(node.type, "__name__", repr(node.type))
            if p.startswith("*"):
                params.append(p)
            elif node.args:
                params.append(f"{p}{annotation} = {_repr(node.args[0], g)}")
            else:
                params.append(f"{p}{annotation}")
            if node.name != p.lstrip("*"):
                body.append(f"{node.name} = {p.lstrip('*')}")
            continue
        if node.op == "output":
            body.append(f"return {_repr(node.args[0], g)}")
            continue
        lhs = f"{node.name}{annotation}"
        if node.op == "get_attr":
            line = f"{lhs} = {_attr_path(root_module, node.target)}"
        elif node.op == "call_module":
            line = f"{lhs} = {_attr_path(root_module, node.target)}({_format_args(node.args, node.kwargs, g)})"
        elif node.op == "call_method":
            self_arg, *rest = node.args
            line = f"{lhs} = {_repr(self_arg, g)}.{node.target}({_format_args(rest, node.kwargs, g)})"
        else:
            fn, args, kwargs = node.target, node.args, node.kwargs
            if fn in _BINARY and len(args) == 2 and not kwargs:
                line = f"{lhs} = {_repr(args[0], g)} {_BINARY[fn]} {_repr(args[1], g)}"
            elif fn in _UNARY and len(args) == 1 and not kwargs:
                line = f"{lhs} = {_UNARY[fn]}{_repr(args[0], g)}"
            elif fn is operator.getitem and len(args) == 2 and not kwargs:
                line = f"{lhs} = {_repr(args[0], g)}[{_repr(args[1], g)}]"
            elif fn is getattr and len(args) == 2 and isinstance(args[1], str) and _is_ident(args[1]) and not kwargs:
                line = f"{lhs} = {_repr(args[0], g)}.{args[1]}"
            else:
                line = f"{lhs} = {g.callable_name(fn)}({_format_args(args, kwargs, g)})"
        dead = [v.name for v in releases.get(node, []) if v is not node]
        if not node.users:
            dead.append(node.name)
        if dead:
            line += ";  " + " = ".join(dead) + " = None"
        body.append(line)
    if not body or not body[-1].startswith("return"):
        body.append("pass")
    head = f"def forward({', '.join([root_module] + params)}):"
    src = "\n\n\n" + head + "\n" + "\n".join("    " + line for line in body) + "\n    "
    return PythonCode(src, g.ns)
