"""kiln.SymInt, kiln.SymFloat, kiln.SymBool: Python numbers backed by a ShapeEnv expression node
(kiln._C._SymNode, fx/symbolic_shapes.h), as PyTorch's torch.SymInt/SymFloat/SymBool.

Arithmetic builds expressions (`s0 * 2` -> `2*s0`) and never guards; turning one into a Python
value (`bool()`, `int()`, `float()`, `__index__`, `if`) asks the ShapeEnv, which records a guard
(or raises GuardOnDataDependentSymNode for unbacked values). Results that simplify to a constant
come back as plain Python numbers.
"""

import builtins
import os
import sys

_KILN_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_frame():
    """'file:line in function' of the innermost frame outside the kiln package (the guard's culprit)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_KILN_DIR):
        f = f.f_back
    if f is None:
        return ""
    return f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"


def _result(node):
    if node.is_bool():
        v = node.maybe_as_bool()
        return SymBool(node) if v is None else v
    if node.is_float():
        v = node.maybe_as_float()
        return SymFloat(node) if v is None else v
    v = node.maybe_as_int()
    return SymInt(node) if v is None else v


def _node(like, other):
    """`other` as a node of `like`'s ShapeEnv, or None when it is not a number."""
    if isinstance(other, (SymInt, SymFloat, SymBool)):
        return other.node
    if isinstance(other, builtins.bool):
        return like.wrap_bool(other)
    if isinstance(other, builtins.int):
        return like.wrap_int(other)
    if isinstance(other, builtins.float):
        return like.wrap_float(other)
    return None


def _binary(method, reflected=False):
    def op(self, other):
        o = _node(self.node, other)
        if o is None:
            return NotImplemented
        a, b = (o, self.node) if reflected else (self.node, o)
        return _result(getattr(a, method)(b))

    return op


class _SymNumber:
    __slots__ = ("node",)

    def __init__(self, node):
        self.node = node

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __floordiv__, __rfloordiv__ = _binary("floordiv"), _binary("floordiv", True)
    __mod__, __rmod__ = _binary("mod"), _binary("mod", True)
    __truediv__, __rtruediv__ = _binary("truediv"), _binary("truediv", True)
    __eq__, __ne__ = _binary("eq"), _binary("ne")
    __lt__, __le__ = _binary("lt"), _binary("le")
    __gt__, __ge__ = _binary("gt"), _binary("ge")

    def __neg__(self):
        return _result(self.node.neg())

    def __pos__(self):
        return self

    def __abs__(self):
        return sym_max(self, -self)

    def __pow__(self, n):
        if isinstance(n, builtins.int) and not isinstance(n, builtins.bool) and n >= 0:
            return _result(self.node.pow(n))
        return NotImplemented

    def __repr__(self):
        return self.node.str()

    __str__ = __repr__

    def __hash__(self):
        raise TypeError(f"unhashable type: non-nested {type(self).__name__}")

    # Symbolic values are immutable: copies share the node (deepcopy of graphs holding them).
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __bool__(self):
        return self.node.guard_bool("", 0) if self.node.is_bool() else bool(self != 0)

    def __float__(self):
        return self.node.guard_float("", 0)

    def __int__(self):
        return self.node.guard_int("", 0) if not self.node.is_float() else builtins.int(self.node.guard_float("", 0))

    # PyTorch's spellings of the node's state.
    @property
    def shape_env(self):
        return self.node.shape_env

    def __sym_repr__(self):
        return self.node.str()


class SymInt(_SymNumber):
    """A symbolic integer (a size, or an unbacked value from item()/nonzero)."""

    __slots__ = ()

    def __index__(self):
        return self.node.guard_int("", 0)

    def __float__(self):
        return builtins.float(self.node.guard_int("", 0))

    def __round__(self, ndigits=None):
        return self

    def __trunc__(self):
        return self

    def __sym_float__(self):
        return _result(self.node.sym_float())


class SymFloat(_SymNumber):
    """A symbolic float (item() of a floating tensor under a ShapeEnv, or int arithmetic with /)."""

    __slots__ = ()

    def __trunc__(self):
        return _result(self.node.sym_int())

    def __sym_int__(self):
        return _result(self.node.sym_int())

    def is_integer(self):
        return bool(_result(self.node.sym_int().sym_float().eq(self.node)))


class SymBool(_SymNumber):
    """A symbolic bool (a comparison of symbolic values); branching on it records a guard."""

    __slots__ = ()

    def __bool__(self):
        return self.node.guard_bool("", 0)

    def __int__(self):
        return builtins.int(self.node.guard_bool("", 0))

    def __and__(self, other):
        o = _node(self.node, other)
        return NotImplemented if o is None else _result(self.node.sym_and(o))

    __rand__ = __and__

    def __or__(self, other):
        o = _node(self.node, other)
        return NotImplemented if o is None else _result(self.node.sym_or(o))

    __ror__ = __or__

    def __invert__(self):
        return _result(self.node.sym_not())

    def __sym_not__(self):
        return _result(self.node.sym_not())


# --- functions (kiln.sym_int, kiln.sym_max, kiln._check, ...) ---------------------------------


def sym_not(a):
    if isinstance(a, SymBool):
        return a.__sym_not__()
    return not a


def sym_float(a):
    if isinstance(a, SymFloat):
        return a
    if isinstance(a, SymInt):
        return a.__sym_float__()
    return builtins.float(a)


def sym_int(a):
    if isinstance(a, SymInt):
        return a
    if isinstance(a, SymFloat):
        return a.__sym_int__()
    return builtins.int(a)


def _sym_minmax(method, builtin, a, b):
    for x, y in ((a, b), (b, a)):
        if isinstance(x, _SymNumber):
            o = _node(x.node, y)
            if o is None:
                raise TypeError(f"sym_{method[4:]}: unsupported operand {type(y).__name__}")
            return _result(getattr(x.node, method)(o))
    return builtin(a, b)


def sym_max(a, b):
    """max(a, b) without guarding (a Max expression for symbolic values)."""
    return _sym_minmax("sym_max", builtins.max, a, b)


def sym_min(a, b):
    """min(a, b) without guarding (a Min expression for symbolic values)."""
    return _sym_minmax("sym_min", builtins.min, a, b)


def _check(cond, message=None):
    """Asserts `cond`. On a SymBool over unbacked values it becomes a fact the ShapeEnv assumes from
    then on (kiln._check(u0 > 0) lets `u0 == 0` be decided); on backed ones it guards."""
    text = message() if callable(message) else (message or "")
    if isinstance(cond, SymBool):
        cond.node.check(_user_frame(), text)
        return
    if not isinstance(cond, (builtins.bool, builtins.int)) and not hasattr(cond, "__bool__"):
        raise TypeError(f"cond must be a bool, but got {type(cond)}")
    if not cond:
        raise RuntimeError(text or "Expected cond to be True, but got False.")


def _check_is_size(i, message=None, *, max=None):
    """Asserts `i` is a valid size (>= 0) and marks an unbacked symbol as size-like."""
    if isinstance(i, SymInt):
        i.node.check_is_size(_user_frame())
    else:
        _check(i >= 0, message)
    if max is not None:
        _check(i <= max, message)
