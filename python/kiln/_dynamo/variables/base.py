"""Variable trackers: what the symbolic interpreter keeps on its stack and in its locals.

Each VariableTracker models one Python value during capture. It knows its Python type, whether
it is a compile-time constant, how to answer attribute reads, calls and iteration symbolically
(adding graph nodes where tensors are involved), and how the generated code rebuilds it at a
graph break (reconstruct). Trackers made from frame values carry the Source that reached them;
the guards that make a compiled entry sound were recorded when they were made (builder.py).
Methods that cannot model something raise Unsupported: the graph breaks there.
"""

from kiln._dynamo.exc import unimplemented


class VariableTracker:
    source = None
    mutable = False

    # --- identity and constants -------------------------------------------------------------
    def python_type(self):
        raise NotImplementedError(type(self).__name__)

    def is_python_constant(self):
        try:
            self.as_python_constant()
            return True
        except NotConstant:
            return False

    def as_python_constant(self):
        raise NotConstant(self)

    def as_proxy(self):
        """The value as an FX argument (a Node, a constant, or containers of them)."""
        return self.as_python_constant()

    # --- behaviour --------------------------------------------------------------------------
    def var_getattr(self, tx, name):
        try:
            ty = self.python_type()
        except NotImplementedError:
            ty = None
        if ty is not None and callable(getattr(ty, name, None)):
            return BoundMethodVariable(self, name)  # list.append, dict.get, ...: see call_method
        unimplemented(f"attribute {name!r} of {self.describe()}",
                      "only attributes of tensors, modules, user objects and constants are traced")

    def call_function(self, tx, args, kwargs):
        unimplemented(f"calling {self.describe()}", "move the call out of the compiled region")

    def call_method(self, tx, name, args, kwargs):
        if name == "__getattribute__" or name == "__getattr__":
            return self.var_getattr(tx, args[0].as_python_constant())
        attr = self.var_getattr(tx, name)
        return attr.call_function(tx, args, kwargs)

    def has_unpack_var_sequence(self, tx):
        return False

    def unpack_var_sequence(self, tx):
        unimplemented(f"iterating over {self.describe()}", "iterate over lists, tuples, dicts or ranges")

    def truth(self, tx):
        """bool(value) at compile time (guarded), or Unsupported."""
        if self.is_python_constant():
            return bool(self.as_python_constant())
        unimplemented(f"bool() of {self.describe()}")

    def reconstruct(self, codegen):
        """A Python expression for this value in the generated code (graph breaks, returns)."""
        if self.source is not None:
            return self.source.expr(codegen)
        if self.is_python_constant():
            return codegen.constant(self.as_python_constant())
        unimplemented(f"{self.describe()} cannot be rebuilt after a graph break")

    def describe(self):
        return type(self).__name__

    def __repr__(self):
        return self.describe()


class BoundMethodVariable(VariableTracker):
    """`obj.name` before the call, for trackers that model their methods in call_method."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def python_type(self):
        import types

        return types.BuiltinMethodType

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, list(args), dict(kwargs))

    def reconstruct(self, codegen):
        return f"{self.obj.reconstruct(codegen)}.{self.name}"

    def describe(self):
        return f"method {self.name} of {self.obj.describe()}"


class NotConstant(Exception):
    pass


class LazyVariable:
    """A frame value not yet looked at: wrapped (and guarded) when first read, so values the
    code never touches add no guards and no graph inputs."""

    __slots__ = ("value", "source")

    def __init__(self, value, source):
        self.value, self.source = value, source

    def realize(self, tx):
        from kiln._dynamo.variables.builder import wrap

        return wrap(tx, self.value, self.source)

    def reconstruct(self, codegen):
        """Still the frame's own value (`self` of `super().__init__(...)` at a graph break): read
        it back from where it came from. It had no reconstruct, and the AttributeError made every
        nn.Module.__init__ of a module built in a compiled function fall back with a warning."""
        return self.source.expr(codegen)


def realize(tx, v):
    return v.realize(tx) if isinstance(v, LazyVariable) else v


class ObjectVariable(VariableTracker):
    """A tracker of one Python object (`value`), whose type is that object's."""

    def __init__(self, value, source=None):
        self.value, self.source = value, source

    def python_type(self):
        return type(self.value)


class ObjectConstantVariable(ObjectVariable):
    """An object that is itself a compile-time constant (a function, a class, a value)."""

    def as_python_constant(self):
        return self.value


class ConstantVariable(ObjectConstantVariable):
    """A Python value known at compile time: None, bools, numbers, strings, dtypes, devices,
    ranges, types ... Operations on constants are folded."""

    def var_getattr(self, tx, name):
        try:
            attr = getattr(self.value, name)
        except AttributeError as e:
            unimplemented(f"{e}")
        if callable(attr) and not isinstance(attr, type):
            from kiln._dynamo.variables.misc import ConstantMethodVariable

            return ConstantMethodVariable(self, name)
        return ConstantVariable(attr)

    def has_unpack_var_sequence(self, tx):
        return isinstance(self.value, (tuple, list, range, str, bytes, frozenset))

    def unpack_var_sequence(self, tx):
        if not self.has_unpack_var_sequence(tx):
            return super().unpack_var_sequence(tx)
        return [ConstantVariable(v) for v in self.value]

    def reconstruct(self, codegen):
        return codegen.constant(self.value)

    def describe(self):
        return f"constant {self.value!r}"


def constant(value):
    return ConstantVariable(value)


def is_constant_value(value):
    """Values the interpreter folds (and guards by equality when they come from the frame)."""
    if value is None or value is Ellipsis or value is NotImplemented:
        return True
    if type(value) in (bool, int, float, complex, str, bytes, range, slice, type(None)):
        return True
    if type(value) in (tuple, frozenset):
        return all(is_constant_value(v) for v in value)
    from kiln import _C
    from kiln._device import device

    return isinstance(value, (_C.dtype, device))
