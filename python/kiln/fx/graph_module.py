"""kiln.fx.GraphModule: an nn.Module that owns a Graph and runs Python generated from it.

    gm = kiln.fx.GraphModule(root, graph)   # copies the submodules/attributes the graph uses
    gm.code                                 # the generated forward, readable Python
    gm.graph.erase_node(...); gm.recompile()

Each instance gets its own class (so `forward` can be set per instance, as in PyTorch). The
generated source is registered with linecache under a unique file name, so tracebacks and
`inspect.getsource` show the generated lines.

Note [Code generated on first use]: setting `graph` (every constructor does) only marks the code
stale, as PyTorch's _LazyGraphModule does: forward is generated and compiled when it is first read
(called, inspected, traced) or `code` is. A compiled training step builds seven GraphModules
whose forward Inductor never runs; generating and compiling their Python was 0.3 of the 2.5 s
a 16-layer GPT took to compile. recompile() itself stays eager (it returns the PythonCode).
"""

import copy
import itertools
import linecache
import os
import weakref

import kiln
from kiln import nn
from kiln.fx.graph import Graph
from kiln.fx import _codegen

_next_id = itertools.count()


def _exec_with_source(src, globals_):
    key = f"<eval_with_key>.{next(_next_id)}"
    linecache.cache[key] = (len(src), None, src.splitlines(True), key)
    exec(compile(src, key, "exec"), globals_)
    return key


def _forward_from_src(src, globals_):
    globals_copy = dict(globals_)
    key = _exec_with_source(src, globals_copy)
    forward = globals_copy["forward"]
    del globals_copy["forward"]
    # The source lines serve tracebacks of this forward only: they go when it does (else every
    # graph ever compiled keeps its source in linecache, issue 16's memory per compiled function).
    weakref.finalize(forward, linecache.cache.pop, key, None).atexit = False
    return forward


def _copy_attr(from_module, to_module, target):
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:  # already installed with its whole subtree
            return
        if t is None:
            t = nn.Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    orig = getattr(from_module, field)
    if isinstance(orig, kiln.Tensor) and not isinstance(orig, nn.Parameter):
        to_module.register_buffer(field, orig)
    else:
        setattr(to_module, field, orig)


def _assign_attr(from_obj, to_module, target):
    *prefix, field = target.split(".")
    for item in prefix:
        t = getattr(to_module, item, None)
        if t is None:
            t = nn.Module()
            setattr(to_module, item, t)
        to_module = t
    if isinstance(from_obj, kiln.Tensor) and not isinstance(from_obj, nn.Parameter):
        to_module.register_buffer(field, from_obj)
    else:
        setattr(to_module, field, from_obj)


class _GeneratedOnFirstUse:
    """type(gm).forward while the code is stale: reading it, from the instance or from its class
    (each instance has a class of its own), generates the code and returns the real forward."""

    def __init__(self, gm):
        self._gm = weakref.ref(gm)

    def __get__(self, obj, objtype=None):
        gm = obj if obj is not None else self._gm()
        if gm is None:
            raise RuntimeError("forward of a GraphModule that no longer exists")
        gm.recompile()
        return type(gm).forward.__get__(obj, objtype)


