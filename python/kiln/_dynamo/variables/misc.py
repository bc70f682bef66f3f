"""The remaining trackers: bound methods of constants and tensors, Python modules, user objects
and classes, and the NULL that CPython pushes below a callable."""

import types

from kiln._dynamo.exc import unimplemented
from kiln._dynamo.variables.base import (ConstantVariable, NotConstant, ObjectConstantVariable, ObjectVariable,
                                         VariableTracker)


class NullVariable(VariableTracker):
    """CPython's NULL stack entry (PUSH_NULL, LOAD_GLOBAL's low bit, ...)."""

    def python_type(self):
        return type(None)

    def describe(self):
        return "NULL"


class ConstantMethodVariable(VariableTracker):
    """`"{}".format`, `(1, 2).index`, ...: folds when every argument is constant."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def python_type(self):
        return types.BuiltinMethodType

    def reconstruct(self, codegen):
        return f"{self.obj.reconstruct(codegen)}.{self.name}"

    def call_function(self, tx, args, kwargs):
        try:
            values = [a.as_python_constant() for a in args]
            kw = {k: v.as_python_constant() for k, v in kwargs.items()}
        except NotConstant:
            unimplemented(f"{type(self.obj.value).__name__}.{self.name}() with non-constant arguments")
        try:
            return ConstantVariable(getattr(self.obj.value, self.name)(*values, **kw))
        except Exception as e:
            unimplemented(f"{type(self.obj.value).__name__}.{self.name}() raised {type(e).__name__}: {e}")


class PythonModuleVariable(VariableTracker):
    """A Python module object (math, operator, a user's module): attributes are wrapped with
    their source."""

    def __init__(self, module, source=None):
        self.value, self.source = module, source

    def python_type(self):
        return types.ModuleType

    def as_python_constant(self):
        return self.value

    def var_getattr(self, tx, name):
        from kiln._dynamo.source import AttrSource
        from kiln._dynamo.variables.builder import wrap

        if not hasattr(self.value, name):
            unimplemented(f"module {self.value.__name__!r} has no attribute {name!r}")
        value = getattr(self.value, name)
        trusted = self.value.__name__.split(".")[0] in ("kiln", "math", "operator", "builtins", "functools",
                                                        "itertools", "collections", "typing")
        source = None if (trusted or self.source is None) else AttrSource(self.source, name)
        return wrap(tx, value, source)

    def has_attr(self, tx, name):
        return hasattr(self.value, name)

    def describe(self):
        return f"module {self.value.__name__}"


class UserDefinedClassVariable(ObjectConstantVariable):
    """A class: for isinstance(), class attributes and the few constructors the interpreter
    models (builtins, kiln.Size, grad modes); constructing anything else is a graph break."""

    def var_getattr(self, tx, name):
        from kiln._dynamo.source import AttrSource
        from kiln._dynamo.variables.builder import wrap

        try:
            value = getattr(self.value, name)
        except AttributeError:
            unimplemented(f"class {self.value.__name__} has no attribute {name!r}")
        return wrap(tx, value, AttrSource(self.source, name) if self.source is not None else None)

    def call_function(self, tx, args, kwargs):
        from kiln._dynamo.variables.builder import call_class

        return call_class(tx, self, args, kwargs)

    def describe(self):
        return f"class {self.value.__qualname__}"


class UserDefinedObjectVariable(ObjectVariable):
    """An instance of a user class, guarded on its type: attribute reads go through its __dict__
    (each guarded with its own source) and methods inline."""

    def var_getattr(self, tx, name):
        return object_getattr(tx, self, self.value, name)

    def has_attr(self, tx, name):
        return tx.output.side_effects.has_attr(self.value, name) or hasattr(self.value, name)

    def call_function(self, tx, args, kwargs):
        call = getattr(type(self.value), "__call__", None)
        if isinstance(call, types.FunctionType):
            from kiln._dynamo.variables.functions import UserFunctionVariable

            return UserFunctionVariable(call).call_function(tx, [self] + list(args), kwargs)
        unimplemented(f"calling {self.describe()}")

    def truth(self, tx):
        cls = type(self.value)
        if not hasattr(cls, "__bool__") and not hasattr(cls, "__len__"):
            return True
        return super().truth(tx)

    def describe(self):
        return f"{type(self.value).__qualname__} object"


_MISSING = object()


def object_getattr(tx, var, obj, name):
    """getattr for Python-level objects: instance dict first, then the class (functions bind)."""
    from kiln._dynamo.source import AttrSource, GetItemSource
    from kiln._dynamo.variables.builder import wrap
    from kiln._dynamo.variables.functions import UserMethodVariable

    stored = tx.output.side_effects.load_attr(obj, name)
    if stored is not None:  # written earlier in this trace (replayed after the graph)
        return stored
    cls = type(obj)
    if name == "__dict__" and var.source is not None:
        return wrap(tx, obj.__dict__, AttrSource(var.source, "__dict__"))
    if name == "__class__":
        return wrap(tx, cls, None)
    class_attr = _MISSING
    for klass in cls.__mro__:
        if name in klass.__dict__:
            class_attr = klass.__dict__[name]
            break
    if isinstance(class_attr, property):
        from kiln._dynamo.variables.functions import UserFunctionVariable

        return UserFunctionVariable(class_attr.fget).call_function(tx, [var], {})
    inst = getattr(obj, "__dict__", {})
    if name in inst and not hasattr(class_attr, "__set__"):
        source = None
        if var.source is not None:
            source = GetItemSource(AttrSource(var.source, "__dict__"), name, is_dict=True)
        return wrap(tx, inst[name], source)
    if isinstance(class_attr, types.FunctionType):
        return UserMethodVariable(class_attr, var)
    if isinstance(class_attr, (staticmethod, classmethod)):
        fn = class_attr.__func__
        from kiln._dynamo.variables.functions import UserFunctionVariable

        if isinstance(class_attr, staticmethod):
            return wrap(tx, fn, None) if not isinstance(fn, types.FunctionType) else UserFunctionVariable(fn)
        return UserMethodVariable(fn, UserDefinedClassVariable(cls))
    if class_attr is not _MISSING:
        return wrap(tx, class_attr, None)
    getattr_hook = getattr(cls, "__getattr__", None)
    if isinstance(getattr_hook, types.FunctionType):
        from kiln._dynamo.variables.functions import UserFunctionVariable

        return UserFunctionVariable(getattr_hook).call_function(tx, [var, ConstantVariable(name)], {})
    unimplemented(f"{type(obj).__qualname__} object has no attribute {name!r}")


class SuperVariable(VariableTracker):
    """super() / super(cls, obj): attribute lookup in obj's MRO after cls."""

    def __init__(self, cls, obj):
        self.cls, self.obj = cls, obj

    def python_type(self):
        return super

    def var_getattr(self, tx, name):
        from kiln._dynamo.variables.builder import wrap
        from kiln._dynamo.variables.functions import UserMethodVariable

        cls = self.cls.as_python_constant()
        value = getattr(self.obj, "value", None)
        if value is None:
            unimplemented(f"super() over {self.obj.describe()}")
        mro = type(value).__mro__
        for klass in mro[mro.index(cls) + 1:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, types.FunctionType):
                    return UserMethodVariable(attr, self.obj)
                return wrap(tx, attr, None)
        unimplemented(f"super() has no attribute {name!r}")
