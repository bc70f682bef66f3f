"""make_fx: trace a function at the dispatcher into an FX graph of aten ops, as
torch.fx.experimental.proxy_tensor.make_fx.

The per-op work is C++ (fx/tracer.h, Note [make_fx tracing]): a kernel on the Tracing dispatch key,
below Autograd, so backward ops are recorded when f calls backward. This module sets up the
inputs (real, fake or symbolic), names placeholders as PyTorch does (arg0_1, arg1_1, ...) and wraps
the graph in a GraphModule whose attributes are the tensor constants f used.
"""

import collections
import functools
import inspect
import operator

import kiln
from kiln import _C
from kiln._ops import ops
from kiln._tensor import Tensor

__all__ = ["make_fx"]

_TRACING_MODES = ("real", "fake", "symbolic")


def _flatten(tree, leaves):
    if isinstance(tree, (tuple, list)):
        for x in tree:
            _flatten(x, leaves)
    elif isinstance(tree, dict):
        for x in tree.values():
            _flatten(x, leaves)
    else:
        leaves.append(tree)
    return leaves


def _rebuild(tree, it):
    if isinstance(tree, (tuple, list)):
        items = [_rebuild(x, it) for x in tree]
        if type(tree) in (tuple, list):
            return type(tree)(items)
        return type(tree)(*items)
    if isinstance(tree, dict):
        return {k: _rebuild(v, it) for k, v in tree.items()}
    return next(it)


def _placeholder_names(f, args):
    """PyTorch's names: `<param>_<k>` for the k-th leaf of each named parameter, or `arg<i>_1` by
    flat position when f takes *args (or its signature is unknown)."""
    counts = [len(_flatten(a, [])) for a in args]
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if (params is None or any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params)
            or len(args) > sum(p.kind in positional for p in params)):
        return [f"arg{i}_1" for i in range(sum(counts))]
    names = []
    for p, n in zip(params, counts):
        names.extend(f"{p.name}_{k + 1}" for k in range(n))
    return names


def _metadata_extractor():
    try:
        from kiln.fx.passes.shape_prop import _extract_tensor_metadata
        return _extract_tensor_metadata
    except ImportError:  # pragma: no cover - shape_prop ships with kiln.fx
        meta = collections.namedtuple(
            "TensorMetadata", ["shape", "dtype", "requires_grad", "stride", "memory_format", "is_quantized", "qparams"])
        return lambda t: meta(t.shape, t.dtype, t.requires_grad, t.stride(), None, False, {})


def _fake_mode(allow_non_fake_inputs):
    try:
        from kiln._subclasses.fake_tensor import FakeTensorMode
    except ImportError:
        raise NotImplementedError("make_fx(tracing_mode='fake') needs kiln._subclasses.fake_tensor") from None
    return FakeTensorMode(allow_non_fake_inputs=allow_non_fake_inputs)


def _symbolic_mode(allow_non_fake_inputs):
    from kiln._subclasses.fake_tensor import FakeTensorMode
    from kiln.fx.experimental.symbolic_shapes import ShapeEnv
    return FakeTensorMode(allow_non_fake_inputs=allow_non_fake_inputs, shape_env=ShapeEnv())


