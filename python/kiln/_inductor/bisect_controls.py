"""What kiln._dynamo.bisect turns off inside Inductor to find the part of a compile that fails.

Each subsystem applied many times per graph (a lowering per node, a fusion per lazy value) has a
Budget: while the bisector records, every application is counted and named, and those past
`limit` are refused (the node runs its eager kernel; the value is realized into a kernel of its
own). Bisecting the limit finds the one application that makes the compile fail, as PyTorch's
CompilerBisector does with TORCH_BISECT_MAX. Passes are turned off by name. When the bisector is
not running, `recording` is False and every check is one attribute read.
"""


class Budget:
    """How many applications of one subsystem are allowed (None: all) and what each one was."""

    def __init__(self, name):
        self.name = name
        self.recording = False
        self.limit = None
        self.applied = []  # a description of each application, in order

    def allow(self, what):
        if not self.recording:
            return True
        self.applied.append(what)
        return self.limit is None or len(self.applied) <= self.limit

    def allow_node(self, node):
        """allow() for a graph node's application, named only while recording (every node asks)."""
        return not self.recording or self.allow(f"{node.name} ({node.target})")

    def start(self, limit=None):
        self.recording, self.limit, self.applied = True, limit, []

    def stop(self):
        self.recording, self.limit = False, None


lowerings = Budget("lowerings")  # an aten node lowered to a lazy value (refused: its eager kernel runs)
fusions = Budget("fusion")       # a node's lazy value left for its readers to fuse (refused: realized now)
decompositions = Budget("decomposition")  # an entry of Inductor's table, by op name (refused: left out)
BUDGETS = {b.name: b for b in (lowerings, fusions, decompositions)}

# Graph passes (fx_passes.POST_GRAD_PASSES) turned off by name.
disabled_passes = set()


def reset():
    for budget in BUDGETS.values():
        budget.stop()
        budget.applied = []
    disabled_passes.clear()
