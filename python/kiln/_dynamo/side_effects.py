"""SideEffects: attribute writes (`self.src_mask = mask`, `self.calls += 1`), global stores
(`global step; step += 1`) and in-place changes of lists from outside (`seen.append(y)` on a list
captured from an enclosing function) made during capture, replayed by the generated code after
the graph runs (PyTorch's torch/_dynamo/side_effects.py).

A STORE_ATTR on a module or user object does not touch the real object while tracing: the write is
recorded here, later reads of that attribute in the same translation see the recorded tracker, and
the replacement code performs the write for real once the graph has produced the value:

        ___out = __compiled_fn_0(x, ...)
        ___ret = ___out[0]
        self.last_loss = ___out[1]      # the stored tensor is an extra output of the graph
        return ___ret

Writes the replay could not reproduce exactly (a property setter, a custom __setattr__,
registering a parameter or submodule, a value that cannot be rebuilt after the graph) are graph
breaks instead: the write then runs in Python.
"""

import kiln
from kiln._dynamo.exc import unimplemented
from kiln._dynamo.variables.base import ConstantVariable
from kiln._dynamo.variables.dicts import ConstDictVariable
from kiln._dynamo.variables.lists import BaseListVariable
from kiln._dynamo.variables.misc import UserDefinedObjectVariable
from kiln._dynamo.variables.nn_module import NNModuleVariable
from kiln._dynamo.variables.tensor import SymNodeVariable, TensorVariable

_MISSING = object()


class SideEffects:
    def __init__(self):
        # (id(object), attribute name) -> (object tracker, name, value tracker), in store order.
        # The object tracker keeps the object alive, so its id stays unique for the translation.
        self.attr_stores = {}
        self.global_stores = {}  # name -> value tracker: `global n; n = ...` in the frame's module
        self.list_stores = {}    # id(list) -> (the list, its tracker): a list from outside, changed in place

    def __bool__(self):
        return bool(self.attr_stores or self.global_stores or self.list_stores)

    # --- recording ------------------------------------------------------------------------------
    def store_attr(self, tx, obj, name, value):
        _check_target(obj, name)
        _check_value(obj, name, value)
        key = (id(obj.value), name)
        self.attr_stores.pop(key, None)  # a rewrite moves to the end: replay order is store order
        self.attr_stores[key] = (obj, name, value)

    def store_global(self, tx, name, value):
        """A global of the compiled frame's module, assigned: written after the graph (PyTorch's
        store_global); later reads in this translation see the new value."""
        if not _replayable(value):
            unimplemented(f"assigning {value.describe()} to the global {name!r}: it cannot be rebuilt after the graph",
                          "assign tensors, numbers, strings, or lists/tuples/dicts of them")
        self.global_stores.pop(name, None)
        self.global_stores[name] = value

    def load_global(self, name):
        return self.global_stores.get(name)

    def mutate_list(self, tx, lst):
        """A list that came from outside (an argument, a global, a list captured from an enclosing
        function) changed in place (append, extend, item assignment...): its new items are written
        back after the graph, `lst[:] = [...]`, as PyTorch replays a mutated list. Later reads of
        the same list (`self.log` read again) get this tracker (mutated_list), so every change
        lands in one list of items."""
        real = lst.real_list
        hit = self.list_stores.get(id(real))
        if hit is not None and hit[1] is not lst:  # read twice before either changed it
            unimplemented("changing a list from outside through two references read before the change",
                          "read the list once into a local and change it through that")
        self.list_stores[id(real)] = (real, lst)

    def mutated_list(self, value):
        """The tracker of list `value` if this translation changed it, else None."""
        hit = self.list_stores.get(id(value))
        return None if hit is None else hit[1]

    def is_mutated(self, lst):
        hit = self.list_stores.get(id(getattr(lst, "real_list", None)))
        return hit is not None and hit[1] is lst

    @staticmethod
    def check_list_items(lst):
        """The items of a list from outside that changed in place must be rebuilt after the graph
        (the list trackers call this through tx.output, never importing this module)."""
        for item in lst.items:
            if not _replayable(item):
                unimplemented(f"putting {item.describe()} into a list that came from outside the compiled function: "
                              "it cannot be rebuilt after the graph",
                              "put tensors, numbers or strings into it, or build a new list and return it")

    def load_attr(self, obj_value, name):
        """The tracker stored to `obj_value.name` during this translation, or None."""
        hit = self.attr_stores.get((id(obj_value), name))
        return None if hit is None else hit[2]

    def has_attr(self, obj_value, name):
        return (id(obj_value), name) in self.attr_stores

    def values(self):
        """The stored trackers: the graph must output the tensors among them."""
        return ([value for _, _, value in self.attr_stores.values()] + list(self.global_stores.values())
                + [item for _, lst in self.list_stores.values() for item in lst.items])

    # --- replay -----------------------------------------------------------------------------------
    def codegen(self, cg):
        """Emits the writes (after the graph call and after every other value was read)."""
        for obj, name, value in self.attr_stores.values():
            cg.emit(f"{obj.reconstruct(cg)}.{name} = {value.reconstruct(cg)}")
        for _, lst in self.list_stores.values():
            items = "".join(f"{item.reconstruct(cg)}, " for item in lst.items)
            cg.emit(f"{lst.source.expr(cg)}[:] = [{items}]")
        for name, value in self.global_stores.items():
            cg.emit(f"globals()[{name!r}] = {value.reconstruct(cg)}")


