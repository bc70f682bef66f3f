"""kiln.fx.experimental.symbolic_shapes: ShapeEnv and the guard helpers, as PyTorch's module of the
same name. The reasoning lives in C++ (fx/symbolic_shapes.h); this module gives it PyTorch's names.

    shape_env = ShapeEnv()
    x = shape_env._meta_tensor(kiln.empty(4, 6), "x")     # meta tensor of sizes (s0, s1)
    if x.size(0) > 2: ...                                 # records the guard `s0 > 2`
    shape_env.format_guards()                             # ' - s0 > 2'
"""

import collections
from contextlib import contextmanager

from kiln import _C
from kiln._symbolic import (  # noqa: F401  (re-exported, as PyTorch does)
    SymBool, SymFloat, SymInt, _SymNumber, _user_frame, sym_float, sym_int, sym_max, sym_min, sym_not,
)

__all__ = [
    "ShapeEnv", "GuardOnDataDependentSymNode", "ShapeGuard", "guard_int", "guard_bool", "guard_float",
    "has_free_symbols", "free_symbols", "statically_known_true", "is_concrete_int", "is_concrete_bool",
    "hint_int", "has_hint", "definitely_true", "definitely_false", "expect_true",
]


class GuardOnDataDependentSymNode(RuntimeError):
    """Branching on a value that depends on data (an unbacked symbol, e.g. from nonzero or item())
    that no kiln._check fact decides."""


ShapeGuard = collections.namedtuple("ShapeGuard", ["expr", "sloc"])


class ShapeEnv(_C._ShapeEnv):
    """The owner of shape symbols (s0, s1 backed by example values; u0, u1 unbacked), their value
    ranges and replacements, and the guards recorded when code branches on them."""

    def __init__(self, *, duck_shape=True, specialize_zero_one=True):
        super().__init__(duck_shape, specialize_zero_one)
        self._record_python_locations(True)  # guards remember the user's frame

    # --- state, under PyTorch's attribute names ---
    @property
    def guards(self):
        """The simplified guard set (Note [Guard simplification] in fx/symbolic_shapes.h)."""
        return [ShapeGuard(e, loc) for e, loc in self._guards()]

    @property
    def var_to_val(self):
        return self._var_to_val()

    @property
    def var_to_range(self):
        """symbol -> (lower, upper); None for an unbounded end."""
        return self._var_to_range()

    @property
    def replacements(self):
        return self._replacements()

    @property
    def var_to_sources(self):
        return self._var_to_sources()

    @property
    def size_like(self):
        return set(self._size_like())

    def format_guards(self, verbose=False):
        return "\n".join(" - " + g for g in self._format_guards(verbose))

    def get_guard_exprs(self):
        return [g.expr for g in self.guards]

    # --- symbolic contexts ---
    @contextmanager
    def _as_context(self):
        """Makes this ShapeEnv the thread's SymbolicContext (data-dependent ops on meta/fake tensors
        then mint unbacked symbols). FakeTensorMode(shape_env=...) enters this while active."""
        prev = self._set_as_symbolic_context()
        try:
            yield self
        finally:
            if prev is None:
                _C._clear_symbolic_context()
            else:
                prev._set_as_symbolic_context()

    def _enter_symbolic_context(self):
        """Enters _as_context() and returns the object whose __exit__(exc_type, exc, tb) leaves it
        (what FakeTensorMode.__enter__/__exit__ use)."""
        cm = self._as_context()
        cm.__enter__()
        return cm

    # --- guards on concrete arguments ---
    def bind_symbols(self, placeholders, args):
        """{symbol name: value} from matching symbolic sizes of `placeholders` (meta/fake tensors)
        with the concrete sizes of `args`. Raises ValueError when a constant size differs or a symbol
        gets two values."""
        values = {}

        def bind(sym, val, what):
            if isinstance(sym, SymInt):
                name = sym.node.symbol_name()
                if name is not None:
                    if values.setdefault(name, val) != val:
                        raise ValueError(f"{what}: symbol {name} is both {values[name]} and {val}")
                return
            if int(sym) != val:
                raise ValueError(f"{what}: expected {sym}, got {val}")

        for i, (p, a) in enumerate(zip(placeholders, args)):
            if not hasattr(p, "shape"):
                if isinstance(p, SymInt):
                    bind(p, int(a), f"argument {i}")
                continue
            if p.dim() != a.dim():
                raise ValueError(f"argument {i}: expected {p.dim()} dims, got {a.dim()}")
            for d, (ps, av) in enumerate(zip(p.shape, a.shape)):
                bind(ps, av, f"argument {i} size {d}")
        return values

    def evaluate_guards_for_args(self, placeholders, args, *, ignore_static=True):
        """Whether `args` (concrete tensors) satisfy the guards recorded for `placeholders`."""
        try:
            values = self.bind_symbols(placeholders, args)
        except ValueError:
            return False
        for name in self.var_to_val:
            if name not in values and name not in self.replacements:
                # a symbol that no placeholder size names (e.g. a stride): keep its example value
                values[name] = self.var_to_val[name]
        return self._evaluate_guards(values)

    def produce_guards(self, placeholders, sources=None):
        """The guards as Python expressions over the placeholders' sizes, e.g.
        ['x.size()[0] == y.size()[0]', 'x.size()[1] == 3', 'x.size()[0] > 2']."""
        if sources is None:
            sources = [f"L['arg{i}']" for i in range(len(placeholders))]
        first = {}
        out = []
        for p, src in zip(placeholders, sources):
            if not hasattr(p, "shape"):
                continue
            for d, s in enumerate(p.shape):
                text = f"{src}.size()[{d}]"
                name = s.node.symbol_name() if isinstance(s, SymInt) else None
                if name is not None:
                    if name in first:
                        out.append(f"{text} == {first[name]}")
                    else:
                        first[name] = text
                elif not isinstance(s, SymInt):
                    out.append(f"{text} == {s}")
        # printed from the guards' expression trees (fx::PythonStr), each symbol as its source and
        # a replaced one no size names as its replacement
        return out + self._python_guards(first)


