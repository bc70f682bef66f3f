"""Symbolic shapes: ShapeEnv symbols (duck sizing, 0/1 specialisation), SymInt arithmetic and
printing, guards recorded by Python and C++ branches, guard simplification and replacements,
unbacked symbols with kiln._check, and meta tensors with symbolic sizes through many ops, checked
against the same ops run eagerly at the example sizes."""

import sys

import pytest

import kiln
import kiln.nn.functional as F
from conftest import requires_torch
from kiln.fx.experimental.symbolic_shapes import (
    GuardOnDataDependentSymNode, ShapeEnv, free_symbols, guard_int, has_free_symbols, hint_int, is_concrete_int,
    statically_known_true,
)


def sym_tensor(env, *sizes, dtype=kiln.float32, source=""):
    return env._meta_tensor(kiln.empty(*sizes, dtype=dtype), source)


def guard_strs(env):
    return [g.expr for g in env.guards]


def hint_shape(t):
    return tuple(hint_int(s) for s in t.shape)


# --- symbols ---------------------------------------------------------------------------------


def test_duck_sizing_and_zero_one_specialisation():
    env = ShapeEnv()
    x = sym_tensor(env, 5, 1, 5, 3)
    assert str(x.shape) == "kiln.Size([s0, 1, s0, s1])"
    assert isinstance(x.shape[0], kiln.SymInt) and x.shape[1] == 1 and type(x.shape[1]) is int
    assert x.shape[0] is not x.shape[2] and str(x.shape[2]) == "s0"
    assert [str(s) for s in x.stride()] == ["s0*s1", "s0*s1", "s1", "1"]
    assert x.dim() == 4 and type(x.dim()) is int
    assert str(x.numel()) == "s0**2*s1"
    assert env.var_to_val == {"s0": 5, "s1": 3}
    assert env.var_to_range["s0"] == (2, None)
    y = sym_tensor(env, 3, 0)
    assert str(y.shape) == "kiln.Size([s1, 0])"
    assert env.guards == []

    nd = ShapeEnv(duck_shape=False)
    z = sym_tensor(nd, 4, 4)
    assert str(z.shape) == "kiln.Size([s0, s1])"


def test_create_symbolic_sizes_strides_storage_offset():
    env = ShapeEnv()
    base = kiln.empty(4, 6).t()
    sizes, strides, offset = env.create_symbolic_sizes_strides_storage_offset(base)
    assert [str(s) for s in sizes] == ["s0", "s1"]
    assert [str(s) for s in strides] == ["1", "s0"]
    assert offset == 0
    assert str(env.create_symbol(7)) == "s2" and env.create_symbol(1) == 1 and str(env.create_symbol(6)) == "s0"


