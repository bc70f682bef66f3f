"""kiln._dynamo.explain: compile a function once and report its graphs, graph breaks (reason and
user stack), ops per graph, the guard tree of each compiled frame and the compile times."""

import collections

BreakReason = collections.namedtuple("BreakReason", ["reason", "user_stack", "graph_break"])


class ExplainOutput:
    def __init__(self, graphs, break_reasons, ops_per_graph, out_guards, compile_times):
        self.graphs = graphs
        self.graph_count = len(graphs)
        self.break_reasons = break_reasons
        self.graph_break_count = len(break_reasons)
        self.ops_per_graph = ops_per_graph
        self.op_count = sum(len(ops) for ops in ops_per_graph)
        self.out_guards = out_guards
        self.compile_times = compile_times

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        if self.compile_times:
            lines[3:3] = [f"Compile Times: {self.compile_times}"]
        for i, r in enumerate(self.break_reasons):
            lines.append(f"  Break Reason {i + 1}:")
            lines.append(f"    Reason: {r.reason}")
            lines.append("    User Stack:")
            lines.extend(f"      {frame}" for frame in r.user_stack)
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"  Ops {i + 1}:")
            lines.extend(f"    {op}" for op in ops)
        return "\n".join(lines) + "\n"

    __repr__ = __str__


def explain(fn, *extra_args, **extra_kwargs):
    """`explain(fn)(*args)`: runs fn compiled (graphs run eagerly) and returns an ExplainOutput."""
    from kiln._dynamo import reset
    from kiln._dynamo.eval_frame import optimize

    def inner(*args, **kwargs):
        reset()
        graphs, reasons, ops, guards, times = [], [], [], [], []

        def backend(gm, example_inputs):
            graphs.append(gm)
            ops.append([_op_name(n) for n in gm.graph.nodes if n.op in ("call_function", "call_method",
                                                                         "call_module")])
            return gm.forward

        def on_break(error):
            if error is not None:
                reasons.append(BreakReason(error.reason + (f" (hint: {error.suggestion})" if error.suggestion else ""),
                                           error.user_stack, True))

        def on_compiled(code, guard, ms):
            guards.append(str(guard))
            times.append(f"{code.co_name} {ms:.1f} ms")

        try:
            optimize(backend, on_break=on_break, on_compiled=on_compiled)(fn)(*args, **kwargs)
        finally:
            reset()
        return ExplainOutput(graphs, reasons, ops, guards, ", ".join(times))

    if extra_args or extra_kwargs:
        return inner(*extra_args, **extra_kwargs)
    return inner


def _op_name(node):
    t = node.target
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None) or ""
    name = getattr(t, "__name__", repr(t))
    return f"{mod}.{name}" if mod else name
