"""The guard tree (dynamo/guards.h) through kiln._C._dynamo.guards, on real kiln tensors.

A RootGuardManager is built once per compiled frame and checked on every call: root(f_locals)
-> bool, root.check_verbose(f_locals) -> (bool, why). The frame hook checks it in C++ without a
Python call; the last tests drive that through kiln._C._dynamo.set_eval_frame.
"""


import pytest

import kiln
from kiln._C import _dynamo as D
from kiln._C._dynamo import guards as G
from kiln.fx.experimental.symbolic_shapes import ShapeEnv
from test_dynamo_eval_frame import hook


class Box:
    def __init__(self, w):
        self.w = w


W = 7


def tensor_root(example, sizes, strides, origin="x"):
    root = G.RootGuardManager(globals())
    root.dict_getitem_manager("x", "L['x']").add_tensor_match_guard(example, sizes, strides, origin)
    return root


def test_tensor_match_exact_sizes_and_strides():
    x = kiln.randn(4, 3)
    root = tensor_root(x, [4, 3], [3, 1])
    assert root({"x": x}) and root({"x": kiln.zeros(4, 3)})
    for bad, why in [
        (kiln.randn(4, 3, dtype=kiln.float64), "dtype is float64"),
        (kiln.empty(4, 3, device="meta"), "device is meta"),
        (kiln.randn(4, 3, requires_grad=True), "requires_grad is True"),
        (kiln.randn(4, 3, 1), "dim is 3"),
        (kiln.randn(5, 3), "size mismatch at index 0: expected 4, actual 5"),
        (kiln.randn(3, 4).t(), "stride mismatch at index 1: expected 1, actual 4"),
        (3, "type is int"),
    ]:
        ok, text = root.check_verbose({"x": bad})
        assert not ok and not root({"x": bad})
        assert why in text and text.startswith("TENSOR_MATCH: check_tensor(L['x'], Tensor,") and text.endswith("  # x")


def test_tensor_match_type_must_be_identical():
    root = tensor_root(kiln.randn(2), [2], [1])
    assert root({"x": kiln.randn(2)})
    p = kiln.nn.Parameter(kiln.randn(2), requires_grad=False)  # a Tensor subclass, same metadata
    ok, why = root.check_verbose({"x": p})
    assert not ok and "type is Parameter" in why


def test_dynamic_sizes_bind_symbols_and_contiguous_strides():
    x, y = kiln.randn(4, 3), kiln.randn(4)
    root = G.RootGuardManager(globals())
    root.dict_getitem_manager("x", "L['x']").add_tensor_match_guard(x, ["s0", 3], [None, None], "x")
    root.dict_getitem_manager("y", "L['y']").add_tensor_match_guard(y, ["s0"], [1], "y")
    assert root({"x": kiln.randn(9, 3), "y": kiln.randn(9)})
    ok, why = root.check_verbose({"x": kiln.randn(9, 3), "y": kiln.randn(8)})
    assert not ok and "s0 = 9 from an earlier guard" in why
    assert not root({"x": kiln.randn(3, 9).t(), "y": kiln.randn(9)})  # strides not contiguous


def test_shape_env_guards_see_the_bound_symbols():
    env = ShapeEnv()
    s0 = env.create_symbol(8, "L['x'].size()[0]")
    assert bool(s0 > 2) and bool(s0 % 4 == 0)
    root = tensor_root(kiln.randn(8), ["s0"], [None])
    root.set_shape_env(env, "shape env")
    assert root({"x": kiln.randn(8)}) and root({"x": kiln.randn(4)}) and root({"x": kiln.randn(12)})
    assert not root({"x": kiln.randn(6)}) and not root({"x": kiln.randn(1)})
    ok, why = root.check_verbose({"x": kiln.randn(6)})
    assert not ok and why.startswith("SHAPE_ENV: Eq(Mod(s0, 4), 0) -- s0 = 6  # shape env; guard from ")
    assert why.endswith(" in test_shape_env_guards_see_the_bound_symbols")  # where the guard was made
    assert "| +- SHAPE_ENV: s0 > 2  # shape env" in str(root)
    root.set_shape_env(None, "")
    assert root({"x": kiln.randn(6)})


