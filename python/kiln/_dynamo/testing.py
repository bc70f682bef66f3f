"""kiln._dynamo.testing: backends that count what was compiled (as torch._dynamo.testing)."""

from kiln._dynamo.backends.registry import lookup_backend


def _count_ops(gm):
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


class CompileCounter:
    """A backend that counts frames (graphs) and ops, and runs the graph eagerly."""

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.op_count += _count_ops(gm)
        self.graphs.append(gm)
        return gm.forward

    def clear(self):
        self.frame_count = 0
        self.op_count = 0
        self.graphs = []


class CompileCounterWithBackend(CompileCounter):
    """Counts, then compiles with another backend."""

    def __init__(self, backend):
        super().__init__()
        self.backend = lookup_backend(backend)

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return self.backend(gm, example_inputs)
