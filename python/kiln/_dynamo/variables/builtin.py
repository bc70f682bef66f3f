"""Builtins and the operator and math modules applied to trackers.

Constant arguments fold (the call runs now, at compile time). Tensors and symbolic sizes become
graph nodes (`operator.add` on a tensor is a call_function node, as in PyTorch's graphs).
Sequences, dicts and iterators are modelled structurally (len, zip, enumerate, min, max, any, ...).
Anything else (print, input, open, ...) is a graph break.
"""

import builtins
import math
import operator

import kiln
from kiln._dynamo.exc import Unsupported, unimplemented
from kiln._dynamo.variables.base import ConstantVariable, NotConstant, VariableTracker
from kiln._dynamo.variables.lists import (
    BaseListVariable, ListIteratorVariable, ListVariable, SizeVariable, SliceVariable, TupleVariable,
)
from kiln._dynamo.variables.tensor import SymNodeVariable, TensorVariable, sym_or_constant

_BINARY = {operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
           operator.pow, operator.matmul, operator.and_, operator.or_, operator.xor, operator.lshift,
           operator.rshift, operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
           operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
           operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor}
_UNARY = {operator.neg, operator.pos, operator.invert, abs, operator.abs}
_INPLACE_TO_OUT = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                   operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
                   operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
                   operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor}
# Pure callables that fold on constant arguments.
_FOLDABLE = ({len, abs, min, max, round, divmod, pow, int, float, bool, str, repr, tuple, list, sorted, sum, all,
              any, isinstance, issubclass, hash, chr, ord, format, type, callable, frozenset, range, slice, hex,
              reversed, enumerate, zip}
             | {getattr(operator, n) for n in dir(operator) if not n.startswith("_")}
             | {getattr(math, n) for n in dir(math) if callable(getattr(math, n))})
_SIDE_EFFECTS = {print: "print() is a side effect in Python",
                 input: "input() is a side effect", open: "open() is a side effect",
                 builtins.exec: "exec()", builtins.eval: "eval()", builtins.compile: "compile()",
                 builtins.globals: "globals()", builtins.locals: "locals()", builtins.vars: "vars()",
                 builtins.setattr: "setattr()"}


def _is_graph_value(v):
    return isinstance(v, (TensorVariable, SymNodeVariable))


class BuiltinVariable(VariableTracker):
    def __init__(self, fn, source=None):
        self.fn, self.source = fn, source

    def python_type(self):
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def describe(self):
        return f"builtin {getattr(self.fn, '__name__', self.fn)}"

    def reconstruct(self, codegen):
        return codegen.object_expr(self.fn)

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if fn in _SIDE_EFFECTS:
            unimplemented(_SIDE_EFFECTS[fn], f"move {getattr(fn, '__name__', fn)}() out of the compiled function")
        handler = _HANDLERS.get(fn)
        if handler is not None:
            result = handler(tx, *args, **kwargs)
            if result is not None:
                return result
        if fn in _INPLACE_TO_OUT and any(_is_graph_value(a) for a in args):
            return _inplace(tx, fn, args)
        if (fn in _BINARY or fn in _UNARY) and any(_is_graph_value(a) for a in args) and not kwargs:
            return _graph_op(tx, fn, args)
        if fn in _BINARY and len(args) == 2:
            seq = _sequence_op(tx, fn, args[0], args[1])
            if seq is not None:
                return seq
        if fn in _FOLDABLE:
            try:
                values = [a.as_python_constant() for a in args]
                kw = {k: v.as_python_constant() for k, v in kwargs.items()}
            except NotConstant:
                unimplemented(f"{self.describe()} on {', '.join(a.describe() for a in args)}")
            try:
                return ConstantVariable(fn(*values, **kw))
            except Exception as e:
                unimplemented(f"{self.describe()} raised {type(e).__name__}: {e}")
        if not _is_python_builtin(fn) and not _c_function_name(fn).startswith("kiln."):
            # also warned about without KILN_LOGS (break_warnings.py): most users never see the break;
            # kiln's own (a gap in kiln the user cannot fix) are logged as any other break
            name = _c_function_name(fn)
            unimplemented(f"kiln does not know how to trace the builtin `{name}`: a C function (of Python or of an "
                          "extension module) that kiln does not model",
                          "call it outside the compiled function, or, if it takes and returns tensors and runs on "
                          "fake tensors, kiln._dynamo.allow_in_graph(fn) keeps it in the graph", costly="c_function")
        unimplemented(f"calling {self.describe()}", "move the call out of the compiled function")