def test_arithmetic_builds_canonical_expressions_without_guards():
    env = ShapeEnv()
    x = sym_tensor(env, 6, 4)
    a, b = x.shape
    assert str(a * 2) == "2*s0" and str(2 * a) == "2*s0"
    assert str(a + b) == "s0 + s1" and str(b + a) == "s0 + s1"
    assert str(a + 0) == "s0" and str(a * 1) == "s0"
    assert a - a == 0 and type(a - a) is int
    assert str((a * 2) // 2) == "s0"
    assert str(a // 2) == "(s0//2)"
    assert str(a % 4) == "Mod(s0, 4)"
    assert str((4 * a) % 4) == "0"
    assert str(3 - a) == "3 - s0"
    assert str(b - a) == "-s0 + s1"
    assert str(-a) == "-s0"
    assert str(a * b + a) == "s0*s1 + s0"
    assert str(a * a) == "s0**2"
    assert str(10 // a) == "(10//s0)"
    assert str(a // 2 + b + 1) == "s1 + ((s0//2)) + 1"
    assert str(kiln.sym_max(a, 1)) == "s0"  # s0 >= 2 decides it
    assert str(kiln.sym_min(a, 3)) == "Min(3, s0)"
    assert kiln.sym_max(2, 3) == 3
    assert isinstance(a / 4, kiln.SymFloat)
    assert isinstance(a > 2, kiln.SymBool) and str(a > 2) == "s0 > 2"
    assert str(a == b) == "Eq(s0, s1)"
    assert bool(a != 1) and statically_known_true(a != 1)  # the range decides: no guard
    assert env.guards == []
    with pytest.raises(TypeError):
        hash(a)
    import copy

    assert copy.deepcopy([a, b])[0] is a


def test_expressions_are_typed_trees():
    """node.sym_expr is the expression itself (fx/sym_expr.h), not its text: what make_fx's size
    nodes are built from."""
    env = ShapeEnv()
    a, b = sym_tensor(env, 6, 4).shape
    K = kiln._C._SymExprKind
    e = (a // 2 + b * a + 1).node.sym_expr
    assert e.kind == K.Add and str(e) == str(a // 2 + b * a + 1)
    kinds = sorted(str(t.kind) for t in e.args)
    assert kinds == ["_SymExprKind.FloorDiv", "_SymExprKind.Integer", "_SymExprKind.Mul"]
    mul = next(t for t in e.args if t.kind == K.Mul)
    assert sorted(t.name for t in mul.args) == ["s0", "s1"] and all(t.kind == K.Symbol for t in mul.args)
    assert next(t for t in e.args if t.kind == K.Integer).value == 1
    square = (a * a).node.sym_expr
    assert square.kind == K.Pow and square.value == 2 and square.args[0].name == "s0"
    assert kiln.sym_min(a, 3).node.sym_expr.kind == K.Min
    assert (a % 4).node.sym_expr.kind == K.Mod
    assert (a + 1).node.sym_expr == (1 + a).node.sym_expr  # hash-consed: equal trees are one node
    assert len({(a + 1).node.sym_expr, (1 + a).node.sym_expr, a.node.sym_expr}) == 2


# --- guards ----------------------------------------------------------------------------------


def test_python_branch_records_guard_with_location():
    env = ShapeEnv()
    x = sym_tensor(env, 5, 3)
    line = sys._getframe().f_lineno + 1
    taken = x.size()[0] > 2
    assert taken is not True  # still symbolic
    assert bool(taken)
    assert guard_strs(env) == ["s0 > 2"]
    assert env.format_guards() == " - s0 > 2"
    assert f"test_symbolic_shapes.py:{line + 2}" in env.guards[0].sloc
    # A branch decided by the ranges adds nothing.
    assert x.size(0) >= 2 and x.size(0) != 0
    assert guard_strs(env) == ["s0 > 2"]
    if x.shape[1] < x.shape[0]:
        pass
    assert guard_strs(env) == ["s0 > 2", "s1 < s0"]


def test_guard_simplification_and_dedupe():
    env = ShapeEnv()
    a = sym_tensor(env, 10).shape[0]
    assert bool(a > 2) and bool(a > 4) and bool(a > 3) and bool(a < 100)
    assert bool(a % 5 == 0) and bool(a % 5 == 0)
    assert guard_strs(env) == ["s0 > 4", "s0 < 100", "Eq(Mod(s0, 5), 0)"]
    assert len(env._raw_guards()) == 4  # a > 3 was implied when asked


def test_eq_guard_specialises_and_unifies():
    env = ShapeEnv()
    x = sym_tensor(env, 5, 3)
    a, b = x.shape
    total = a + b
    assert bool(a > 2)
    assert bool(a == 5)
    assert env.replacements == {"s0": "5"}
    assert str(x.shape) == "kiln.Size([5, s1])"
    assert str(total) == "s1 + 5"
    assert guard_strs(env) == ["Eq(s0, 5)"]
    assert guard_int(b) == 3 and guard_strs(env) == ["Eq(s0, 5)", "Eq(s1, 3)"]

    nd = ShapeEnv(duck_shape=False)
    p, q = sym_tensor(nd, 4, 4).shape
    assert bool(p == q)
    assert str(q) == "s0" and nd.replacements == {"s1": "s0"}
    assert guard_strs(nd) == ["Eq(s0, s1)"]


def test_int_conversions_guard():
    env = ShapeEnv()
    a = sym_tensor(env, 6).shape[0]
    assert int(a) == 6 and guard_strs(env) == ["Eq(s0, 6)"]
    env2 = ShapeEnv()
    b = sym_tensor(env2, 6).shape[0]
    assert [0, 1, 2, 3, 4, 5, 6][b] == 6  # __index__
    assert guard_strs(env2) == ["Eq(s0, 6)"]
    assert statically_known_true(sym_tensor(ShapeEnv(), 3).shape[0] >= 2)


def test_view_guards_divisibility_and_accepts_symint_sizes():
    env = ShapeEnv()
    x = sym_tensor(env, 6, 4)
    y = x.view(-1, 8)
    assert str(y.shape) == "kiln.Size([((s0*s1)//8), 8])"
    assert guard_strs(env) == ["Eq(Mod(s0*s1, 8), 0)"]
    z = x.view(x.shape[0] * 2, -1)
    assert str(z.shape) == "kiln.Size([2*s0, (s1//2)])"
    assert hint_shape(z) == (12, 2)
    w = x.reshape(x.shape[1], x.shape[0])
    assert str(w.shape) == "kiln.Size([s1, s0])"
    e = kiln.empty((x.shape[0], 3), device="meta")
    assert str(e.shape) == "kiln.Size([s0, 3])"
    f = kiln.zeros(x.shape, device="meta")
    assert str(f.shape) == "kiln.Size([s0, s1])"
    with pytest.raises(RuntimeError, match="is invalid for input of size"):
        x.view(5, -1)  # Mod(s0*s1, 5) is 4 at the hint: a guard that it is not 0, then the error


def test_evaluate_guards_for_args_and_produce_guards():
    env = ShapeEnv()
    x = sym_tensor(env, 5, 5)
    y = sym_tensor(env, 3)
    assert bool(x.shape[0] > y.shape[0])
    assert guard_strs(env) == ["s0 > s1"]
    assert env.evaluate_guards_for_args([x, y], [kiln.empty(7, 7), kiln.empty(2)])
    assert not env.evaluate_guards_for_args([x, y], [kiln.empty(2, 2), kiln.empty(3)])  # 2 < 3 fails
    assert not env.evaluate_guards_for_args([x, y], [kiln.empty(7, 6), kiln.empty(2)])  # duck-shared dims differ
    assert env.produce_guards([x, y], ["x", "y"]) == ["x.size()[1] == x.size()[0]", "x.size()[0] > y.size()[0]"]


# --- unbacked symbols --------------------------------------------------------------------------


def test_nonzero_mints_unbacked_symbol_and_check_decides():
    env = ShapeEnv()
    m = kiln.empty(3, 4, dtype=kiln.bool, device="meta")
    with env._as_context():
        n = m.nonzero()
    assert str(n.shape) == "kiln.Size([u0, 2])"
    u = n.shape[0]
    assert env.var_to_range["u0"] == (0, 12)
    assert "u0" in env.size_like
    assert bool(u >= 0)  # the range decides
    with pytest.raises(GuardOnDataDependentSymNode) as info:
        bool(u == 1)
    assert isinstance(info.value, RuntimeError)
    assert str(info.value).startswith("Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))")
    assert "kiln._check" in str(info.value)
    kiln._check(u > 1)
    assert not bool(u == 1) and bool(u >= 2)
    assert env.guards == []
    assert has_free_symbols(u) and free_symbols(n.shape) == {"u0"}
    assert not has_free_symbols(3)


def test_item_mints_unbacked_values():
    env = ShapeEnv()
    with env._as_context():
        v = kiln.empty((), dtype=kiln.int64, device="meta").item()
        f = kiln.empty((), device="meta").item()
        n2 = kiln.empty(5, device="meta").masked_select(kiln.empty(5, dtype=kiln.bool, device="meta"))
    assert isinstance(v, kiln.SymInt) and str(v) == "u0"
    assert isinstance(f, kiln.SymFloat) and str(f) == "zuf0"
    assert str(n2.shape) == "kiln.Size([u1])"
    ctx = env._enter_symbolic_context()  # the form FakeTensorMode uses
    assert str(kiln.empty(2, dtype=kiln.bool, device="meta").nonzero().shape) == "kiln.Size([u2, 1])"
    ctx.__exit__(None, None, None)
    with pytest.raises(NotImplementedError):
        kiln.empty(2, dtype=kiln.bool, device="meta").nonzero()  # the context is gone again
    with pytest.raises(GuardOnDataDependentSymNode, match="Could not extract specialized integer"):
        int(v)
    with pytest.raises(GuardOnDataDependentSymNode):
        bool(v % 4 == 0)
    kiln._check(v % 4 == 0)
    assert bool(v % 4 == 0)
    kiln._check_is_size(v)
    assert "u0" in env.size_like and env.var_to_range["u0"][0] == 0
    kiln._check(v == 8)
    assert v.node.maybe_as_int() == 8
    with pytest.raises(RuntimeError, match="Expected cond to be True"):
        kiln._check(v > 8)
    with pytest.raises(RuntimeError, match="custom"):
        kiln._check(False, lambda: "custom message")


def test_data_dependent_ops_without_shape_env_raise():
    m = kiln.empty(3, dtype=kiln.bool, device="meta")
    with pytest.raises(NotImplementedError, match="aten::nonzero"):
        m.nonzero()
    with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
        kiln.empty((), device="meta").item()
    # Real tensors keep working (and item() stays a Python number).
    assert kiln.tensor([0, 2, 0, 3]).nonzero().tolist() == [[1], [3]]
    assert kiln.tensor(2.5).item() == 2.5


# --- meta tensors with symbolic sizes through ops ---------------------------------------------

CASES = [
    ("add_broadcast", [(4, 3), (3,)], lambda a, b: a + b),
    ("mul_scalar", [(4, 3)], lambda a: a * 2),
    ("matmul", [(4, 3), (3, 5)], lambda a, b: a @ b),
    ("bmm", [(2, 4, 3), (2, 3, 5)], lambda a, b: kiln.bmm(a, b)),
    ("linear", [(4, 3), (5, 3)], lambda a, w: F.linear(a, w)),
    ("cat0", [(4, 3), (5, 3)], lambda a, b: kiln.cat([a, b], 0)),
    ("cat1", [(4, 3), (4, 5)], lambda a, b: kiln.cat([a, b], 1)),
    ("stack", [(4, 3), (4, 3)], lambda a, b: kiln.stack([a, b], 1)),
    ("sum_dim", [(4, 3)], lambda a: a.sum(1)),
    ("sum_keepdim", [(4, 3, 5)], lambda a: a.sum(1, keepdim=True)),
    ("mean_all", [(4, 3)], lambda a: a.mean()),
    ("amax", [(4, 3)], lambda a: a.amax(0)),
    ("softmax", [(4, 3)], lambda a: a.softmax(-1)),
    ("view_flatten", [(4, 3)], lambda a: a.view(-1)),
    ("reshape", [(4, 6)], lambda a: a.reshape(2, -1)),
    ("flatten", [(2, 4, 3)], lambda a: a.flatten(1)),
    ("transpose_contiguous", [(4, 3)], lambda a: a.t().contiguous()),
    ("permute", [(2, 4, 3)], lambda a: a.permute(2, 0, 1)),
    ("unsqueeze_expand", [(4, 3)], lambda a: a.unsqueeze(0).expand(2, -1, -1)),
    ("squeeze", [(4, 1, 3)], lambda a: a.squeeze(1)),
    ("slice", [(6, 3)], lambda a: a[1:3]),
    ("select", [(6, 3)], lambda a: a[:, 0]),
    ("where", [(4, 3), (4, 3)], lambda a, b: kiln.where(a > b, a, b)),
    ("relu_sigmoid", [(4, 3)], lambda a: kiln.sigmoid(kiln.relu(a))),
    ("chunk", [(6, 3)], lambda a: a.chunk(2)[1]),
    ("split", [(7, 3)], lambda a: a.split(3)[2]),
    ("view_doubled", [(5, 2)], lambda a: a.view(a.shape[0] * 2)),
    ("new_empty_from_shape", [(5, 2)], lambda a: kiln.empty(a.shape[0], a.shape[1] + 1, device=a.device)),
    ("diagonal", [(4, 3)], lambda a: a.diagonal()),
    ("diagonal_tall", [(5, 1)], lambda a: a.t().diagonal()),
    ("diagonal_offset", [(4, 6)], lambda a: a.diagonal(2)),
    ("diagonal_negative_offset_dims", [(2, 5, 3)], lambda a: a.diagonal(-1, 2, 1)),
    ("diagonal_past_the_end", [(4, 3)], lambda a: a.diagonal(7)),
]


@pytest.mark.parametrize("name,shapes,fn", CASES, ids=[c[0] for c in CASES])
def test_symbolic_meta_ops_match_eager_at_the_hint(name, shapes, fn):
    env = ShapeEnv()
    sym_inputs = [sym_tensor(env, *s) for s in shapes]
    real_inputs = [kiln.randn(*s) for s in shapes]
    out = fn(*sym_inputs)
    expected = fn(*real_inputs)
    assert out.device.type == "meta"
    assert hint_shape(out) == tuple(expected.shape)
    assert tuple(hint_int(s) for s in out.stride()) == tuple(expected.stride())
    assert out.dtype == expected.dtype
    assert all(is_concrete_int(s) or isinstance(s, kiln.SymInt) for s in out.shape)
    # The guards recorded hold at the example sizes.
    assert env.evaluate_guards_for_args(sym_inputs, real_inputs)


def test_symbolic_matmul_shape_mismatch_guards_or_raises():
    env = ShapeEnv()
    a, b = sym_tensor(env, 4, 3), sym_tensor(env, 5, 2)
    with pytest.raises(RuntimeError):
        a @ b


def test_unbacked_sizes_flow_through_ops():
    env = ShapeEnv()
    m = kiln.empty(3, 4, dtype=kiln.bool, device="meta")
    with env._as_context():
        n = m.nonzero()
    assert str((n * 2).shape) == "kiln.Size([u0, 2])"
    assert str(kiln.cat([n, n]).shape) == "kiln.Size([2*u0, 2])"
    assert str(n.sum(0).shape) == "kiln.Size([2])"
    assert str(n.t().shape) == "kiln.Size([2, u0])"
    assert env.guards == []


def test_symfloat_and_symbool_arithmetic():
    env = ShapeEnv()
    a, b = sym_tensor(env, 6, 4).shape
    f = a / 4
    assert isinstance(f, kiln.SymFloat)
    assert isinstance(f * 2.0, kiln.SymFloat) and isinstance(1.5 + f, kiln.SymFloat)
    assert float(f) == 1.5
    c = (a > 2) & (b > 2)
    assert isinstance(c, kiln.SymBool) and bool(c)
    assert isinstance(~(a > 2), kiln.SymBool) and str(~(a > 2)) == "s0 <= 2"
    assert kiln.sym_not(True) is False
    assert kiln.sym_int(3.7) == 3 and kiln.sym_float(a) is not None
    assert str(kiln.sym_float(a)) == "ToFloat(s0)"
    assert abs(-a) is not None and str(abs(-a)) == "s0"


def test_guard_error_type_and_meta_repr():
    from kiln.fx.experimental import symbolic_shapes

    assert issubclass(symbolic_shapes.GuardOnDataDependentSymNode, RuntimeError)
    env = ShapeEnv()
    x = sym_tensor(env, 5, 3)
    assert repr(x) == "tensor(..., device='meta', size=(s0, s1))"
    assert "s0" in env.var_to_val and len(x) == 5
    assert guard_strs(env) == ["Eq(s0, 5)"]  # len() needs an int


def test_view_guard_location_names_the_user_line():
    env = ShapeEnv()
    x = sym_tensor(env, 6, 4)
    line = sys._getframe().f_lineno + 1
    x.view(-1, 8)
    assert f"test_symbolic_shapes.py:{line}" in env.guards[0].sloc
    assert "# " in env.format_guards(verbose=True)


# --- printing against sympy (PyTorch's printer) -----------------------------------------------

PRINT_CASES = [
    lambda a, b, ops: a * 2,
    lambda a, b, ops: a + b,
    lambda a, b, ops: 2 * a + 1,
    lambda a, b, ops: 3 - a,
    lambda a, b, ops: a - 3,
    lambda a, b, ops: b - a,
    lambda a, b, ops: a * b + a,
    lambda a, b, ops: a * a + a,
    lambda a, b, ops: -a,
    lambda a, b, ops: 2 * a * b - 4,
    lambda a, b, ops: 5 - 2 * a,
    lambda a, b, ops: a * a * b,
    lambda a, b, ops: ops.floordiv(a, 2),
    lambda a, b, ops: ops.mod(a, 4),
    lambda a, b, ops: ops.eq(ops.mod(a, 4), 0),
    lambda a, b, ops: a > 2,
    lambda a, b, ops: a <= b,
    lambda a, b, ops: a + ops.floordiv(b, 2) + 1,
    lambda a, b, ops: 2 * ops.floordiv(a, 2),
    lambda a, b, ops: a * ops.floordiv(b, 3),
    lambda a, b, ops: ops.ne(a, 3),
    lambda a, b, ops: ops.eq(a, b),
    lambda a, b, ops: ops.max(a, 3),
    lambda a, b, ops: ops.min(a, b),
]


class _KilnOps:
    floordiv = staticmethod(lambda x, y: x // y)
    mod = staticmethod(lambda x, y: x % y)
    eq = staticmethod(lambda x, y: x == y)
    ne = staticmethod(lambda x, y: x != y)
    max = staticmethod(kiln.sym_max)
    min = staticmethod(kiln.sym_min)


@requires_torch
@pytest.mark.parametrize("i", range(len(PRINT_CASES)))
def test_expression_printing_matches_sympy(i):
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod

    class SympyOps:
        floordiv = staticmethod(FloorDiv)
        mod = staticmethod(Mod)
        eq = staticmethod(sympy.Eq)
        ne = staticmethod(sympy.Ne)
        max = staticmethod(sympy.Max)
        min = staticmethod(sympy.Min)

    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    a, b = sym_tensor(ShapeEnv(), 7, 5).shape
    assert str(PRINT_CASES[i](a, b, _KilnOps)) == str(PRINT_CASES[i](s0, s1, SympyOps))


def test_sym_size_ops():
    env = ShapeEnv()
    x = sym_tensor(env, 6, 4)
    aten = kiln.ops.aten
    assert str(aten.sym_size.int(x, 0)) == "s0" and str(aten.sym_size.int(x, -1)) == "s1"
    assert str(aten.sym_stride.int(x, 0)) == "s1"
    assert str(aten.sym_numel.default(x)) == "s0*s1"
    assert aten.sym_storage_offset.default(x) == 0
    assert aten.sym_size.int(kiln.empty(3, 5), 1) == 5  # plain ints on real tensors


def test_evaluate_guards_after_unification():
    env = ShapeEnv(duck_shape=False)
    x, y = sym_tensor(env, 4), sym_tensor(env, 4)
    assert bool(x.shape[0] == y.shape[0])
    assert guard_strs(env) == ["Eq(s0, s1)"]
    assert str(y.shape[0]) == "s0"
    assert env.evaluate_guards_for_args([x, y], [kiln.empty(6), kiln.empty(6)])
    assert not env.evaluate_guards_for_args([x, y], [kiln.empty(6), kiln.empty(7)])
    assert env.produce_guards([x, y], ["x", "y"]) == ["y.size()[0] == x.size()[0]"]


@pytest.mark.parametrize("case", ["slice", "buffer slice", "arange", "arange end", "arange step float"])
def test_sizes_in_slices_and_arange_stay_symbolic(case):
    # x[:, :t] and arange(0, t) with t a symbolic size keep t symbolic: the slice bound was int()-ed
    # (and the layout check's replay compared a symbolic size with its hint), arange's end went
    # through a Scalar, which holds no SymInt; both pinned t, so nanoGPT's generate recompiled for
    # every prompt length
    from kiln._dynamo.testing import CompileCounterWithBackend

    bias = kiln.tril(kiln.ones(16, 16))
    fns = {
        "slice": lambda x, y: x[:, :y.size(0)] * 2,
        "buffer slice": lambda x, y: bias[:y.size(0), :y.size(0)] * y,
        "arange": lambda x, y: kiln.arange(0, y.size(0), dtype=kiln.long) + y,
        "arange end": lambda x, y: kiln.arange(y.size(0)) * y,
        "arange step float": lambda x, y: kiln.arange(1, y.size(0) + 1, 2, dtype=kiln.float64),
    }
    fn = fns[case]
    kiln._dynamo.reset()
    counter = CompileCounterWithBackend("eager")
    compiled = kiln.compile(fn, backend=counter, dynamic=True)
    for t in (3, 4, 5, 6):
        x, y = kiln.arange(40.0).view(4, 10), kiln.linspace(-1, 1, t)
        got, want = compiled(x, y), fn(x, y)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
    kiln._dynamo.reset()
    assert counter.frame_count == 1


def test_produce_guards_are_python_that_agrees_with_evaluate_guards():
    """produce_guards prints each guard from its expression tree as Python over the sizes' sources
    (Eq as ==, Mod as %, the products parenthesised as Python's precedence needs); evaluated on
    concrete tensors, the checks accept exactly what evaluate_guards_for_args accepts."""
    env = ShapeEnv(duck_shape=False)
    x, y = sym_tensor(env, 6, 10), sym_tensor(env, 12)
    with env._as_context():
        x.view(-1, 4)  # Mod(s0*s1, 4) is 0
        assert bool(x.shape[0] + 2 * x.shape[1] > y.shape[0])  # s0 + 2*s1 > s2
        assert bool(x.shape[1] % 3 != 0)  # Mod(s1, 3) != 0
        assert bool(max(x.shape[0], 4) == 6)  # pins s0 to 6 through a Max
    checks = env.produce_guards([x, y], ["x", "y"])
    assert not any("Eq(" in c or "Mod(" in c or "Max(" in c or "Ne(" in c for c in checks), checks
    cases = [((6, 10), 12), ((6, 2), 12), ((6, 4), 5), ((6, 3), 5), ((5, 4), 5), ((6, 14), 33), ((6, 14), 34)]
    for (a, b), c in cases:
        xs, ys = kiln.empty(a, b), kiln.empty(c)
        by_python = all(eval(check, {}, {"x": xs, "y": ys}) for check in checks)
        assert by_python == env.evaluate_guards_for_args([x, y], [xs, ys]), ((a, b), c, checks)
    assert sum(env.evaluate_guards_for_args([x, y], [kiln.empty(a, b), kiln.empty(c)]) for (a, b), c in cases) >= 2
