"""User functions: called by inlining their bytecode into the graph being built.

UserFunctionVariable wraps a Python function object from the frame (guarded by identity);
NestedUserFunctionVariable is a function made during capture by MAKE_FUNCTION (a lambda, a
closure, a comprehension body on 3.11) whose defaults and cells are trackers themselves.
bind_arguments maps a call's trackers onto the code's parameters as CPython would.
"""

import inspect
import types

from kiln._dynamo.exc import unimplemented
from kiln._dynamo.variables.base import ConstantVariable, VariableTracker


class BaseUserFunctionVariable(VariableTracker):
    def get_code(self):
        raise NotImplementedError

    def get_globals(self):
        raise NotImplementedError

    def call_function(self, tx, args, kwargs):
        return tx.inline_user_function_return(self, list(args), dict(kwargs))

    def python_type(self):
        return types.FunctionType


class UserFunctionVariable(BaseUserFunctionVariable):
    def __init__(self, fn, source=None):
        self.fn, self.source = fn, source

    def get_code(self):
        return self.fn.__code__

    def get_globals(self):
        return self.fn.__globals__

    def as_python_constant(self):
        return self.fn

    def describe(self):
        return f"function {self.fn.__qualname__}"

    def defaults(self, tx):
        from kiln._dynamo.variables.builder import wrap_const_or_object

        d = self.fn.__defaults__ or ()
        kwd = self.fn.__kwdefaults__ or {}
        return [wrap_const_or_object(tx, v) for v in d], {k: wrap_const_or_object(tx, v) for k, v in kwd.items()}

    def closure_cells(self, tx):
        """{free variable name: tracker of the cell's contents}."""
        from kiln._dynamo.source import AttrSource, GetItemSource
        from kiln._dynamo.variables.builder import wrap

        code = self.fn.__code__
        out = {}
        for i, (name, cell) in enumerate(zip(code.co_freevars, self.fn.__closure__ or ())):
            try:
                value = cell.cell_contents
            except ValueError:
                unimplemented(f"closure variable {name!r} of {self.fn.__qualname__} is unbound")
            source = None
            if self.source is not None:
                source = AttrSource(GetItemSource(AttrSource(self.source, "__closure__"), i), "cell_contents")
            out[name] = CellVariable(wrap(tx, value, source))
        return out

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.fn, name))
        return super().var_getattr(tx, name)


class NestedUserFunctionVariable(BaseUserFunctionVariable):
    def __init__(self, code, f_globals, name, defaults, kwdefaults, closure):
        self.code, self.f_globals, self.name = code, f_globals, name
        self._defaults, self._kwdefaults = defaults or [], kwdefaults or {}
        self.closure = closure or {}  # free name -> CellVariable

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.f_globals

    def defaults(self, tx):
        return list(self._defaults), dict(self._kwdefaults)

    def closure_cells(self, tx):
        return dict(self.closure)

    def describe(self):
        return f"nested function {self.name}"

    def reconstruct(self, codegen):
        unimplemented(f"a function made inside the compiled region ({self.name}) cannot cross a graph break",
                      "define the function outside the compiled function")


class UserMethodVariable(VariableTracker):
    """obj.method for a Python-level method: calls inline the function with obj first."""

    def __init__(self, fn, obj, source=None):
        self.fn, self.obj, self.source = fn, obj, source

    def python_type(self):
        return types.MethodType

    def call_function(self, tx, args, kwargs):
        return UserFunctionVariable(self.fn).call_function(tx, [self.obj] + list(args), kwargs)

    def reconstruct(self, codegen):
        # fn bound to obj, not `obj.<name>`: for super().__init__ that name finds the subclass's
        # __init__ (a wrong call, or endless recursion)
        return f"{codegen.constant(types.MethodType)}({codegen.constant(self.fn)}, {self.obj.reconstruct(codegen)})"

    def describe(self):
        return f"method {self.fn.__qualname__}"


class CellVariable(VariableTracker):
    """A closure cell: a mutable box around a tracker (cell_contents)."""

    mutable = True

    def __init__(self, contents=None):
        self.contents = contents

    def python_type(self):
        return types.CellType


def bind_arguments(tx, fn_var, args, kwargs):
    """{parameter name: tracker} for calling fn_var's code with args/kwargs (TypeError as Python)."""
    code = fn_var.get_code()
    defaults, kwdefaults = fn_var.defaults(tx)
    nargs, nposonly, nkwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional = names[:nargs]
    kwonly = names[nargs:nargs + nkwonly]
    index = nargs + nkwonly
    varargs = names[index] if code.co_flags & inspect.CO_VARARGS else None
    if varargs:
        index += 1
    varkw = names[index] if code.co_flags & inspect.CO_VARKEYWORDS else None
    from kiln._dynamo.variables.dicts import ConstDictVariable
    from kiln._dynamo.variables.lists import TupleVariable

    bound = {}
    fname = getattr(fn_var, "name", None) or code.co_name
    for name, value in zip(positional, args):
        bound[name] = value
    extra = args[nargs:]
    if extra:
        if not varargs:
            unimplemented(f"{fname}() takes {nargs} positional arguments but {len(args)} were given")
    if varargs:
        bound[varargs] = TupleVariable(extra)
    rest = {}
    for key, value in kwargs.items():
        if key in positional[nposonly:] or key in kwonly:
            if key in bound:
                unimplemented(f"{fname}() got multiple values for argument {key!r}")
            bound[key] = value
        elif varkw:
            rest[key] = value
        else:
            unimplemented(f"{fname}() got an unexpected keyword argument {key!r}")
    if varkw:
        bound[varkw] = ConstDictVariable(rest)
    first_default = nargs - len(defaults)
    for i, name in enumerate(positional):
        if name not in bound:
            if i >= first_default:
                bound[name] = defaults[i - first_default]
            else:
                unimplemented(f"{fname}() missing required argument {name!r}")
    for name in kwonly:
        if name not in bound:
            if name in kwdefaults:
                bound[name] = kwdefaults[name]
            else:
                unimplemented(f"{fname}() missing required keyword-only argument {name!r}")
    return bound