def test_leaf_guards_and_accessors():
    root = G.RootGuardManager(globals())
    n = root.dict_getitem_manager("n", "L['n']")
    assert root.dict_getitem_manager("n", "L['n']") is n  # memoised
    n.add_type_match_guard(int, "type(n)")
    n.add_equals_match_guard(3, "n == 3")
    root.dict_getitem_manager("z", "L['z']").add_id_match_guard(None, "z is None")
    root.dict_getitem_manager("xs", "L['xs']").add_length_check_guard(2, "len(xs)")
    root.dict_getitem_manager("d", "L['d']").add_dict_keys_guard(["a", "b"], "d.keys()")
    b = root.dict_getitem_manager("b", "L['b']")
    b.getattr_manager("w", "L['b'].w").getitem_manager(1, "L['b'].w[1]").add_lambda_guard(lambda v: v > 0, "w[1] > 0")
    root.globals_dict_manager().dict_getitem_manager("W", "G['W']").add_equals_match_guard(7, "W")
    good = {"n": 3, "z": None, "xs": [1, 2], "d": {"a": 1, "b": 2}, "b": Box((0, 5))}
    assert root(good) and root.check_verbose(good) == (True, "")
    cases = {
        "n": (3.0, "TYPE_MATCH: type(L['n']) is int -- type is float  # type(n)"),
        "z": (0, "ID_MATCH: L['z'] is None -- value is 0  # z is None"),
        "xs": ((1,), "LENGTH_CHECK: len(L['xs']) == 2 -- length is 1  # len(xs)"),
        "d": ({"b": 1, "a": 2}, "DICT_KEYS: list(L['d'].keys()) == ['a', 'b'] -- key 0 is 'b'  # d.keys()"),
        "b": (Box((0, -5)), "LAMBDA_GUARD: <lambda>(L['b'].w[1]) -- returned a false value  # w[1] > 0"),
    }
    for key, (value, why) in cases.items():
        assert root.check_verbose({**good, key: value}) == (False, why)
    missing = [
        ({k: v for k, v in good.items() if k != "b"}, "DictGetItemGuardAccessor('b') -- key 'b' missing"),
        ({**good, "b": 1}, "GetAttrGuardAccessor(w) -- int object has no attribute 'w'"),
        ({**good, "b": Box([1])}, "GetItemGuardAccessor(1) -- index 1 out of range for list"),
        ({**good, "b": Box((0, "a"))}, "raised TypeError"),  # an exception inside a guard: it fails
    ]
    for f_locals, why in missing:
        ok, text = root.check_verbose(f_locals)
        assert not ok and why in text and not root(f_locals)
    globals()["W"] = 8
    try:
        assert root.check_verbose(good) == (False, "EQUALS_MATCH: G['W'] == 7 -- value is 8 (int)  # W")
    finally:
        globals()["W"] = 7


def test_global_state_guard():
    root = G.RootGuardManager(globals())
    root.add_global_state_guard("global state")
    assert root({})
    with kiln.no_grad():
        ok, why = root.check_verbose({})
        assert not ok and "now grad_mode=False" in why and why.endswith("# global state")
    prev = kiln.get_default_dtype()
    kiln.set_default_dtype(kiln.float64)
    try:
        assert not root({})
    finally:
        kiln.set_default_dtype(prev)
    assert root({})


def test_tree_printer():
    root = G.RootGuardManager(globals())
    root.add_global_state_guard("")
    root.dict_getitem_manager("x", "L['x']").add_tensor_match_guard(kiln.randn(4, 3), ["s0", 3], [None, 1], "x (from f.py:2)")
    root.dict_getitem_manager("b", "L['b']").getattr_manager("w", "L['b'].w").add_length_check_guard(2, "")
    assert str(root) == (
        "TREE_GUARD_MANAGER:\n"
        "+- RootGuardManager\n"
        "| +- GLOBAL_STATE: grad_mode=True, default_dtype=kiln.float32\n"
        "| +- GuardManager: source=L['x'], accessed_by=DictGetItemGuardAccessor('x')\n"
        "| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, DispatchKeySet(CPU), kiln.float32, device=cpu, "
        "requires_grad=False, size=[s0, 3], stride=[None, 1])  # x (from f.py:2)\n"
        "| +- GuardManager: source=L['b'], accessed_by=DictGetItemGuardAccessor('b')\n"
        "| | +- GuardManager: source=L['b'].w, accessed_by=GetAttrGuardAccessor(w)\n"
        "| | | +- LENGTH_CHECK: len(L['b'].w) == 2\n"
    )


def test_symbolic_and_derived_strides():
    # idx[:, -16:] of a growing idx: [2, s0] with strides [s1, 1]; w: a transposed [s0, s2] whose
    # outer stride is its dim 0's stride times its size
    root = G.RootGuardManager(globals())
    root.dict_getitem_manager("x", "L['x']").add_tensor_match_guard(kiln.zeros(2, 17)[:, 1:], [2, "s0"], ["s1", 1], "")
    root.dict_getitem_manager("w", "L['w']").add_tensor_match_guard(
        kiln.zeros(3, 16).t(), ["s0", "s2"], [1, ("stride*size", 0)], "")
    assert "size=[s0, s2], stride=[1, stride[0]*size[0]])" in str(root)
    assert root({"x": kiln.zeros(2, 17)[:, 1:], "w": kiln.zeros(3, 16).t()})
    assert root({"x": kiln.zeros(2, 30)[:, 21:], "w": kiln.zeros(5, 9).t()})
    assert not root({"x": kiln.zeros(2, 30)[:, 21:], "w": kiln.zeros(5, 8).t()})  # s0 is 9 and 8
    assert not root({"x": kiln.zeros(2, 17)[:, 1:], "w": kiln.zeros(16, 3)})  # w not transposed
    assert not root({"x": kiln.zeros(2, 34)[:, 1::2], "w": kiln.zeros(3, 16).t()})  # x's inner stride 2


