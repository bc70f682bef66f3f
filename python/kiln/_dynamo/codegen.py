"""The code that replaces a frame: Python source compiled to a code object with the frame's
signature and free variables.

For a frame captured whole it reads

    def forward(self, x):
        ___out = __compiled_fn_0(x, self._modules['fc']._parameters['weight'])
        return ___out[0]

and at a graph break it calls the compiled graph, runs the breaking call (or branch) in Python,
and hands the live locals and the value stack to a resume function (dynamo/resume.h):

        ___r = print(___out[0])
        return __resume_at_24_1(___out[1], None, (___r,))

Source is used for the replacement because everything in it is an ordinary call; only resume
functions, which continue in the middle of the original bytecode, are made by editing bytecode.
"""

import inspect
import itertools
import math
import re
import types
import weakref

_object_ids = itertools.count()
# Expressions whose value no later statement of the generated code changes: names (parameters are
# never rebound), literals, and the compiled graph's outputs.
_STABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|-?[0-9.e+-]+|'[^'\\]*'|___out\[[0-9]+\]")


class FrameCodegen:
    def __init__(self, code, f_globals, output_index):
        self.code, self.f_globals, self.output_index = code, f_globals, output_index
        self.local_names = set(code.co_varnames) | set(code.co_freevars) | set(code.co_cellvars)
        self.lines = []
        self._temps, self._keep = {}, []
        self._held = itertools.count()

    # --- expressions -----------------------------------------------------------------------
    def constant(self, value):
        if value is None or isinstance(value, (bool, int, str, bytes)) or value is Ellipsis:
            return repr(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        if isinstance(value, tuple) and all(_is_literal(v) for v in value):
            return repr(value)
        return self.object_expr(value)

    def object_expr(self, obj):
        """A global name bound to `obj` in the frame's globals."""
        name = f"___kiln_obj_{next(_object_ids)}"
        install_global(self.f_globals, self.code, name, obj)
        return name

    def materialize(self, var, build):
        """A temporary holding the value `build()` makes, emitted once per tracker, so a mutable
        value reached twice (a list and its bound `append`) stays one object."""
        name = self._temps.get(id(var))
        if name is None:
            text = build(self)
            name = f"___tmp_{len(self._temps)}"
            self.emit(f"{name} = {text}")
            self._temps[id(var)] = name
            self._keep.append(var)
        return name

    def hold(self, expr):
        """`expr` evaluated at this point of the code: a temporary holding it, unless it is a
        plain name or literal (which later lines cannot change)."""
        if _STABLE.fullmatch(expr):
            return expr
        name = f"___held_{next(self._held)}"
        self.emit(f"{name} = {expr}")
        return name

    def global_expr(self, name):
        return name if name not in self.local_names else f"globals()[{name!r}]"

    def graph_value(self, var):
        i = self.output_index.get(var.node)
        if i is not None:
            return f"___out[{i}]"
        if var.source is not None:
            return var.source.expr(self)
        raise AssertionError(f"graph value {var.node} is neither an output nor an input")

    # --- the function ------------------------------------------------------------------------
    def emit(self, line):
        self.lines.append(line)

    def build(self):
        """The replacement code object: same signature, name, file and free variables."""
        code = self.code
        free = code.co_freevars
        out = ["def ___kiln_outer():"]
        for name in free:
            out.append(f"    {name} = None")
        out.append(f"    def ___kiln_fn({signature(code)}):")
        out.extend("        " + line for line in self.lines)
        if free:  # unreachable: it only makes the free variables free in ___kiln_fn, in order
            out.append(f"        ({', '.join(free)},)")
        out.append("    return ___kiln_fn")
        source = "\n".join(out) + "\n"
        namespace = {}
        exec(compile(source, code.co_filename, "exec"), self.f_globals | {"__builtins__": __builtins__}, namespace)
        fn_code = namespace["___kiln_outer"]().__code__
        if fn_code.co_freevars != free:
            raise AssertionError(f"generated code has free variables {fn_code.co_freevars}, expected {free}")
        return fn_code.replace(co_name=code.co_name, co_qualname=code.co_qualname,
                               co_firstlineno=code.co_firstlineno), source


# Note [Globals of generated code]: the replacement code reads what it needs (the compiled graph,
# resume functions, objects it cannot spell as literals) from the frame's module globals by name.
# Those entries belong to the code object that was translated: when it dies (its function was
# released), they are removed, or every compiled function would keep its graphs, compiled kernels
# and example tensors alive for the life of the module (~116 KB each, issue 16).
_owned_globals = weakref.WeakKeyDictionary()  # translated code -> names it installed


def install_global(f_globals, owner_code, name, value):
    """f_globals[name] = value, removed when `owner_code` is garbage (Note [Globals of generated code])."""
    f_globals[name] = value
    names = _owned_globals.get(owner_code)
    if names is None:
        names = _owned_globals[owner_code] = []
        weakref.finalize(owner_code, _drop_globals, f_globals, names).atexit = False
    names.append(name)


def _drop_globals(f_globals, names):
    for name in names:
        f_globals.pop(name, None)


def _is_literal(v):
    return v is None or isinstance(v, (bool, int, str, bytes)) or (isinstance(v, float) and math.isfinite(v))


def signature(code):
    """The parameter list of `code` (no defaults: the frame hook passes every argument)."""
    names = code.co_varnames
    argc, posonly, kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    parts = list(names[:posonly])
    if posonly:
        parts.append("/")
    parts.extend(names[posonly:argc])
    index = argc + kwonly
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[index])
        index += 1
    elif kwonly:
        parts.append("*")
    parts.extend(names[argc:argc + kwonly])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[index])
    return ", ".join(parts)


def make_function(code, f_globals, closure):
    """A resume function over `code` with the caller's cells (used by generated code)."""
    return types.FunctionType(code, f_globals, code.co_name, None, closure)