class GraphModule(nn.Module):
    """A module built from a Graph: `forward` is the graph's generated code."""

    __module__ = "kiln.fx"

    def __new__(cls, *args, **kwargs):
        # Every instance gets a class of its own, so recompile() can set forward on it.
        for t in cls.__mro__:
            c = t.__qualname__.split(".")[-1]
            if c != "GraphModuleImpl":
                cls = t
                break

        class GraphModuleImpl(cls):
            pass

        return super().__new__(GraphModuleImpl)

    def __init__(self, root, graph, class_name="GraphModule"):
        super().__init__()
        self.__class__.__name__ = class_name
        if not isinstance(graph, Graph):
            raise TypeError(f"GraphModule expects a kiln.fx.Graph, got {type(graph).__name__}")
        if isinstance(root, nn.Module):
            if hasattr(root, "training"):
                self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if not isinstance(node.target, str):
                        raise TypeError(f"node {node.name} target must be a str, got {node.target!r}")
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node.name} referenced target {node.target} but that target "
                                           "was not provided in ``root``!")
                    _assign_attr(root[node.target], self, node.target)
        else:
            raise RuntimeError("Unsupported type " + str(root) + " passed for root!")
        self.meta = {}
        self.graph = graph

    @property
    def graph(self):
        return self._graph

    @graph.setter
    def graph(self, g):
        if not isinstance(g, Graph):
            raise TypeError(f"Expected a kiln.fx.Graph, got {type(g).__name__}")
        self.__dict__["_graph"] = g
        g.owning_module = self
        self._lazy_recompile()

    @property
    def code(self):
        if isinstance(type(self).__dict__.get("forward"), _GeneratedOnFirstUse):
            self.recompile()
        return self._code

    def recompile(self):
        """Regenerates forward from self.graph; call it after editing the graph."""
        python_code = self._graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        type(self).forward = _forward_from_src(python_code.src, python_code.globals)
        return python_code

    def _lazy_recompile(self):
        """recompile() when forward or `code` is next read (Note [Code generated on first use])."""
        type(self).forward = _GeneratedOnFirstUse(self)

    def print_readable(self, print_output=True, include_stride=False, include_device=False, colored=False):
        """The module as a class definition, with tensor shapes from meta["val"] where known."""
        src = self._graph.python_code(root_module="self", verbose=True).src.strip("\n")
        body = "\n".join(("    " + line) if line.strip() else "" for line in src.splitlines()).rstrip()
        out = f"class {type(self).__name__}(kiln.nn.Module):\n{body}\n"
        if print_output:
            print(out)
        return out

    def to_folder(self, folder, module_name="FxModule"):
        """Writes a standalone package: `module.py` (the module's source) and its weights.

        Submodules must be kiln.nn layers (written from their repr); the tensors are saved with
        kiln.save in `state_dict.pt` and loaded back by the generated __init__."""
        os.makedirs(folder, exist_ok=True)
        kiln.save(self.state_dict(), os.path.join(folder, "state_dict.pt"))
        lines = [f"    def __init__(self):", "        super().__init__()"]
        for name, mod in self.named_children():
            cls = type(mod)
            if getattr(nn, cls.__name__, None) is not cls:
                raise NotImplementedError(
                    f"to_folder: submodule '{name}' is a {cls.__module__}.{cls.__name__}, which cannot be "
                    "written as source; only kiln.nn layers can")
            lines.append(f"        self.{name} = kiln.nn.{_module_ctor(mod)}")
        for name, buf in self._buffers.items():
            if buf is not None:
                lines.append(f"        self.register_buffer({name!r}, kiln.empty({list(buf.shape)}, dtype={buf.dtype}))")
        for name, p in self._parameters.items():
            if p is not None:
                lines.append(f"        self.{name} = kiln.nn.Parameter(kiln.empty({list(p.shape)}, dtype={p.dtype}))")
        lines.append("        self.load_state_dict(kiln.load(os.path.join(os.path.dirname(__file__), 'state_dict.pt')))")
        python_code = self._graph.python_code(root_module="self")
        imports = ["import math", "import operator", "import os", "", "import kiln", "from kiln import device",
                   "from math import inf, nan"]
        for gname, obj in python_code.globals.items():
            if gname in ("kiln", "device", "inf", "nan", "NoneType", "operator"):
                continue
            mod = getattr(obj, "__module__", None)
            qual = getattr(obj, "__qualname__", None)
            if not mod or not qual or "<" in qual:
                raise NotImplementedError(f"to_folder: the global {gname} ({obj!r}) cannot be imported by name")
            imports.append(f"from {mod} import {qual.split('.')[0]} as {gname}")
        forward = "\n".join(("    " + line) if line.strip() else "" for line in python_code.src.strip("\n").splitlines())
        src = "\n".join(imports) + f"\n\n\nclass {module_name}(kiln.nn.Module):\n" + "\n".join(lines) + "\n\n" + forward + "\n"
        with open(os.path.join(folder, "module.py"), "w") as f:
            f.write(src)
        with open(os.path.join(folder, "__init__.py"), "w") as f:
            f.write(f"from .module import {module_name}\n")

    def __deepcopy__(self, memo):
        res = nn.Module.__new__(type(self))
        memo[id(self)] = res
        fake = nn.Module()
        fake.__dict__ = copy.deepcopy(self.__dict__, memo)
        GraphModule.__init__(res, fake, fake.__dict__["_graph"], class_name=type(self).__name__)
        res.meta = copy.deepcopy(getattr(self, "meta", {}), memo)
        return res

    def __copy__(self):
        res = GraphModule(self, self.graph, class_name=type(self).__name__)
        res.meta = getattr(self, "meta", {})
        return res

    def __str__(self):
        return "\n".join([super().__str__(), self.code,
                          "# To see more debug info, please use `graph_module.print_readable()`"])

    def __reduce__(self):
        raise NotImplementedError("GraphModule objects are not picklable; use to_folder or kiln.save of state_dict")


def _module_ctor(mod):
    """`Linear(4, 3, bias=True)`-style constructor text for a kiln.nn layer, from its repr."""
    text = repr(mod)
    if "\n" in text:
        raise NotImplementedError(f"to_folder: cannot write the nested module {type(mod).__name__} as source")
    return text