def test_children_keep_the_root_alive():
    root = G.RootGuardManager(globals())
    child = root.dict_getitem_manager("x", "L['x']")
    del root
    child.add_equals_match_guard(1, "")  # still usable


def test_bad_arguments_raise_typed_errors():
    root = G.RootGuardManager(globals())
    with pytest.raises(TypeError):
        G.RootGuardManager(1)
    with pytest.raises(TypeError):
        root(1)
    with pytest.raises(TypeError):
        root.dict_getitem_manager([], "L[[]]")
    with pytest.raises(TypeError):
        root.getattr_manager(1, "")
    with pytest.raises(TypeError):
        root.getitem_manager("0", "")
    with pytest.raises(ValueError):
        root.getitem_manager(-1, "")
    with pytest.raises(TypeError):
        root.add_type_match_guard(1, "")
    with pytest.raises(TypeError):
        root.add_length_check_guard("2", "")
    with pytest.raises(ValueError):
        root.add_length_check_guard(-2, "")
    with pytest.raises(TypeError):
        root.add_dict_keys_guard(1, "")
    with pytest.raises(TypeError):
        root.add_lambda_guard(1, "")
    with pytest.raises(TypeError):
        root.add_tensor_match_guard(1, [], [], "")
    x = kiln.randn(2, 2)
    with pytest.raises(ValueError):
        root.add_tensor_match_guard(x, [2], [1], "")
    with pytest.raises(TypeError):
        root.add_tensor_match_guard(x, [2, 2.0], [2, 1], "")
    with pytest.raises(TypeError):
        root.add_tensor_match_guard(x, [2, 2], [2.0, 1], "")
    with pytest.raises(TypeError):
        root.add_tensor_match_guard(x, [2, 2], [("stride*size",), 1], "")
    with pytest.raises(ValueError):  # a stride derived from itself
        root.add_tensor_match_guard(x, [2, 2], [("stride*size", 0), 1], "")
    with pytest.raises(ValueError):
        root.add_tensor_match_guard(x, [2, 2], [("stride*size", 2), 1], "")
    with pytest.raises(TypeError):
        root.set_shape_env(object(), "")


# --- the frame hook -------------------------------------------------------------------------------

def orig(x, n):
    return ("orig", n)


def new(x, n):
    return ("new", n)


@pytest.fixture
def patched_call():
    """Replaces RootGuardManager.__call__, so a Python call of the guard is seen and refused."""
    calls = []
    saved = G.RootGuardManager.__call__

    def spy(self, f_locals):
        calls.append(f_locals)
        return False

    G.RootGuardManager.__call__ = spy
    try:
        yield calls
    finally:
        G.RootGuardManager.__call__ = saved
        D.reset_code(orig.__code__)


def test_hook_checks_a_root_guard_manager_in_cpp(patched_call):
    asked = []

    def callback(code, f_locals, f_globals, f_builtins, fn):
        if code is not orig.__code__:
            return None
        asked.append(dict(f_locals))
        root = G.RootGuardManager(f_globals)
        x = f_locals["x"]
        sizes = ["s0"] if x.dim() == 1 else list(x.shape)
        root.dict_getitem_manager("x", "L['x']").add_tensor_match_guard(x, sizes, [None] * x.dim(), "x")
        root.dict_getitem_manager("n", "L['n']").add_equals_match_guard(f_locals["n"], "n")
        return root, new.__code__

    with hook(callback):
        assert orig(kiln.randn(3), 1) == ("new", 1)
        assert orig(kiln.randn(5), 1) == ("new", 1)  # hit: checked in C++ (the spy would refuse)
        assert orig(kiln.randn(5), 2) == ("new", 2)  # miss on n: a second entry
        assert orig(kiln.randn(5, 2), 2) == ("new", 2)  # miss on dim
    assert [a["n"] for a in asked] == [1, 2, 2]
    assert orig(kiln.randn(7), 2) == ("orig", 2)  # hook off
    assert patched_call == []  # the hook never called the guard through Python
    entries = D._debug_get_cache_entry_list(orig.__code__)
    assert len(entries) == 3 and all(isinstance(g, G.RootGuardManager) for g, _ in entries)


def test_hook_passes_free_variables():
    scale = kiln.randn(2)
    unset_later = None

    def f(x):
        return x + scale if unset_later is None else x

    seen = []

    def callback(code, f_locals, *rest):
        if code is f.__code__:
            seen.append(dict(f_locals))
        return None

    with hook(callback):
        f(1)
    assert set(seen[0]) == {"x", "scale", "unset_later"} and seen[0]["scale"] is scale
    D.reset_code(f.__code__)

    def make():
        def g(x):
            return later  # noqa: F821 -- a free variable whose cell is still empty
        seen.clear()
        with hook(lambda code, f_locals, *rest: seen.append(dict(f_locals)) if code is g.__code__ else None):
            with pytest.raises(NameError):
                g(1)
        later = 1  # noqa: F841
        return g

    make()
    assert seen == [{"x": 1}]  # the empty cell is left out