def _map_leaves(value, fn):
    if isinstance(value, (tuple, list)):
        return type(value)(_map_leaves(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_leaves(v, fn) for k, v in value.items()}
    return fn(value)


class _SymNodes:
    """Graph nodes for symbolic sizes (the tracer's sym_arg hook).

    A size symbol becomes `sym_size.int(placeholder, dim)` of the first input dimension it stands
    for, created where it is first used; an expression over symbols (`2*s0 + 1`, `(s0//2)`,
    `Mod(s0, 4)`) becomes operator nodes over those, one node per distinct expression, built by
    walking the expression's tree (`node.sym_expr`, a ``kiln._C._SymExpr``), not its text."""

    _FOLDS = {"Add": operator.add, "Mul": operator.mul, "FloorDiv": operator.floordiv, "Mod": operator.mod,
              "Min": "sym_min", "Max": "sym_max"}  # kiln.sym_min, kiln.sym_max

    def __init__(self, graph):
        self.graph = graph
        self.sources = {}  # symbol name -> (placeholder node, dim)
        self.nodes = {}  # expression -> node

    def add_input(self, node, t):
        for d, size in enumerate(t.shape):
            name = None if isinstance(size, int) else size.node.symbol_name()
            if name is not None and name not in self.sources:
                self.sources[name] = (node, d)

    def __call__(self, sym):
        return sym if isinstance(sym, (int, float, bool)) else self._build(sym.node.sym_expr)

    def _build(self, e):
        if e in self.nodes:
            return self.nodes[e]
        kind = e.kind.name
        if kind == "Integer":
            return e.value
        if kind == "Symbol":
            if e.name not in self.sources:
                raise RuntimeError(f"make_fx(tracing_mode='symbolic'): the size {e.name} comes from no input "
                                   "(a data-dependent size cannot be traced symbolically)")
            node, d = self.sources[e.name]
            out = self.graph.call_function(ops.aten.sym_size.int, (node, d))
        elif kind == "Pow":
            out = self.graph.call_function(operator.pow, (self._build(e.args[0]), e.value))
        elif kind in self._FOLDS:
            fn = self._FOLDS[kind]
            fn = getattr(kiln, fn) if isinstance(fn, str) else fn
            args = [self._build(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = self.graph.call_function(fn, (out, a))
        else:
            raise NotImplementedError(f"make_fx(tracing_mode='symbolic'): cannot express the size {e} "
                                      "as graph nodes")
        self.nodes[e] = out
        return out


def _real_constant(t):
    """A constant the traced program made (kiln.tensor(...) under a fake mode) is kept with its
    data (FakeTensor.constant), so the GraphModule runs on real inputs."""
    from kiln._subclasses.fake_tensor import constant_of

    real = constant_of(t)
    return t if real is None else real


_TRACE_GRAPHS = []  # the graphs make_fx calls are recording, innermost last
_TRACERS = []  # and their tracers


def current_trace_graph():
    """The graph the innermost active make_fx is recording, or None (used to annotate the nodes a
    region of code creates, e.g. kiln.utils.checkpoint's recompute policies)."""
    return _TRACE_GRAPHS[-1] if _TRACE_GRAPHS else None


def current_trace_node(t):
    """The node of the graph the innermost make_fx is recording that computed tensor t, or None."""
    return _TRACERS[-1].node_for(t) if _TRACERS else None


def make_fx(f, decomposition_table=None, tracing_mode="real", _allow_non_fake_inputs=False, *,
            pre_dispatch=False, record_module_stack=False, _allow_fake_constant=False,
            _error_on_data_dependent_ops=True, _record_tensor_meta=True):
    """Returns a function that, called with example inputs, runs ``f`` on them and returns a
    ``kiln.fx.GraphModule`` of the aten ops it called (``aten.add.Tensor``, ...), one placeholder
    per flattened input (named as PyTorch names them: `x_1`, or `arg0_1` for *args), and an output with the structure of f's result."""
    if tracing_mode not in _TRACING_MODES:
        raise AssertionError(f"Unexpected tracing type: {tracing_mode}")
    if pre_dispatch:
        raise NotImplementedError("make_fx(pre_dispatch=True) is not supported by kiln")
    decomposition_table = dict(decomposition_table or {})

    @functools.wraps(f)
    def wrapped(*args):
        leaves = _flatten(args, [])
        mode = None
        if tracing_mode == "fake":
            mode = _fake_mode(_allow_non_fake_inputs)
        elif tracing_mode == "symbolic":
            mode = _symbolic_mode(_allow_non_fake_inputs)
        if mode is not None:
            leaves = [mode.from_tensor(x) if isinstance(x, Tensor) else x for x in leaves]
        inputs = _rebuild(args, iter(leaves))

        tracer = _C._MakeFxTracer()
        tracer.set_getitem(operator.getitem)
        if decomposition_table:
            tracer.set_decompositions(decomposition_table)
        if mode is not None:
            tracer.set_make_val(lambda t: t)  # fake outputs are their own meta["val"]
        for name, x in zip(_placeholder_names(f, args), leaves):
            tracer.placeholder(name, x if isinstance(x, Tensor) else None)
        if tracing_mode == "symbolic":
            graph = tracer.graph()
            sym_nodes = _SymNodes(graph)
            placeholders = [n for n in graph.nodes if n.op == "placeholder"]
            for node, x in zip(placeholders, leaves):
                if isinstance(x, Tensor):
                    sym_nodes.add_input(node, x)
            tracer.set_sym_arg(sym_nodes)
        _TRACE_GRAPHS.append(tracer.graph())
        _TRACERS.append(tracer)
        try:
            if mode is not None:
                with mode:
                    out = tracer.trace(f, *inputs)
            else:
                out = tracer.trace(f, *inputs)
        finally:
            _TRACE_GRAPHS.pop()
            _TRACERS.pop()
        if tracing_mode == "symbolic":  # sizes returned by f become nodes too
            out = _map_leaves(out, lambda v: sym_nodes(v) if isinstance(v, (kiln.SymInt, kiln.SymFloat)) else v)
        tracer.output(out)
        graph = tracer.graph()

        if _record_tensor_meta:  # off for AOT's first trace, which is only replayed (4 us a node)
            extract = _metadata_extractor()
            for node in graph.nodes:
                val = node.meta.get("val")
                if isinstance(val, Tensor):
                    node.meta["tensor_meta"] = extract(val)
        root = {name: _real_constant(t) for name, t in tracer.constants()}
        from kiln.fx.graph_module import GraphModule
        return GraphModule(root, graph)

    return wrapped