def _is_python_builtin(fn):
    """builtins', operator's and math's functions and the methods of builtin types' objects
    (`lst.append` taken as a value): the interpreter's own business (a break on one is logged like
    any other); any other C function is an extension's or a library's."""
    owner = getattr(fn, "__self__", None)
    return getattr(fn, "__module__", None) in ("builtins", "_operator", "operator", "math") or \
        owner is builtins or (owner is not None and type(owner).__module__ == "builtins" and
                              not isinstance(owner, type(builtins)))


def _c_function_name(fn):
    """`time.perf_counter`, `kiln._C._is_fake` (pybind11's `PyCapsule.` qualname prefix dropped)."""
    owner = getattr(fn, "__self__", None)
    module = getattr(fn, "__module__", None) or (owner.__name__ if isinstance(owner, type(builtins)) else
                                                 type(owner).__module__ if owner is not None else "?")
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}.{name.removeprefix('PyCapsule.')}"


def _graph_op(tx, fn, args):
    if any(isinstance(a, TensorVariable) for a in args):
        return tx.output.call(tx, "call_function", fn, tuple(args), {})
    values = [a.value if isinstance(a, SymNodeVariable) else a.as_python_constant() for a in args]
    result = fn(*values)
    return sym_or_constant(tx, result, lambda: tx.output.call_raw(
        tx, "call_function", fn, tuple(a.as_proxy() for a in args), {}, example=result))


def _inplace(tx, fn, args):
    a, b = args
    if isinstance(a, TensorVariable):  # x += y on a tensor mutates x: keep PyTorch's in-place op
        return tx.output.call(tx, "call_function", fn, (a, b), {})
    return _graph_op(tx, _INPLACE_TO_OUT[fn], args)


def _sequence_op(tx, fn, a, b):
    """+, * and comparisons on lists and tuples, element-wise over trackers."""
    if fn in (operator.add, operator.iadd) and isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
        if fn is operator.iadd and isinstance(a, ListVariable):
            a.call_method(tx, "extend", [b], {})
            return a
        if a.kind is kiln.Size or b.kind is kiln.Size:
            return SizeVariable(a.items + b.items)
        return type(a)(a.items + b.items)
    if fn in (operator.mul, operator.imul):
        seq, n = (a, b) if isinstance(a, BaseListVariable) else (b, a)
        if isinstance(seq, BaseListVariable) and n.is_python_constant():
            return type(seq)(seq.items * n.as_python_constant())
    if fn in (operator.eq, operator.ne) and isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
        if len(a.items) != len(b.items):
            return ConstantVariable(fn is operator.ne)
        result = True
        for x, y in zip(a.items, b.items):
            r = BuiltinVariable(operator.eq).call_function(tx, [x, y], {})
            if not r.truth(tx):
                result = False
                break
        return ConstantVariable(result if fn is operator.eq else not result)
    return None


# --- builtins with structure -------------------------------------------------------------------
def _len(tx, x):
    return x.call_method(tx, "__len__", [], {})


def _isinstance(tx, obj, cls):
    try:
        classes = cls.as_python_constant()
    except NotConstant:
        unimplemented(f"isinstance() against {cls.describe()}")
    ty = obj.python_type()
    if isinstance(obj, TensorVariable):
        from kiln._tensor_types import tensortype
        from kiln.nn.parameter import Parameter

        if any(isinstance(c, tensortype) for c in (classes if isinstance(classes, tuple) else (classes,))):
            return ConstantVariable(isinstance(obj.example, classes))  # kiln.FloatTensor: a dtype test

        if isinstance(obj.example, Parameter):
            ty = Parameter
    try:
        return ConstantVariable(issubclass(ty, classes))
    except TypeError as e:
        unimplemented(f"isinstance(): {e}")