# --- functions over SymInt / int ----------------------------------------------------------------


def guard_int(a):
    """int(a), guarding on its current value when symbolic."""
    return int(a)


def guard_bool(a):
    return bool(a)


def guard_float(a):
    return float(a)


def is_concrete_int(a):
    return isinstance(a, int) and not isinstance(a, bool)


def is_concrete_bool(a):
    return isinstance(a, bool)


def has_free_symbols(a):
    return isinstance(a, _SymNumber) and bool(a.node.free_symbols())


def free_symbols(a):
    """Names of the symbols `a` depends on (a set; empty for plain numbers)."""
    if isinstance(a, _SymNumber):
        return set(a.node.free_symbols())
    if isinstance(a, (list, tuple)):
        out = set()
        for x in a:
            out |= free_symbols(x)
        return out
    return set()


def statically_known_true(a):
    """True only when `a` is known to hold without adding a guard."""
    if isinstance(a, SymBool):
        return a.node.statically_known() is True
    return bool(a)


def definitely_true(a):
    return statically_known_true(a)


def definitely_false(a):
    if isinstance(a, SymBool):
        return a.node.statically_known() is False
    return not bool(a)


def expect_true(a, skip=0):
    """kiln._check(a) that returns True (PyTorch's expect_true)."""
    from kiln._symbolic import _check

    _check(a)
    return True


def has_hint(a):
    return not isinstance(a, _SymNumber) or a.node.has_hint()


def hint_int(a, fallback=None):
    """The example value of `a` without guarding (`fallback` for unbacked values)."""
    if not isinstance(a, _SymNumber):
        return int(a)
    h = a.node.hint()
    if h is None:
        if fallback is None:
            raise GuardOnDataDependentSymNode(f"hint_int: {a} has no hint (it depends on data)")
        return fallback
    return int(h)
