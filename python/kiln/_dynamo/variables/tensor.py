"""TensorVariable and SymNodeVariable: values that live in the graph.

A TensorVariable is an FX node plus its fake tensor (node.meta['example_value']): metadata
questions (`.shape`, `.dtype`, `.device`, `.ndim`, `.requires_grad`) are answered from the fake
at compile time, and every other use becomes a node. A SymNodeVariable is a symbolic size (a
SymInt of the ShapeEnv) or a plain int computed in the graph: branching on it guards.
"""

import operator

import kiln
from kiln._dynamo.exc import unimplemented
from kiln._dynamo.variables.base import ConstantVariable, VariableTracker
from kiln._symbolic import SymBool, SymFloat, SymInt

_SCALAR_METHODS = {"item", "tolist", "__index__", "__int__", "__float__", "__bool__"}
_DATA_METHODS = {"numpy", "data_ptr", "__array__", "backward", "register_hook", "storage"}
_CONST_ATTRS = {"dtype", "device", "ndim", "is_cuda", "layout", "requires_grad", "is_leaf", "is_sparse",
                "is_quantized", "is_meta"}


class TensorVariable(VariableTracker):
    def __init__(self, node, example, source=None):
        self.node, self.example, self.source = node, example, source

    def python_type(self):
        return type(self.example) if not _is_fake_class(type(self.example)) else kiln.Tensor

    def as_proxy(self):
        return self.node

    def describe(self):
        return f"tensor {self.node.name}"

    def truth(self, tx):
        unimplemented("branching on a tensor's value (data-dependent control flow)",
                      "use kiln.where instead of branching on a tensor, or move the branch out of the compiled region")

    # --- attributes -------------------------------------------------------------------------
    def var_getattr(self, tx, name):
        ex = self.example
        if name in _CONST_ATTRS:
            return ConstantVariable(getattr(ex, name))
        if name == "shape":
            return size_variable(tx, self, ex.shape)
        if name in ("T", "mT", "H", "mH", "real", "imag"):
            return tx.output.call(tx, "call_function", getattr, (self, ConstantVariable(name)), {})
        if name == "grad":
            unimplemented("reading .grad of a tensor", "read gradients outside the compiled function")
        if name == "data":
            return tx.output.call(tx, "call_method", "detach", (self,), {})
        from kiln._dynamo.variables.base import BoundMethodVariable

        if callable(getattr(type(ex), name, None)):
            return BoundMethodVariable(self, name)
        unimplemented(f"tensor attribute {name!r}")

    def call_method(self, tx, name, args, kwargs):
        ex = self.example
        if name in ("size", "stride") and all(a.is_python_constant() for a in args) and not kwargs:
            value = getattr(ex, name)(*[a.as_python_constant() for a in args])
            if isinstance(value, tuple):
                return size_variable(tx, self, value, method=name)
            return sym_or_constant(tx, value, lambda: tx.output.call_raw(tx, "call_method", name, (self.node,) +
                                                                         tuple(a.as_python_constant() for a in args), {}))
        if name in ("dim", "ndimension"):
            return ConstantVariable(ex.dim())
        if name == "numel" and isinstance(ex.numel(), int):
            return ConstantVariable(ex.numel())
        if name in ("is_floating_point", "is_complex", "is_contiguous") and not args:
            return ConstantVariable(getattr(ex, name)())
        if name == "element_size":
            return ConstantVariable(ex.element_size())
        if name == "__len__":  # len(x) of a dynamic first dimension is x.size(0) in the graph
            return sym_or_constant(tx, ex.shape[0], lambda: tx.output.call_raw(
                tx, "call_method", "size", (self.node, 0), {}, example=ex.shape[0]))
        if name in _SCALAR_METHODS:
            from kiln._dynamo import config

            if name == "item" and config.capture_scalar_outputs:
                return tx.output.call(tx, "call_method", name, (self,) + tuple(args), kwargs)
            unimplemented(f"Tensor.{name}() reads a tensor's data into Python",
                          "keep it a tensor (or set kiln._dynamo.config.capture_scalar_outputs = True for .item())",
                          costly="item")
        if name in _DATA_METHODS:
            unimplemented(f"Tensor.{name}()", "call it outside the compiled function")
        if name == "__setitem__":
            return tx.output.call(tx, "call_function", operator.setitem, (self,) + tuple(args), kwargs)
        if name == "__contains__":
            unimplemented("`in` on a tensor (data-dependent)", "use (t == v).any() and keep the result a tensor")
        return tx.output.call(tx, "call_method", name, (self,) + tuple(args), kwargs)

    # --- iteration: over the first dimension, unrolled -------------------------------------
    def has_unpack_var_sequence(self, tx):
        return self.example.dim() > 0 and isinstance(self.example.shape[0], int)

    def unpack_var_sequence(self, tx):
        if not self.has_unpack_var_sequence(tx):
            unimplemented("iterating over a tensor of symbolic or zero-dimensional size")
        return [tx.output.call(tx, "call_function", operator.getitem, (self, ConstantVariable(i)), {})
                for i in range(self.example.shape[0])]


class SymNodeVariable(VariableTracker):
    """An int/float/bool computed from sizes: a graph node whose example value is a SymInt (or a
    plain number when the graph produced it, e.g. x.size(0) on a static dim that is still a node)."""

    def __init__(self, node, value):
        self.node, self.value = node, value

    def python_type(self):
        v = self.value
        return int if isinstance(v, SymInt) else float if isinstance(v, SymFloat) else bool if isinstance(
            v, SymBool) else type(v)

    def as_proxy(self):
        return self.node

    def describe(self):
        return f"symbolic {self.value}"

    def truth(self, tx):
        return bool(self.value)  # records a shape guard

    def evaluate(self):
        """The concrete value, guarded (int(s0) specialises)."""
        v = self.value
        if isinstance(v, SymBool):
            return bool(v)
        if isinstance(v, SymFloat):
            return float(v)
        return int(v)

    def call_method(self, tx, name, args, kwargs):
        from kiln._dynamo.variables.builtin import BuiltinVariable

        if name in ("__index__", "__int__"):
            return ConstantVariable(self.evaluate())
        return BuiltinVariable(getattr(operator, name.strip("_"), None) or name).call_function(tx, [self] + list(args),
                                                                                              kwargs)


def _is_fake_class(cls):
    return cls.__name__ in ("FakeTensor", "FakeParameter")


def sym_or_constant(tx, value, make_node):
    """A size-like result: a constant when concrete, else a SymNodeVariable over make_node()."""
    if isinstance(value, (SymInt, SymFloat, SymBool)):
        return SymNodeVariable(make_node(), value)
    return ConstantVariable(value)


def size_variable(tx, tensor, sizes, method="size"):
    """x.shape / x.size(): a SizeVariable whose symbolic entries read `x.size(d)` nodes."""
    from kiln._dynamo.variables.lists import SizeVariable

    items = []
    for d, s in enumerate(sizes):
        if isinstance(s, SymInt):
            items.append(SymNodeVariable(tx.output.call_raw(tx, "call_method", method, (tensor.node, d), {}), s))
        else:
            items.append(ConstantVariable(s))
    return SizeVariable(items)


def _graph_value_reconstruct(self, codegen):
    return codegen.graph_value(self)


TensorVariable.reconstruct = _graph_value_reconstruct
SymNodeVariable.reconstruct = _graph_value_reconstruct
