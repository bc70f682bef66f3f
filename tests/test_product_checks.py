"""mm/bmm/addmm/baddbmm/mv check their dtypes in PyTorch's order (Note [Product kernel order] in
tensor/ops/linalg.cc): an empty result or an empty contraction returns before the dtype dispatch
refuses Bool; addmm compares self first; bmm refuses a Bool batch1 before comparing batch2. Each
call is compared with PyTorch 2.13: the same result, or the same exception class and message,
eagerly and compiled (the metas make the same checks)."""

import pytest

import kiln

torch = pytest.importorskip("torch")

B, L, F, D = "bool", "int64", "float32", "float64"


def z(lib, shape, dtype=B):
    return lib.zeros(*shape, dtype=getattr(lib, dtype))


# (id, fn(lib, *tensors), [(shape, dtype)], kwargs)
CASES = [
    ("addmm_bool_empty", "addmm", [((0, 0), B), ((0, 0), B), ((0, 0), B)], {}),
    ("addmm_bool_rows0", "addmm", [((0, 2), B), ((0, 2), B), ((2, 2), B)], {}),
    ("addmm_bool_k0", "addmm", [((2, 2), B), ((2, 0), B), ((0, 2), B)], {}),
    ("addmm_bool_k0_beta0", "addmm", [((2, 2), B), ((2, 0), B), ((0, 2), B)], {"beta": 0, "alpha": 2}),
    ("addmm_bool_k0_beta_true", "addmm", [((2, 2), B), ((2, 0), B), ((0, 2), B)], {"beta": True}),
    ("addmm_bool", "addmm", [((2, 2), B), ((2, 2), B), ((2, 2), B)], {}),
    ("addmm_float_self_bool_mats", "addmm", [((2, 2), F), ((2, 2), B), ((2, 2), B)], {}),
    ("addmm_dtype_before_shapes", "addmm", [((2, 2), F), ((2, 3), B), ((2, 2), B)], {}),
    ("addmm_mat1_mat2", "addmm", [((2, 2), B), ((2, 2), L), ((2, 2), B)], {}),
    ("addmm_self_mat2", "addmm", [((2, 2), D), ((2, 2), F), ((2, 2), F)], {}),
    ("addmm_int_k0_float_beta", "addmm", [((2, 2), L), ((2, 0), L), ((0, 2), L)], {"beta": 0.5}),
    ("addmm_float_k0_beta2", "addmm", [((2, 2), F), ((2, 0), F), ((0, 2), F)], {"beta": 2}),
    ("bmm_bool_long", "bmm", [((1, 2, 2), B), ((1, 2, 2), L)], {}),
    ("bmm_long_bool", "bmm", [((1, 2, 2), L), ((1, 2, 2), B)], {}),
    ("bmm_bool_float", "bmm", [((1, 2, 2), B), ((1, 2, 2), F)], {}),
    ("bmm_bool_long_k0", "bmm", [((1, 2, 0), B), ((1, 0, 2), L)], {}),
    ("bmm_bool_long_empty", "bmm", [((0, 2, 2), B), ((0, 2, 2), L)], {}),
    ("baddbmm_self_batch1", "baddbmm", [((1, 2, 2), L), ((1, 2, 2), B), ((1, 2, 2), B)], {}),
    ("baddbmm_bool_long", "baddbmm", [((1, 2, 2), B), ((1, 2, 2), B), ((1, 2, 2), L)], {}),
    ("baddbmm_float_long", "baddbmm", [((1, 2, 2), F), ((1, 2, 2), F), ((1, 2, 2), L)], {}),
    ("baddbmm_float_long_k0", "baddbmm", [((1, 2, 2), F), ((1, 2, 0), F), ((1, 0, 2), L)], {}),
    ("baddbmm_bool_k0", "baddbmm", [((1, 2, 2), B), ((1, 2, 0), B), ((1, 0, 2), B)], {}),
    ("mv_bool", "mv", [((2, 2), B), ((2,), B)], {}),
    ("mv_bool_k0", "mv", [((2, 0), B), ((0,), B)], {}),
    ("mv_float_double", "mv", [((2, 2), F), ((2,), D)], {}),
    ("mv_float_double_empty", "mv", [((0, 2), F), ((2,), D)], {}),
    ("mm_bool_empty", "mm", [((2, 0), B), ((0, 2), B)], {}),
    ("mm_bool", "mm", [((2, 2), B), ((2, 2), B)], {}),
    ("matmul_bool_3d", "matmul", [((2, 2, 2), B), ((2, 2, 2), B)], {}),
]


def outcome(lib, name, specs, kwargs, backend=None):
    fn = getattr(lib, name)
    if backend is not None:
        lib._dynamo.reset()
        fn = lib.compile(lambda *a: getattr(lib, name)(*a, **kwargs), backend=backend)
        call = lambda *a: fn(*a)  # noqa: E731
    else:
        call = lambda *a: fn(*a, **kwargs)  # noqa: E731
    try:
        r = call(*[z(lib, s, d) for s, d in specs])
    except Exception as e:  # noqa: BLE001 - the exception is the result compared
        return type(e).__name__, str(e).splitlines()[0]
    return "ok", str(r.dtype).split(".")[-1], tuple(r.shape), r.tolist()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_product_checks_equal_torch(case):
    _, name, specs, kwargs = case
    assert outcome(kiln, name, specs, kwargs) == outcome(torch, name, specs, kwargs)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("case", [c for c in CASES if c[0] in (
    "addmm_bool_empty", "addmm_bool", "addmm_float_self_bool_mats", "addmm_int_k0_float_beta", "bmm_bool_long",
    "bmm_long_bool", "bmm_bool_long_k0", "mv_bool", "baddbmm_bool_long")], ids=lambda c: c[0])
def test_product_checks_compiled_equal_eager(case, backend):
    import kiln._dynamo  # noqa: F401 - kiln.compile's backends

    _, name, specs, kwargs = case
    eager = outcome(kiln, name, specs, kwargs)
    compiled = outcome(kiln, name, specs, kwargs, backend)
    assert compiled[:1] == eager[:1] and compiled[-1] == eager[-1]