def _getattr(tx, obj, name, default=None):
    attr = name.as_python_constant()
    if default is None:
        return obj.var_getattr(tx, attr)
    has = _hasattr(tx, obj, name)
    return obj.var_getattr(tx, attr) if has.value else default


def _hasattr(tx, obj, name):
    attr = name.as_python_constant()
    probe = getattr(obj, "has_attr", None)
    if probe is not None:
        return ConstantVariable(probe(tx, attr))
    try:
        obj.var_getattr(tx, attr)
        return ConstantVariable(True)
    except Unsupported:
        if obj.is_python_constant():
            return ConstantVariable(hasattr(obj.as_python_constant(), attr))
        raise


def _items(tx, x):
    return x.unpack_var_sequence(tx)


def _enumerate(tx, seq, start=None):
    s = start.as_python_constant() if start is not None else 0
    return ListIteratorVariable([TupleVariable([ConstantVariable(i + s), v]) for i, v in enumerate(_items(tx, seq))])


def _zip(tx, *seqs, strict=None):
    lists = [_items(tx, s) for s in seqs]
    return ListIteratorVariable([TupleVariable(list(t)) for t in zip(*lists)])


def _range(tx, *args):
    if all(a.is_python_constant() for a in args):
        return ConstantVariable(range(*[a.as_python_constant() for a in args]))
    values = [a.evaluate() if isinstance(a, SymNodeVariable) else a.as_python_constant() for a in args]
    return ConstantVariable(range(*values))  # symbolic bounds specialise (guarded)


def _list(tx, seq=None):
    return ListVariable(_items(tx, seq) if seq is not None else [])


def _tuple(tx, seq=None):
    return TupleVariable(_items(tx, seq) if seq is not None else [])


def _dict(tx, seq=None, **kwargs):
    from kiln._dynamo.variables.dicts import ConstDictVariable

    d = ConstDictVariable({})
    if seq is not None:
        d.call_method(tx, "update", [seq], {})
    d.items.update(kwargs)
    return d


def _set(tx, seq=None):
    from kiln._dynamo.variables.dicts import SetVariable

    return SetVariable(_items(tx, seq) if seq is not None else [])


def _iter(tx, seq):
    if isinstance(seq, ListIteratorVariable):
        return seq
    return ListIteratorVariable(_items(tx, seq))


def _next(tx, it, default=None):
    if not isinstance(it, ListIteratorVariable):
        unimplemented(f"next() on {it.describe()}")
    item = it.next_item()
    if item is None:
        if default is not None:
            return default
        unimplemented("next() on an exhausted iterator (StopIteration)")
    return item


def _reversed(tx, seq):
    return ListIteratorVariable(list(reversed(_items(tx, seq))))


def _minmax(fn):
    def handler(tx, *args, **kwargs):
        if kwargs:
            return None
        items = _items(tx, args[0]) if len(args) == 1 else list(args)
        if not items:
            return None
        if all(i.is_python_constant() for i in items):
            return ConstantVariable(fn(i.as_python_constant() for i in items))
        if any(isinstance(i, TensorVariable) for i in items):
            unimplemented(f"{fn.__name__}() over tensors compares tensor values",
                          f"use kiln.{'maximum' if fn is max else 'minimum'} instead")
        from kiln._symbolic import sym_max, sym_min

        best = items[0]
        combine = sym_max if fn is max else sym_min
        for other in items[1:]:
            values = [v.value if isinstance(v, SymNodeVariable) else v.as_python_constant() for v in (best, other)]
            result = combine(*values)
            a, b = best, other
            best = sym_or_constant(tx, result, lambda a=a, b=b, r=result: tx.output.call_raw(
                tx, "call_function", combine, (a.as_proxy(), b.as_proxy()), {}, example=r))
        return best

    return handler


