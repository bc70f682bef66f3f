"""kiln._functorch.compile: AOTAutograd's public names (PyTorch's functorch.compile)."""

from kiln._functorch.aot_autograd import aot_function, aot_module, aot_module_simplified  # noqa: F401
from kiln._functorch.partitioners import default_partition, min_cut_rematerialization_partition  # noqa: F401


def make_boxed_func(f):
    """f under the boxed calling convention: called with one list of inputs, which it may clear
    to free them early (the convention AOTAutograd's runtime uses for compiled graphs)."""

    def g(args):
        return f(*args)

    g._boxed_call = True
    return g


def make_boxed_compiler(compiler):
    """A compiler whose results use the boxed convention."""

    def boxed(gm, example_inputs):
        return make_boxed_func(compiler(gm, example_inputs))

    return boxed


def nop(gm, example_inputs):
    """The no-op compiler: the graph runs as Python (aot_eager's compiler)."""
    return make_boxed_func(gm.forward)