def _check_target(obj, name):
    if not isinstance(obj, (NNModuleVariable, UserDefinedObjectVariable)) or obj.source is None:
        unimplemented(f"assigning attribute {name!r} of {obj.describe()}",
                      "only attributes of modules and objects passed into the compiled function are written")
    target = obj.value
    cls = type(target)
    setattr_fn = getattr(cls, "__setattr__", None)
    if setattr_fn is not object.__setattr__ and setattr_fn is not kiln.nn.Module.__setattr__:
        unimplemented(f"assigning attribute {name!r} of {obj.describe()}, whose class defines __setattr__")
    if not hasattr(target, "__dict__"):
        unimplemented(f"assigning attribute {name!r} of {obj.describe()}, which has no __dict__ (__slots__)")
    for klass in cls.__mro__:
        if name in klass.__dict__:
            if hasattr(klass.__dict__[name], "__set__"):
                unimplemented(f"assigning attribute {name!r} of {obj.describe()} through a descriptor "
                              "(property setter or slot)")
            break


def _check_value(obj, name, value):
    if isinstance(obj, NNModuleVariable):
        d = obj.value.__dict__
        if name in (d.get("_parameters") or {}) or name in (d.get("_modules") or {}):
            unimplemented(f"assigning the registered parameter or submodule {name!r} of {obj.describe()}",
                          "assign it outside the compiled function")
        if isinstance(value, TensorVariable) and isinstance(value.example, kiln.nn.Parameter):
            unimplemented(f"registering a parameter {name!r} on {obj.describe()}")
        if isinstance(value, NNModuleVariable):
            unimplemented(f"registering a submodule {name!r} on {obj.describe()}")
    if not _replayable(value):
        unimplemented(f"assigning {value.describe()} to attribute {name!r}: it cannot be rebuilt after the graph",
                      "assign tensors, numbers, strings, or lists/tuples/dicts of them")


def _replayable(v):
    if isinstance(v, (TensorVariable, SymNodeVariable, ConstantVariable)):
        return True
    if getattr(v, "source", None) is not None and not v.mutable:  # rebuilt from where it was read
        return True
    if isinstance(v, BaseListVariable):
        return all(_replayable(i) for i in v.items)
    if isinstance(v, ConstDictVariable):
        return all(_replayable(i) for i in v.items.values())
    if isinstance(v, (NNModuleVariable, UserDefinedObjectVariable)):
        return v.source is not None
    return False
