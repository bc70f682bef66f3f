"""wrap(): a frame value becomes a tracker, and the guards that keep it valid are recorded.

The kind of tracker follows the value's type; the guard follows the kind: tensors become graph
inputs (TENSOR_MATCH), constants are guarded by equality, functions, classes and Python modules by
identity, modules and user objects by type, lists and tuples by type and length, dicts by keys.
A value without a source (made during capture, or trusted like kiln.relu) gets no guard.
"""

import builtins
import math
import operator
import types

import kiln
from kiln import _C
from kiln._dynamo.dynamic_ints import wants_symbol
from kiln._dynamo.exc import unimplemented
from kiln._dynamo.source import GetItemSource
from kiln._dynamo.variables.base import ConstantVariable, LazyVariable, NotConstant, is_constant_value
from kiln._dynamo.variables.builtin import BuiltinVariable
from kiln._dynamo.variables.dicts import ConstDictVariable
from kiln._dynamo.variables.functions import UserFunctionVariable, UserMethodVariable
from kiln._dynamo.variables.kiln_fns import AutocastVariable, GradModeVariable, KilnFunctionVariable
from kiln._dynamo.variables.lists import (ListVariable, NamedTupleVariable, SizeVariable, TupleVariable,
                                         is_structseq_type)
from kiln._dynamo.variables.misc import PythonModuleVariable, UserDefinedClassVariable, UserDefinedObjectVariable
from kiln._dynamo.variables.nn_module import NNModuleVariable

_BUILTIN_CALLABLES = (types.BuiltinFunctionType, types.BuiltinMethodType)
# kiln modules whose Python functions are ops (graph nodes); other kiln Python code is inlined.
_KILN_OP_MODULES = {"kiln", "kiln.nn.functional", "kiln.functional", "kiln._tensor", "kiln.nn.init",
                    "kiln.linalg", "kiln.fft", "kiln.special", "kiln._composites", "kiln._einsum",
                    "kiln._order_stats", "kiln._set_ops", "kiln._windows", "kiln.nn._spatial",
                    "kiln.nn._embedding_bag", "kiln._aliases", "kiln._pointwise_more", "kiln._matrix_more",
                    "kiln._index_ops_more", "kiln.nn._activation_functional",
                    "kiln.nn._loss_functional", "kiln._nn_toplevel", "kiln._special_more",
                    "kiln._utilities_more", "kiln._tensor_methods_extra"}


def is_kiln_op(value):
    if isinstance(value, _C._OpFunction):
        return True
    if isinstance(value, types.FunctionType):
        return value.__module__ in _KILN_OP_MODULES and not value.__name__.startswith("_")
    return value is _C._set_grad_enabled or value is _C.is_grad_enabled


def _checkpoint_fn():
    from kiln.utils.checkpoint import checkpoint

    return checkpoint


def _member(value, table):
    try:
        return value in table
    except TypeError:  # unhashable values are never functions
        return False


def _allowed_in_graph(value):
    from kiln._dynamo import _allowed_functions

    return _member(value, _allowed_functions)