def _any_all(fn):
    def handler(tx, seq):
        results = [i.truth(tx) for i in _items(tx, seq)]
        return ConstantVariable(fn(results))

    return handler


def _sum(tx, seq, start=None):
    items = _items(tx, seq)
    total = start if start is not None else ConstantVariable(0)
    for i in items:
        total = BuiltinVariable(operator.add).call_function(tx, [total, i], {})
    return total


def _bool(tx, x=None):
    return ConstantVariable(False if x is None else x.truth(tx))


def _int_float(fn):
    def handler(tx, x=None, *rest):
        if x is None or x.is_python_constant() or rest:
            return None
        if isinstance(x, SymNodeVariable):
            return ConstantVariable(fn(x.evaluate()))
        unimplemented(f"{fn.__name__}() of {x.describe()} reads a tensor's data",
                      "keep the value a tensor (e.g. x.to(kiln.int64))", costly="item")

    return handler


def _abs(tx, x):
    if isinstance(x, TensorVariable):
        return tx.output.call(tx, "call_function", abs, (x,), {})
    return None


def _type(tx, x):
    return ConstantVariable(x.python_type())


def _map(tx, fn, *seqs):
    lists = [_items(tx, s) for s in seqs]
    return ListIteratorVariable([fn.call_function(tx, list(t), {}) for t in zip(*lists)])


def _filter(tx, fn, seq):
    items = _items(tx, seq)
    if fn.is_python_constant() and fn.as_python_constant() is None:
        return ListIteratorVariable([i for i in items if i.truth(tx)])
    return ListIteratorVariable([i for i in items if fn.call_function(tx, [i], {}).truth(tx)])


def _sorted(tx, seq, key=None, reverse=None):
    items = _items(tx, seq)
    if key is not None or not all(i.is_python_constant() for i in items):
        unimplemented("sorted() of non-constants or with key=")
    rev = reverse.as_python_constant() if reverse is not None else False
    return ListVariable([ConstantVariable(v) for v in sorted((i.as_python_constant() for i in items), reverse=rev)])


def _is_integer_scalar_tensor(v):
    ex = getattr(v, "example", None) if isinstance(v, TensorVariable) else None
    return isinstance(ex, kiln.Tensor) and ex.dim() == 0 and not ex.is_floating_point() and \
        ex.dtype not in (kiln.bool, kiln.uint8)


def _getitem(tx, obj, index):
    if isinstance(obj, TensorVariable):
        parts = index.items if isinstance(index, (ListVariable, TupleVariable)) else [index]
        if any(_is_integer_scalar_tensor(p) for p in parts):
            # eager reads the index's value and selects (a view); traced, it would be a gather
            # (a copy), as PyTorch's Dynamo breaks here too
            unimplemented("indexing a tensor with a 0-d integer tensor (its value picks a view)")
        return tx.output.call(tx, "call_function", operator.getitem, (obj, index), {})
    if isinstance(index, (TensorVariable,)):
        unimplemented("indexing a Python sequence with a tensor")
    if isinstance(index, SliceVariable):
        index = ConstantVariable(index.as_python_constant())
    if isinstance(index, SymNodeVariable):
        index = ConstantVariable(index.evaluate())
    return obj.call_method(tx, "__getitem__", [index], {})


def _contains(tx, seq, item):
    if isinstance(seq, TensorVariable):
        return seq.call_method(tx, "__contains__", [item], {})
    if hasattr(seq, "items") and isinstance(getattr(seq, "items"), dict):
        return seq.call_method(tx, "__contains__", [item], {})
    if seq.is_python_constant() and item.is_python_constant():
        return ConstantVariable(item.as_python_constant() in seq.as_python_constant())
    for x in _items(tx, seq):
        if x is item:
            return ConstantVariable(True)
        if x.is_python_constant() and item.is_python_constant() and x.as_python_constant() == item.as_python_constant():
            return ConstantVariable(True)
        if _is_graph_value(x) or _is_graph_value(item):
            unimplemented("`in` over tensors compares tensor values")
    return ConstantVariable(False)


