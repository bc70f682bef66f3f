"""kiln.fx.Interpreter and Transformer: run a GraphModule node by node (torch.fx.interpreter).

    class NegSigmoid(kiln.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            if target is kiln.relu:
                target = kiln.sigmoid
            return super().call_function(target, args, kwargs)

    NegSigmoid(gm).run(x)

`run` walks the graph in order, calling `run_node` for each node, which dispatches to the method
named after the opcode (placeholder, get_attr, call_function, call_method, call_module, output);
values are dropped from the environment after their last use. A Transformer runs the same walk
on Proxies and returns a new GraphModule built from what it records.
"""

import inspect

from kiln.fx.graph import Graph
from kiln.fx.graph_module import GraphModule
from kiln.fx.node import map_aggregate, map_arg
from kiln.fx.proxy import Proxy
from kiln.fx._symbolic_trace import Tracer

__all__ = ["Interpreter", "Transformer"]


class Interpreter:
    """Executes a GraphModule's graph one node at a time; subclass to change how nodes run."""

    def __init__(self, module, garbage_collect_values=True, graph=None):
        self.module = module
        self.submodules = dict(self.module.named_modules())
        self.graph = graph if graph is not None else self.module.graph
        self.env = {}
        self.name = "Interpreter"
        self.garbage_collect_values = garbage_collect_values
        self.extra_traceback = True
        if self.garbage_collect_values:
            # For each node, the values whose last use it is (so run() can drop them after it).
            node_to_last_use = {}
            self.user_to_last_uses = {}

            def register_last_uses(n, user):
                if n not in node_to_last_use:
                    node_to_last_use[n] = user
                    self.user_to_last_uses.setdefault(user, []).append(n)
                return n

            for node in reversed(self.graph.nodes):
                map_arg(node.args, lambda n: register_last_uses(n, node))
                map_arg(node.kwargs, lambda n: register_last_uses(n, node))

    def run(self, *args, initial_env=None, enable_io_processing=True):
        """Runs the graph on `args` (one per placeholder); returns what the output node returns.

        `initial_env` maps nodes to values computed elsewhere: those nodes are not run."""
        self.env = initial_env if initial_env is not None else {}
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                # Values given by initial_env (e.g. by boxed_run) are not recomputed.
                continue
            try:
                self.env[node] = self.run_node(node)
            except Exception as e:
                if self.extra_traceback and not getattr(e, "_kiln_fx_annotated", False):
                    msg = f"While executing {node.format_node()}"
                    msg = f"{e.args[0]}\n\n{msg}" if e.args and isinstance(e.args[0], str) else msg
                    try:
                        e.args = (msg,) + e.args[1:]
                        e._kiln_fx_annotated = True
                    except (AttributeError, TypeError):
                        pass
                    if isinstance(e, KeyError):
                        raise RuntimeError(*e.args) from e
                raise
            if self.garbage_collect_values:
                for to_delete in self.user_to_last_uses.get(node, []):
                    del self.env[to_delete]
            if node.op == "output":
                return self.env[node]
        return None

    def boxed_run(self, args_list):
        """Runs with the arguments in a list, which is cleared (so the caller frees them early)."""
        args_iter = iter(args_list)
        env = {}
        for n in self.graph.nodes:
            if n.op == "placeholder":
                env[n] = next(args_iter)
        args_list.clear()
        return self.run(initial_env=env)

    def run_node(self, n):
        """Runs one node: fetches its argument values and calls the method of its opcode."""
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        assert isinstance(args, tuple)
        assert isinstance(kwargs, dict)
        return getattr(self, n.op)(n.target, args, kwargs)

    # -- one method per opcode ----------------------------------------------------------------

    def placeholder(self, target, args, kwargs):
        assert isinstance(target, str)
        if target.startswith("*"):
            return list(self.args_iter)
        try:
            return next(self.args_iter)
        except StopIteration as si:
            if len(args) > 0:
                return args[0]  # the placeholder's default value
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one was not passed in!") from si

    def get_attr(self, target, args, kwargs):
        assert isinstance(target, str)
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        assert not isinstance(target, str)
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        self_obj, *args_tail = args
        assert isinstance(target, str)
        return getattr(self_obj, target)(*args_tail, **kwargs)

    def call_module(self, target, args, kwargs):
        assert isinstance(target, str)
        submod = self.fetch_attr(target)
        return submod(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]

    # -- helpers ------------------------------------------------------------------------------

    def fetch_attr(self, target):
        """The module attribute at dotted path `target` (RuntimeError naming the missing part)."""
        atoms = target.split(".")
        attr_itr = self.module
        for i, atom in enumerate(atoms):
            if not hasattr(attr_itr, atom):
                raise RuntimeError(f"Node referenced nonexistent target {'.'.join(atoms[:i + 1])}")
            attr_itr = getattr(attr_itr, atom)
        return attr_itr

    def fetch_args_kwargs_from_env(self, n):
        args = self.map_nodes_to_values(n.args, n)
        assert isinstance(args, tuple)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        assert isinstance(kwargs, dict)
        return args, kwargs

    def map_nodes_to_values(self, args, n):
        """`args` with every Node replaced by its value in the environment."""

        def load_arg(n_arg):
            if n_arg not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {n_arg}! Run Graph.lint() to diagnose "
                                   "such issues")
            return self.env[n_arg]

        return map_arg(args, load_arg)


class Transformer(Interpreter):
    """An Interpreter that records instead of computing: each node's method returns a Proxy into a
    new graph, so overriding call_function etc. rewrites the program. `transform()` returns the
    new GraphModule."""

    def __init__(self, module):
        super().__init__(module)
        self.new_graph = Graph()

        class TransformerTracer(Tracer):
            def __init__(self, graph):
                super().__init__()
                self.graph = graph
                self.tensor_attrs = {}
                self.module_stack = {}
                self.num_calls = {}

            def is_leaf_module(self, _, __):
                return True

        self.tracer = TransformerTracer(self.new_graph)
        self.tracer.root = module

    def placeholder(self, target, args, kwargs):
        assert isinstance(target, str)
        default_value = next(iter(args)) if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default_value), self.tracer)

    def get_attr(self, target, args, kwargs):
        assert isinstance(target, str)
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target, args, kwargs):
        assert isinstance(target, str)
        submod = self.fetch_attr(target)
        return self.tracer.call_module(submod, submod.forward, args, kwargs)

    def call_function(self, target, args, kwargs):
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def transform(self):
        """Runs the transformation; returns the new GraphModule."""
        result = super().run(enable_io_processing=False)
        if result is not None:
            def strip_proxy(a):
                return a.node if isinstance(a, Proxy) else a

            new_output = self.new_graph.output(map_aggregate(result, strip_proxy))
            old_output = list(self.graph.nodes)[-1]
            assert old_output.op == "output"
            for k, v in old_output.meta.items():
                new_output.meta[k] = v
        return GraphModule(self.module, self.new_graph)