def wrap(tx, value, source):
    """The tracker for `value`, reached through `source` (None: no guard needed)."""
    out = tx.output
    guard = out.guards if source is not None else None
    if isinstance(value, kiln.Tensor):
        if source is None:
            unimplemented("a tensor made outside the compiled function that no local or global reaches",
                          "pass it as an argument")
        return out.add_graph_input(tx, source, value)
    if isinstance(value, kiln.Size):
        if guard:
            guard.add(source, "TYPE_MATCH", type(value))
            guard.add(source, "EQUALS_MATCH", value)
        return SizeVariable([ConstantVariable(v) for v in value], source=source)
    if type(value) is int and source is not None and wants_symbol(out, source, value):
        return out.add_int_input(tx, source, value)  # automatic dynamic ints (dynamic_ints.py)
    if is_constant_value(value):
        if guard:
            if value is None:
                guard.add(source, "ID_MATCH", None)
            elif isinstance(value, (_C.dtype,)):
                guard.add(source, "ID_MATCH", value)
            else:
                guard.add(source, "EQUALS_MATCH", value)
        return ConstantVariable(value, source=source)
    if isinstance(value, kiln.nn.Module):
        if guard:
            guard.add(source, "TYPE_MATCH", type(value))
        return NNModuleVariable(value, source)
    if isinstance(value, (kiln.no_grad, kiln.enable_grad)):
        if guard:
            guard.add(source, "TYPE_MATCH", type(value))
        return GradModeVariable(isinstance(value, kiln.enable_grad))
    if isinstance(value, _autocast_cls()):
        if guard:
            guard.add(source, "TYPE_MATCH", type(value))
        return AutocastVariable(value)
    if value is _checkpoint_fn():
        from kiln._dynamo.variables.kiln_fns import CheckpointVariable

        return CheckpointVariable(value)
    if _allowed_in_graph(value) or is_kiln_op(value) or _member(value, _KILN_SPECIAL):
        if guard:
            guard.add(source, "ID_MATCH", value)
        return KilnFunctionVariable(value, source)
    if type(value) is list and source is not None and out.side_effects.mutated_list(value) is not None:
        return out.side_effects.mutated_list(value)  # changed earlier in this translation: its items
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list):
        if guard:
            guard.add(source, "TYPE_MATCH", type(value))
            guard.add(source, "LENGTH_CHECK", len(value))
        items = [wrap(tx, v, GetItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        var = (TupleVariable if type(value) is tuple else ListVariable)(items, source=source)
        if type(value) is list:
            var.real_list = value  # the object side_effects.py writes back into, if it changes
        return var
    if isinstance(value, tuple) and is_structseq_type(type(value)):
        if guard:
            guard.add(source, "TYPE_MATCH", type(value))
        items = [wrap(tx, v, GetItemSource(source, i) if source is not None else None) for i, v in enumerate(value)]
        return NamedTupleVariable(items, type(value), source=source)
    if type(value) is dict or (isinstance(value, dict) and type(value).__module__ == "collections"):
        if not all(is_constant_value(k) for k in value):
            unimplemented("a dict with non-constant keys")
        if guard:
            guard.add(source, "TYPE_MATCH", type(value))
            guard.add(source, "DICT_KEYS", list(value))
        items = {k: LazyVariable(v, GetItemSource(source, k, is_dict=True) if source is not None else None)
                 for k, v in value.items()}
        return ConstDictVariable(items, kind=type(value), source=source)
    if isinstance(value, types.FunctionType):
        if guard:
            guard.add(source, "ID_MATCH", value)
        return UserFunctionVariable(value, source)
    if isinstance(value, _C._dynamo.ScopedCall):
        if guard:
            guard.add(source, "ID_MATCH", value)
        if value._kiln_callback is None:
            return DisabledFunctionVariable(value, source)
        return wrap(tx, value.__wrapped__, None)  # a compiled function called from compiled code
    if isinstance(value, types.MethodType) and isinstance(value.__self__, (kiln.no_grad, kiln.enable_grad)) \
            and value.__func__ is type(value.__self__).__exit__:
        from kiln._dynamo.source import AttrSource
        from kiln._dynamo.variables.kiln_fns import WithExitVariable

        ctx = GradModeVariable(isinstance(value.__self__, kiln.enable_grad))
        ctx.previous = value.__self__.prev
        if guard:  # a resumed with-block's exit: its mode and saved mode are baked into the graph
            guard.add(AttrSource(source, "__self__"), "TYPE_MATCH", type(value.__self__))
            guard.add(AttrSource(AttrSource(source, "__self__"), "prev"), "EQUALS_MATCH", ctx.previous)
        return WithExitVariable(ctx)
    if isinstance(value, types.MethodType):
        from kiln._dynamo.source import AttrSource

        self_var = wrap(tx, value.__self__, AttrSource(source, "__self__") if source is not None else None)
        if isinstance(value.__func__, types.FunctionType):
            if guard:
                guard.add(AttrSource(source, "__func__"), "ID_MATCH", value.__func__)
            return UserMethodVariable(value.__func__, self_var)
        unimplemented(f"bound method {value!r}")
    if callable(value) and _member(value, _BUILTIN_FUNCTIONS):
        if guard:
            guard.add(source, "ID_MATCH", value)
        return BuiltinVariable(value, source)
    if isinstance(value, types.ModuleType):
        if guard:
            guard.add(source, "ID_MATCH", value)
        return PythonModuleVariable(value, source)
    if isinstance(value, type):
        if guard:
            guard.add(source, "ID_MATCH", value)
        return UserDefinedClassVariable(value, source)
    if isinstance(value, _BUILTIN_CALLABLES):
        if guard:
            guard.add(source, "ID_MATCH", value)
        return BuiltinVariable(value, source)
    if guard:
        guard.add(source, "TYPE_MATCH", type(value))
    return UserDefinedObjectVariable(value, source)


class DisabledFunctionVariable(UserFunctionVariable):
    """A function under kiln._dynamo.disable: calling it is a graph break (it runs eagerly)."""

    def call_function(self, tx, args, kwargs):
        name = getattr(self.fn.__wrapped__, "__qualname__", repr(self.fn.__wrapped__))
        unimplemented(f"{name} is marked kiln._dynamo.disable", "it runs eagerly by request")

    def reconstruct(self, codegen):
        return codegen.object_expr(self.fn)


def wrap_const_or_object(tx, value):
    """A default argument or other value without a source."""
    return wrap(tx, value, None)


def _autocast_cls():
    from kiln.amp.autocast_mode import autocast

    return autocast


def call_class(tx, cls_var, args, kwargs):
    """Calling a class during capture: the few the interpreter models."""
    cls = cls_var.value
    if cls in (kiln.no_grad, kiln.enable_grad):
        return GradModeVariable(cls is kiln.enable_grad)
    if cls is kiln.Size:
        return SizeVariable(args[0].unpack_var_sequence(tx) if args else [])
    if cls is _autocast_cls():  # built now from constant arguments: its checks and warnings run
        try:
            const_args = [a.as_python_constant() for a in args]
            const_kwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
        except NotConstant:
            unimplemented("kiln.autocast with arguments that are not constants")
        return AutocastVariable(cls(*const_args, **const_kwargs))
    if _member(cls, _BUILTIN_FUNCTIONS):
        return BuiltinVariable(cls).call_function(tx, args, kwargs)
    if is_structseq_type(cls) and cls.__module__ == "kiln.return_types" and len(args) == 1 and not kwargs:
        # a Python-composed op's named result (kiln.linalg.lu, lstsq, ...): built from one sequence
        return NamedTupleVariable(list(args[0].unpack_var_sequence(tx)), cls)
    unimplemented(f"constructing a {cls.__qualname__} object inside the compiled function",
                  "construct it outside and pass it in")


_BUILTIN_FUNCTIONS = set()
for _name in dir(builtins):
    _obj = getattr(builtins, _name)
    if callable(_obj) and not (isinstance(_obj, type) and issubclass(_obj, BaseException)):
        try:
            _BUILTIN_FUNCTIONS.add(_obj)
        except TypeError:
            pass
for _module in (operator, math):
    for _name in dir(_module):
        _obj = getattr(_module, _name)
        if callable(_obj) and not _name.startswith("_"):
            _BUILTIN_FUNCTIONS.add(_obj)
_KILN_SPECIAL = {kiln.no_grad, kiln.enable_grad, kiln.set_grad_enabled, kiln.Size}
_KILN_SPECIAL |= {kiln.compiler.is_compiling, kiln.compiler.is_dynamo_compiling}  # True while tracing