def _not(tx, x):
    return ConstantVariable(not x.truth(tx))


def _is(negate):
    def handler(tx, a, b):
        if a is b:
            return ConstantVariable(not negate)
        if a.is_python_constant() and b.is_python_constant():
            r = a.as_python_constant() is b.as_python_constant()
            return ConstantVariable(r != negate)
        if _is_graph_value(a) != _is_graph_value(b) and (a.is_python_constant() or b.is_python_constant()):
            return ConstantVariable(negate)  # a tensor is never None/a constant
        if type(a).__name__ == type(b).__name__ and getattr(a, "value", None) is not None:
            return ConstantVariable((a.value is b.value) != negate)
        unimplemented(f"`is` between {a.describe()} and {b.describe()}")

    return handler


def _callable(tx, x):
    if x.is_python_constant():
        return ConstantVariable(callable(x.as_python_constant()))
    from kiln._dynamo.variables.functions import BaseUserFunctionVariable

    return ConstantVariable(isinstance(x, BaseUserFunctionVariable) or hasattr(x, "call_function"))


def _setitem(tx, obj, key, value):
    return obj.call_method(tx, "__setitem__", [key, value], {})


def _delitem(tx, obj, key):
    return obj.call_method(tx, "__delitem__", [key], {})


def _super(tx, cls=None, obj=None):
    from kiln._dynamo.variables.misc import SuperVariable

    if cls is None:  # zero-argument form: the method's __class__ cell and first argument
        cell = tx.closure.get("__class__") or tx.cells.get("__class__")
        first = tx.code.co_varnames[0] if tx.code.co_argcount else None
        if cell is None or first not in tx.symbolic_locals:
            unimplemented("super() outside a method")
        tx._cell("__class__")
        cls, obj = cell.contents, tx.symbolic_locals[first]
    return SuperVariable(cls, obj)


def _truth(tx, x):
    return ConstantVariable(x.truth(tx))


def _id(tx, x=None, *rest):
    """id() of an object the frame reached (an argument, a module, a parameter): its real id, a
    constant, guarded by identity (ID_MATCH), as PyTorch's call_id. An object made during capture
    has no id before the graph runs: that stays a graph break."""
    if x is None or rest:
        return None
    value = _real_object(tx, x)
    if value is None:
        unimplemented(f"id() of {x.describe()}, made inside the compiled function (it has no id until it runs)",
                      "compare objects with `is`, or take id() of an argument or a module")
    tx.output.guards.add(x.source, "ID_MATCH", value)
    return ConstantVariable(id(value))


def _real_object(tx, x):
    """The object a tracker stands for, when it came from the frame (has a source), else None."""
    if getattr(x, "source", None) is None:
        return None
    if isinstance(x, TensorVariable):
        return next((ga.example for ga in tx.output.graphargs if ga.source.name() == x.source.name()), None)
    from kiln._dynamo.variables.base import ObjectVariable

    if isinstance(x, ObjectVariable):
        return x.value
    fn = getattr(x, "fn", None)  # a user function
    return fn if callable(fn) else None


_HANDLERS = {
    len: _len, isinstance: _isinstance, getattr: _getattr, hasattr: _hasattr, enumerate: _enumerate, zip: _zip,
    range: _range, list: _list, tuple: _tuple, dict: _dict, set: _set, iter: _iter, next: _next,
    reversed: _reversed, min: _minmax(min), max: _minmax(max), any: _any_all(any), all: _any_all(all), sum: _sum,
    bool: _bool, int: _int_float(int), float: _int_float(float), abs: _abs, operator.abs: _abs, type: _type,
    map: _map, filter: _filter, sorted: _sorted, operator.getitem: _getitem, operator.contains: _contains,
    operator.not_: _not, operator.is_: _is(False), operator.is_not: _is(True), callable: _callable,
    operator.setitem: _setitem, operator.delitem: _delitem, operator.truth: _truth, super: _super, id: _id,
}
