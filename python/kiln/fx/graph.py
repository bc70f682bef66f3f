"""kiln.fx.Graph: the FX graph, a Python face over the C++ fx::Graph (fx/graph.h).

    g = kiln.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(kiln.relu, (x,))
    g.output(y)
    print(g)            # graph(): %x : [num_users=1] = placeholder[target=x] ...

Editing (create_node, erase_node, replace_all_uses_with, ...) happens in C++, which keeps
`users` in sync and names unique; this class adds what is Python by nature: insertion-point
context managers, code generation (`python_code`), `print_tabular` and copying.
"""

import builtins
import copy
import inspect
import keyword

from kiln._C import _fx
from kiln.fx import _codegen
from kiln.fx.node import Node, _side_effectful_functions, map_arg

# Node names never shadow Python keywords, builtins, or the names generated code relies on.
_fx._set_reserved_names(sorted(set(keyword.kwlist) | set(dir(builtins))
                               | {"inf", "nan", "NoneType", "kiln", "device", "operator", "self"}))


class _NodeList:
    """`graph.nodes`: the nodes in order (live: len and iteration see edits)."""

    def __init__(self, graph, reverse=False):
        self._graph, self._reverse = graph, reverse

    def __len__(self):
        return self._graph._len()

    def _snapshot(self):
        """The nodes in order, made again only when the graph's order changed: a compile walks
        its graphs ~50 times, and each fresh list of a 16-layer GPT's 5,000 nodes took ~1 ms."""
        graph, version = self._graph, self._graph._order_version()
        cached = graph.__dict__.get("_nodes_snapshot")
        if cached is None or cached[0] != version:
            cached = graph.__dict__["_nodes_snapshot"] = (version, tuple(graph._nodes()))
        return cached[1]

    def __iter__(self):
        nodes = self._snapshot()
        return iter(reversed(nodes) if self._reverse else nodes)

    def __reversed__(self):
        return iter(reversed(self._snapshot()) if not self._reverse else self._snapshot())

    def __contains__(self, node):
        return isinstance(node, Node) and node.graph is self._graph

    def __getitem__(self, i):
        return self._snapshot()[i]

    def __repr__(self):
        return f"<kiln.fx graph nodes: {list(self)}>"


class _InsertPoint:
    def __init__(self, graph, before):
        self._graph = graph
        self._saved = graph._insert_point()
        graph._set_insert_point(before)

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        self._graph._set_insert_point(self._saved)


class Graph(_fx.GraphBase):
    def __init__(self, owning_module=None, tracer_cls=None, tracer_extras=None):
        super().__init__()
        self.owning_module = owning_module
        self._tracer_cls = tracer_cls
        self._tracer_extras = tracer_extras

    @classmethod
    def _from_cpp(cls, handle):
        g = cls.__new__(cls)
        _fx.GraphBase.__init__(g, handle)
        g.owning_module, g._tracer_cls, g._tracer_extras = None, None, None
        return g

    @property
    def nodes(self):
        return _NodeList(self)

    @property
    def _root(self):
        return self._root_node()

    def _root_node(self):
        return _fx.GraphBase._root(self)

    def find_nodes(self, *, op, target=None, sort=True):
        return [n for n in self._nodes() if n.op == op and (target is None or n.target == target)]

    def output_node(self):
        last = self._root_node().prev  # the last node, without a list of them all (~1 ms at 5,000)
        if last is None or last.op != "output":
            raise RuntimeError("this graph has no output node")
        return last

    # -- node creation ------------------------------------------------------------------------

    def placeholder(self, name, type_expr=None, default_value=inspect.Signature.empty):
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args=args, type_expr=type_expr)

    def get_attr(self, qualified_name, type_expr=None):
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name, args=None, kwargs=None, type_expr=None):
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name, args=None, kwargs=None, type_expr=None):
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function, args=None, kwargs=None, type_expr=None):
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def output(self, result, type_expr=None):
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def inserting_before(self, n=None):
        """New nodes go before `n` (None: at the start of the graph)."""
        if n is None:
            nodes = self._nodes()
            return _InsertPoint(self, nodes[0] if nodes else None)
        return _InsertPoint(self, n)

    def inserting_after(self, n=None):
        """New nodes go after `n`, in creation order (None: at the end of the graph)."""
        if n is None:
            return _InsertPoint(self, None)
        nxt = n.next
        return _InsertPoint(self, None if nxt.op == "root" else nxt)

    # -- passes -------------------------------------------------------------------------------

    def eliminate_dead_code(self, is_impure_node=None):
        """Removes nodes without users or side effects; returns whether the graph changed."""
        return self._eliminate_dead_code(is_impure_node or (lambda n: n.is_impure()))

    def node_copy(self, node, arg_transform=lambda x: x):
        return self._node_copy(node, arg_transform)

    def graph_copy(self, g, val_map, return_output_node=False):
        """Copies g's nodes (not its output) into self; val_map maps g's nodes to ours.

        Returns the value g outputs, mapped into this graph."""
        out = self._graph_copy(g, val_map)
        if return_output_node:
            for n in g.nodes:
                if n.op == "output":
                    return out, n
        return out

    def __deepcopy__(self, memo):
        memo = memo if memo is not None else {}
        g = type(self)(tracer_cls=self._tracer_cls)
        memo[id(self)] = g
        val_map = {}
        out = g.graph_copy(self, val_map)
        nodes = self._nodes()
        if nodes and nodes[-1].op == "output":
            o = g.output(out, type_expr=nodes[-1].type)
            for k, v in nodes[-1].meta.items():
                o.meta[k] = v
        return g

    # -- code ---------------------------------------------------------------------------------

    def python_code(self, root_module="self", *, verbose=False):
        return _codegen.python_code(self, root_module, verbose=verbose)

    def print_tabular(self):
        """Prints the nodes as a table: opcode, name, target, args, kwargs."""
        rows = [["opcode", "name", "target", "args", "kwargs"]]
        for n in self.nodes:
            target = n.target if isinstance(n.target, str) else _codegen.pretty_target(n.target)
            rows.append([n.op, n.name, target, str(n.args), str(n.kwargs)])
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(rows[0], widths)).rstrip(),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows[1:]]
        print("\n".join(lines))

    def __repr__(self):
        return self.__str__()


Graph.__module__ = "kiln.fx"
