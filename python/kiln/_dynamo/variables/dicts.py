"""Dicts and sets with compile-time keys.

A ConstDictVariable maps constant keys (strings, numbers, ...) to trackers, in insertion order.
Dicts from the frame are guarded on their keys; their values are wrapped lazily, each with its own
source, when read. Like lists, only dicts built inside the frame may be mutated.
"""


from kiln._dynamo.exc import unimplemented
from kiln._dynamo.variables.base import ConstantVariable, LazyVariable, NotConstant, VariableTracker, realize
from kiln._dynamo.variables.lists import ListIteratorVariable, TupleVariable


class ConstDictVariable(VariableTracker):
    def __init__(self, items, kind=dict, source=None):
        self.items, self.kind, self.source = dict(items), kind, source

    @property
    def mutable(self):
        return self.source is None

    def python_type(self):
        return self.kind

    def realized(self, tx):
        """Every value wrapped (lazy entries become trackers, with their guards)."""
        for k, v in self.items.items():
            self.items[k] = realize(tx, v)
        return self.items

    def as_python_constant(self):
        if any(isinstance(v, LazyVariable) for v in self.items.values()):
            raise NotConstant(self)  # an unread entry: folding it would skip its guard
        return self.kind((k, v.as_python_constant()) for k, v in self.items.items())

    def as_proxy(self):
        return {k: v.as_proxy() for k, v in self.items.items()}

    def truth(self, tx):
        return bool(self.items)

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return [ConstantVariable(k) for k in self.items]

    def describe(self):
        return f"{self.kind.__name__} with keys {list(self.items)}"

    def reconstruct(self, codegen):
        if self.source is not None and not self.mutable:
            return self.source.expr(codegen)
        return codegen.materialize(self, self._build)

    def _build(self, codegen):
        body = ", ".join(f"{codegen.constant(k)}: {v.reconstruct(codegen)}" for k, v in self.items.items())
        text = "{" + body + "}"
        return text if self.kind is dict else f"{codegen.object_expr(self.kind)}({text})"

    def _key(self, var):
        if not var.is_python_constant():
            unimplemented(f"a dict key that is not a constant ({var.describe()})")
        return var.as_python_constant()

    def _check_mutable(self, tx, what):
        if self.source is not None:
            unimplemented(f"{what} on a dict that came from outside the compiled function ({_origin(tx, self.source)})",
                          "build a new dict and return it, or change the dict outside the compiled function")

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            key = self._key(args[0])
            if key not in self.items:
                unimplemented(f"dict has no key {key!r}")
            self.items[key] = realize(tx, self.items[key])
            return self.items[key]
        if name == "get":
            key = self._key(args[0])
            if key in self.items:
                self.items[key] = realize(tx, self.items[key])
            return self.items.get(key, args[1] if len(args) > 1 else ConstantVariable(None))
        if name == "__contains__":
            return ConstantVariable(self._key(args[0]) in self.items)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "keys":
            return TupleVariable([ConstantVariable(k) for k in self.items])
        if name == "values":
            return TupleVariable(list(self.realized(tx).values()))
        if name == "items":
            return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.realized(tx).items()])
        if name == "__iter__":
            return ListIteratorVariable(self.unpack_var_sequence(tx))
        if name == "copy":
            return ConstDictVariable(self.realized(tx), self.kind)
        if name in ("__setitem__", "update", "pop", "setdefault", "__delitem__", "clear", "popitem"):
            self._check_mutable(tx, f"dict.{name}")
            if name == "__setitem__":
                self.items[self._key(args[0])] = args[1]
                return ConstantVariable(None)
            if name == "__delitem__":
                del self.items[self._key(args[0])]
                return ConstantVariable(None)
            if name == "pop":
                key = self._key(args[0])
                if key in self.items:
                    return self.items.pop(key)
                if len(args) > 1:
                    return args[1]
                unimplemented(f"dict.pop of a missing key {key!r}")
            if name == "setdefault":
                return self.items.setdefault(self._key(args[0]), args[1] if len(args) > 1 else ConstantVariable(None))
            if name == "clear":
                self.items.clear()
                return ConstantVariable(None)
            if name == "update":
                for a in args:
                    if isinstance(a, ConstDictVariable):
                        self.items.update(a.realized(tx))
                    else:
                        for pair in a.unpack_var_sequence(tx):
                            k, v = pair.unpack_var_sequence(tx)
                            self.items[self._key(k)] = v
                for k, v in kwargs.items():
                    self.items[k] = v
                return ConstantVariable(None)
        unimplemented(f"dict.{name}()")


class SetVariable(VariableTracker):
    """A set of constants (sets of tensors are not modelled)."""

    def __init__(self, items):
        self.items = []
        for i in items:
            self._add(i)

    mutable = True

    def _add(self, var):
        if not var.is_python_constant():
            unimplemented("a set of non-constant values", "use a list")
        value = var.as_python_constant()
        if all(v.as_python_constant() != value for v in self.items):
            self.items.append(var)

    def python_type(self):
        return set

    def as_python_constant(self):
        return {i.as_python_constant() for i in self.items}

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return list(self.items)

    def truth(self, tx):
        return bool(self.items)

    def reconstruct(self, codegen):
        return codegen.constant(self.as_python_constant())

    def call_method(self, tx, name, args, kwargs):
        if name == "add":
            self._add(args[0])
            return ConstantVariable(None)
        if name == "__contains__":
            return ConstantVariable(args[0].as_python_constant() in self.as_python_constant())
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "update":
            for a in args:
                for i in a.unpack_var_sequence(tx):
                    self._add(i)
            return ConstantVariable(None)
        if name in ("union", "intersection", "difference", "issubset", "issuperset"):
            result = getattr(self.as_python_constant(), name)(*[a.as_python_constant() for a in args])
            return SetVariable([ConstantVariable(v) for v in result]) if isinstance(result, set) else ConstantVariable(
                result)
        unimplemented(f"set.{name}()")


def _origin(tx, source):
    """What a value from outside is, in the user's words: an argument, a variable captured from an
    enclosing function, a global (the root of its source's path)."""
    while hasattr(source, "base"):
        source = source.base
    name = getattr(source, "local_name", None)
    if name is not None:
        root = tx
        while root.parent is not None:
            root = root.parent
        return (f"the variable {name!r} captured from an enclosing function" if name in root.code.co_freevars
                else f"the argument {name!r}")
    name = getattr(source, "global_name", None)
    return f"the global {name!r}" if name is not None else "a value the function reads"
