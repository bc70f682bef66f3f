"""Sequences: lists, tuples, kiln.Size, slices and iterators over them.

Lists built inside the frame are modelled in place (append, extend, pop, item assignment);
a list that came from outside the frame is read-only to the interpreter, because writing to it
would be a side effect the compiled code must replay: mutating one is a graph break.
"""

import kiln
from kiln._dynamo.exc import unimplemented
from kiln._dynamo.variables.base import ConstantVariable, NotConstant, VariableTracker


class BaseListVariable(VariableTracker):
    kind = list

    def __init__(self, items, source=None):
        self.items, self.source = list(items), source

    def python_type(self):
        return self.kind

    def as_python_constant(self):
        return self.kind(i.as_python_constant() for i in self.items)

    def as_proxy(self):
        return self.kind(i.as_proxy() for i in self.items)

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        return list(self.items)

    def truth(self, tx):
        return bool(self.items)

    def describe(self):
        return f"{self.kind.__name__} of {len(self.items)}"

    def reconstruct(self, codegen):
        if self.source is not None and not self.mutable:
            return self.source.expr(codegen)
        if self.mutable:
            return codegen.materialize(self, self._build)
        return self._build(codegen)

    def _build(self, codegen):
        parts = [i.reconstruct(codegen) for i in self.items]
        if self.kind is tuple:
            return "(" + "".join(p + ", " for p in parts) + ")"
        if self.kind is list:
            return "[" + ", ".join(parts) + "]"
        return f"{codegen.object_expr(self.kind)}(({''.join(p + ', ' for p in parts)}))"

    def getitem(self, tx, index):
        if isinstance(index, slice):
            if self.kind is kiln.Size:
                return SizeVariable(self.items[index])
            return ListVariable(self.items[index]) if self.kind is list else TupleVariable(self.items[index])
        try:
            return self.items[index]
        except IndexError:
            unimplemented(f"{self.kind.__name__} index {index} out of range")

    def call_method(self, tx, name, args, kwargs):
        from kiln._dynamo.variables.builtin import BuiltinVariable

        if name == "__getitem__":
            return self.getitem(tx, args[0].as_python_constant())
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__":
            return BuiltinVariable(_contains).call_function(tx, [self, args[0]], {})
        if name == "index":
            target = args[0]
            for i, item in enumerate(self.items):
                if _equal(tx, item, target):
                    return ConstantVariable(i)
            unimplemented("list.index() of a value not found")
        if name == "count":
            return ConstantVariable(sum(_equal(tx, i, args[0]) for i in self.items))
        if name == "numel" and self.kind is kiln.Size:
            n = 1
            for i in self.items:
                n = BuiltinVariable(_mul).call_function(tx, [ConstantVariable(n) if isinstance(n, int) else n, i], {})
            return n if not isinstance(n, int) else ConstantVariable(n)
        if name in ("__add__", "__mul__", "__eq__", "__ne__", "__lt__"):
            import operator

            return BuiltinVariable(getattr(operator, name.strip("_"))).call_function(tx, [self] + list(args), kwargs)
        unimplemented(f"{self.kind.__name__}.{name}()")


def _contains(seq, x):
    return x in seq


def _mul(a, b):
    return a * b


def _equal(tx, a, b):
    if a is b:
        return True
    try:
        return a.as_python_constant() == b.as_python_constant()
    except NotConstant:
        return False


class TupleVariable(BaseListVariable):
    kind = tuple


class NamedTupleVariable(TupleVariable):
    """The named results of a kiln op (kiln.return_types.max: values, indices), a structseq.

    Its fields read as attributes (`x.max(dim=0).values`); it is rebuilt after the graph by calling
    the structseq type, whose constructor is C code, on a tuple of the items."""

    def __init__(self, items, kind, source=None):
        super().__init__(items, source)
        self.kind = kind

    def describe(self):
        return f"{self.kind.__module__}.{self.kind.__name__}"

    def var_getattr(self, tx, name):
        fields = self.kind.__match_args__
        if name in fields:
            return self.items[fields.index(name)]
        return super().var_getattr(tx, name)


def is_structseq_type(ty):
    """A structseq (kiln.return_types.*, os.stat_result): a tuple subclass with named fields."""
    return issubclass(ty, tuple) and hasattr(ty, "n_sequence_fields") and hasattr(ty, "__match_args__")


class SizeVariable(BaseListVariable):
    """kiln.Size: a tuple whose entries may be symbolic."""

    kind = kiln.Size

    def as_proxy(self):
        return tuple(i.as_proxy() for i in self.items)


class ListVariable(BaseListVariable):
    kind = list

    @property
    def mutable(self):
        return self.source is None

    def _check_mutable(self, tx, what):
        """A list from outside (an argument, a global, a captured variable) changes for real after
        the graph: side_effects.py writes its new items back (after `what` has changed them)."""
        if self.source is not None:
            tx.output.side_effects.mutate_list(tx, self)

    def call_method(self, tx, name, args, kwargs):
        result = self._call_method(tx, name, args, kwargs)
        if self.source is not None and tx.output.side_effects.is_mutated(self):
            tx.output.side_effects.check_list_items(self)
        return result

    def _call_method(self, tx, name, args, kwargs):
        if name == "append":
            self._check_mutable(tx, "list.append")
            self.items.append(args[0])
            return ConstantVariable(None)
        if name == "extend":
            self._check_mutable(tx, "list.extend")
            self.items.extend(args[0].unpack_var_sequence(tx))
            return ConstantVariable(None)
        if name == "insert":
            self._check_mutable(tx, "list.insert")
            self.items.insert(args[0].as_python_constant(), args[1])
            return ConstantVariable(None)
        if name == "pop":
            self._check_mutable(tx, "list.pop")
            index = args[0].as_python_constant() if args else -1
            return self.items.pop(index)
        if name == "clear":
            self._check_mutable(tx, "list.clear")
            self.items.clear()
            return ConstantVariable(None)
        if name == "reverse":
            self._check_mutable(tx, "list.reverse")
            self.items.reverse()
            return ConstantVariable(None)
        if name == "copy":
            return ListVariable(self.items)
        if name == "__setitem__":
            self._check_mutable(tx, "list item assignment")
            key = args[0].as_python_constant()
            if isinstance(key, slice):
                self.items[key] = args[1].unpack_var_sequence(tx)
            else:
                self.items[key] = args[1]
            return ConstantVariable(None)
        if name == "__delitem__":
            self._check_mutable(tx, "del on a list item")
            del self.items[args[0].as_python_constant()]
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)


class SliceVariable(VariableTracker):
    def __init__(self, start, stop, step):
        self.parts = (start, stop, step)

    def python_type(self):
        return slice

    def as_python_constant(self):
        return slice(*(p.as_python_constant() for p in self.parts))

    def as_proxy(self):
        return slice(*(p.as_proxy() for p in self.parts))

    def reconstruct(self, codegen):
        return "slice(" + ", ".join(p.reconstruct(codegen) for p in self.parts) + ")"


class ListIteratorVariable(VariableTracker):
    """iter() over a known sequence: the remaining items, consumed by FOR_ITER and next()."""

    def __init__(self, items, index=0):
        self.items, self.index = list(items), index

    mutable = True

    def python_type(self):
        return type(iter([]))

    def next_item(self):
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def has_unpack_var_sequence(self, tx):
        return True

    def unpack_var_sequence(self, tx):
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest

    def reconstruct(self, codegen):
        return codegen.materialize(self, lambda cg: "iter([" + ", ".join(
            i.reconstruct(cg) for i in self.items[self.index:]) + "])")

    def describe(self):
        return "iterator"
