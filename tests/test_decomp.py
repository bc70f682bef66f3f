"""kiln._decomp: every decomposition against its op's eager result (values, dtype, shape, and
gradients through kiln.autograd), the core op set (Tag.core), completeness (every non-core
functional op has a decomposition) and that traced decompositions bottom out in core ops."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch
from decomp_samples import CASES, F32, F64, GEN, NoGrad, make
from kiln._decomp import (core_aten_decompositions, decomposition_table, get_decompositions,
                          register_decomposition)
from kiln._ops import OpOverload, Tag

aten = kiln.ops.aten


# Ops whose result is uninitialized memory: compare layout only.
UNINITIALIZED = {aten.empty_like.default, aten.new_empty.default}
# Looser tolerances where the kernel keeps a wider intermediate than the decomposed ops.
TOLERANCE = {aten.mish.default: (1e-5, 1e-5), aten.mish_backward.default: (1e-4, 1e-5),
             aten.linspace.default: (1e-6, 1e-6)}


# --- comparison ------------------------------------------------------------------------------

def assert_equal(actual, expected, op, rtol=None, atol=None, layout_only=False):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), f"{op}: {actual} vs {expected}"
        for a, e in zip(actual, expected):
            assert_equal(a, e, op, rtol, atol, layout_only)
        return
    if expected is None or not isinstance(expected, kiln.Tensor):
        assert actual is None if expected is None else actual == expected, f"{op}: {actual} != {expected}"
        return
    assert isinstance(actual, kiln.Tensor), f"{op}: got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"{op}: dtype {actual.dtype} != {expected.dtype}"
    assert tuple(actual.shape) == tuple(expected.shape), f"{op}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    if layout_only:
        assert tuple(actual.stride()) == tuple(expected.stride()), f"{op}: strides differ"
        return
    a, e = np.array(actual.tolist()), np.array(expected.tolist())
    if expected.dtype.is_floating_point:
        if rtol is None:
            rtol, atol = (1.3e-5, 1e-5) if expected.dtype == F32 else (1e-7, 1e-7)
            if expected.dtype == kiln.float16:
                rtol, atol = 4e-3, 4e-3
            elif expected.dtype == kiln.bfloat16:
                rtol, atol = 3e-2, 3e-2
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=str(op))
    else:
        np.testing.assert_array_equal(a, e, err_msg=str(op))


def _generators(kwargs):
    """kwargs with each GEN marker replaced by a freshly seeded generator (same seed each call)."""
    return {k: (kiln.Generator().manual_seed(1234) if v is GEN else v) for k, v in kwargs.items()}


def _copies(args):
    """Clones of the sample's tensors, for ops that update an argument (batch norm's statistics)."""
    def sub(v):
        if isinstance(v, kiln.Tensor):
            return v.detach().clone()
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, tuple):
            return tuple(sub(x) for x in v)
        return v
    return sub(args)


def _run(fn, args, kwargs):
    kiln.manual_seed(7)
    return fn(*args, **kwargs)


def _float_leaves(args):
    leaves = []

    def visit(v):
        if isinstance(v, kiln.Tensor) and v.dtype.is_floating_point:
            leaves.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
    visit(args)
    return leaves


def _with_grad(args, only_first):
    """The sample's float tensors as fresh leaves requiring grad (non-contiguous layouts kept);
    with only_first, just the first one (ops not differentiable in their other inputs)."""
    seen = []

    def sub(v):
        if isinstance(v, kiln.Tensor) and v.dtype.is_floating_point:
            seen.append(v)
            return v.detach().requires_grad_(not only_first or len(seen) == 1)
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, tuple):
            return tuple(sub(x) for x in v)
        return v
    new = sub(args)
    return new, [t for t in _float_leaves(new) if t.requires_grad]


def _grads(fn, args, kwargs, seeds, only_first=False, which=None):
    """Gradients of sum(out_i * seed_i) over the differentiable outputs; `which` (the indices the
    op's own outputs require grad at) makes the decomposition's match the op's."""
    args, leaves = _with_grad(args, only_first)
    kiln.manual_seed(7)
    out = fn(*args, **kwargs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if which is None:
        which = [i for i, o in enumerate(outs) if isinstance(o, kiln.Tensor) and o.requires_grad]
        which = GRAD_OUTPUTS.get(fn, which)
    outs = [outs[i] for i in which if isinstance(outs[i], kiln.Tensor) and outs[i].requires_grad]
    _grads.which = which
    if not outs:
        return None
    total = None
    for o, w in zip(outs, seeds):
        term = (o * w[tuple(o.shape)] if tuple(o.shape) in w else o).sum()
        total = term if total is None else total + term
    return kiln.autograd.grad(total, leaves, allow_unused=True)


def _detached(args):
    def sub(v):
        if isinstance(v, kiln.Tensor):
            return v.detach()
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, tuple):
            return tuple(sub(x) for x in v)
        return v
    return sub(args)


def check_op(op, want_grad=True):
    decomp = decomposition_table[op]
    rtol, atol = TOLERANCE.get(op, (None, None))
    count = 0
    for args, kwargs in CASES[op]():
        a1 = _copies(args) if _has_mutation(op) else tuple(_detached(args))
        a2 = _copies(args) if _has_mutation(op) else tuple(_detached(args))
        k1, k2 = _generators(kwargs), _generators(kwargs)
        expected = _run(op, a1, k1)
        actual = _run(decomp, a2, k2)
        assert_equal(actual, expected, op, rtol, atol, layout_only=op in UNINITIALIZED)
        if _has_mutation(op):  # running statistics updated alike
            assert_equal(a2, a1, op, rtol, atol)
        count += 1
        # Gradients are compared in float32/float64 (in 16-bit floats rounding dominates them, and
        # their coarse grid puts samples on the kinks of piecewise ops).
        low_precision = any(t.dtype in (kiln.float16, kiln.bfloat16) for t in _float_leaves(args))
        if (want_grad and _float_leaves(args) and not low_precision and op not in NO_GRAD
                and not isinstance(args, NoGrad)):
            k1, k2 = _generators(kwargs), _generators(kwargs)
            shapes = _out_shapes(expected)
            seeds = [{s: make(s, F64).to(e.dtype)} if e.dtype.is_floating_point else {} for s, e in shapes]
            only_first = False
            try:
                g_expected = _grads(op, _detached(args), k1, seeds)
            except NotImplementedError as e:  # the op has no derivative (backward ops: no double backward;
                if "derivative for" not in str(e):  # `2 % x`, whose backward PyTorch refuses too)
                    raise
                continue
            except RuntimeError as e:  # e.g. nll_loss is not differentiable in its weight
                if "derivative for" in str(e) and "is not implemented" in str(e):
                    continue  # floor_divide: no derivative
                if "is not differentiable with respect to argument" not in str(e):
                    raise
                only_first = True
                g_expected = _grads(op, _detached(args), k1, seeds, only_first=True)
            if g_expected is None:
                continue
            g_actual = _grads(decomp, _detached(args), k2, seeds, only_first=only_first, which=_grads.which)
            if g_actual is None:  # the decomposed result does not depend on the inputs (norm ord=0)
                g_actual = [None] * len(g_expected)
            for ga, ge in zip(g_actual, g_expected):
                if ge is None:
                    continue
                if ga is None:  # the decomposition does not depend on that input: its gradient is zero
                    assert not ge.any(), f"{op}: the decomposition gives no gradient where the op's is nonzero"
                    continue
                assert_equal(ga, ge, f"grad of {op}", rtol and rtol * 10, atol and atol * 10)
    assert count > 0


def _out_shapes(out):
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [(tuple(o.shape), o) for o in outs if isinstance(o, kiln.Tensor)]


def _has_mutation(op):
    return op in (aten.native_batch_norm.default, aten.batch_norm.default)


# Ops with float inputs whose gradient is not compared: samplers (no gradient), and the
# comparison/index ops whose float outputs are not differentiable.
NO_GRAD = {aten.bernoulli.default, aten.bernoulli.p, aten.rand_like.default, aten.rand_like.generator,
           aten.randn_like.default, aten.randn_like.generator, aten.randint_like.default,
           aten.randint_like.generator, aten.randint_like.low_dtype, aten.randint_like.low_generator_dtype,
           aten.empty_like.default, aten.zeros_like.default, aten.ones_like.default, aten.new_empty.default,
           aten.new_zeros.default, aten.new_ones.default, aten.new_full.default}


# Outputs whose gradient the op's derivative reads (batch norm's saved statistics and running
# averages require grad but its formula reads only the output's gradient, as PyTorch's).
GRAD_OUTPUTS = {aten._native_batch_norm_legit_functional.default: [0]}


# --- the tests -------------------------------------------------------------------------------

def _registry_ops():
    out = []
    for qualified, name, _ in kiln._C._packets():
        packet = getattr(aten, name)
        for ov in packet.overloads():
            out.append(getattr(packet, ov))
    return out


def _is_functional(op):
    """No argument is written (in-place `foo_` and out= overloads write theirs)."""
    schema = str(op._schema)
    return "!" not in schema.split(") ->")[0]


CORE_OPS = {op for op in _registry_ops() if Tag.core in op.tags}
NON_CORE_FUNCTIONAL = sorted((op for op in _registry_ops() if _is_functional(op) and Tag.core not in op.tags), key=str)


@pytest.mark.parametrize("op", sorted(core_aten_decompositions(), key=str), ids=str)
def test_decomposition_matches_eager(op):
    assert op in CASES, f"no samples for {op}: add them to tests/test_decomp.py"
    check_op(op)


def test_every_non_core_functional_op_has_a_decomposition():
    missing = [str(op) for op in NON_CORE_FUNCTIONAL if op not in decomposition_table]
    assert not missing, f"non-core functional ops without a decomposition: {missing}"


def test_no_decomposition_of_core_or_mutating_ops():
    for op in decomposition_table:
        assert Tag.core not in op.tags, f"{op} is core, it needs no decomposition"
        assert _is_functional(op), f"{op} writes an argument: functionalization handles it"


def test_every_decomposition_has_samples():
    assert set(core_aten_decompositions()) <= set(CASES)


def test_core_tags():
    names = {str(op) for op in CORE_OPS}
    for name in ["aten.add.Tensor", "aten.mul.Tensor", "aten.sum.dim_IntList", "aten.amax.default",
                 "aten.convolution.default", "aten._softmax.default", "aten.view.default", "aten.permute.default",
                 "aten.expand.default", "aten._native_batch_norm_legit.default", "aten.native_layer_norm.default",
                 "aten.squeeze.dim", "aten.mean.default", "aten.div.Scalar_mode", "aten.pow.Scalar",
                 "aten.rand.default", "aten.split_with_sizes.default", "aten.repeat.default"]:
        assert name in names, name
    for name in ["aten.silu.default", "aten.addcmul.default", "aten.native_batch_norm.default",
                 "aten.empty_like.default", "aten.copy_.default", "aten.add_.Tensor", "aten.add.out",
                 "aten.matmul.default", "aten.linear.default", "aten.gelu_backward.default", "aten.all.default"]:
        assert name not in names, name
    assert Tag.core in aten.add.Tensor.tags and Tag.core not in aten.silu.default.tags
    assert all(_is_functional(op) or op == aten._native_batch_norm_legit.default for op in CORE_OPS)


# Core in kiln though PyTorch leaves them untagged (README: rule 2).
KILN_CORE_ADDITIONS = {"aten.erfc.default", "aten.erfinv.default", "aten.lgamma.default", "aten.digamma.default",
                       "aten.signbit.default", "aten.bitwise_left_shift.Tensor", "aten.bitwise_right_shift.Tensor",
                       "aten.rand.generator", "aten.randn.generator", "aten.randperm.generator",
                       "aten.randint.low_generator", "aten.multinomial.default",
                       # the LAPACK factorizations (PyTorch falls back to their kernels without a core tag)
                       "aten.linalg_lu_factor_ex.default", "aten.linalg_inv_ex.default", "aten._linalg_det.default",
                       "aten._linalg_slogdet.default", "aten._linalg_solve_ex.default",
                       "aten.linalg_cholesky_ex.default", "aten.linalg_qr.default", "aten._linalg_svd.default",
                       "aten._linalg_eigh.default",
                       "aten.view.dtype",  # a bit reinterpretation (PyTorch's inductor special-cases it)
                       "aten.view_as_real.default", "aten.view_as_complex.default", "aten.conj_physical.default",
                       "aten._fft_c2c.default",
                       # fused attention (PyTorch's inductor falls back to these kernels without a core tag)
                       "aten._scaled_dot_product_flash_attention_for_cpu.default",
                       "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"}


@requires_torch
def test_core_tags_follow_pytorch():
    compared = 0
    for op in _registry_ops():
        if not _is_functional(op):
            continue
        name, overload = str(op).split(".")[1:]
        try:
            t = getattr(getattr(torch.ops.aten, name), overload)
            t_core = torch.Tag.core in t.tags
        except (AttributeError, RuntimeError):  # kiln spells a few overloads differently
            t_core = False
        k_core = Tag.core in op.tags
        if str(op) in KILN_CORE_ADDITIONS:
            assert k_core and not t_core, str(op)
        else:
            assert k_core == t_core, f"{op}: kiln core={k_core}, PyTorch core={t_core}"
        compared += 1
    assert compared > 300


def test_core_set_is_documented():
    import pathlib
    readme = (pathlib.Path(kiln.__file__).parent / "_decomp" / "README.md").read_text()
    for op in CORE_OPS:
        name = op.name().split("::")[1]
        assert f"`{name}`" in readme, f"core op {name} missing from kiln/_decomp/README.md"


def test_api():
    assert get_decompositions([aten.silu])[aten.silu.default] is decomposition_table[aten.silu.default]
    got = get_decompositions([aten.std, aten.addcmul.default, aten.add.Tensor])
    assert set(got) == {aten.std.default, aten.std.dim, aten.std.correction, aten.addcmul.default}
    table = core_aten_decompositions()
    assert aten.add.Tensor not in table and aten.silu.default in table
    assert len(table) == len(NON_CORE_FUNCTIONAL)
    registry = {}

    @register_decomposition([aten.silu.default, aten.mish], registry=registry)
    def f(x):
        return x
    assert set(registry) == {aten.silu.default} | {getattr(aten.mish, name) for name in aten.mish.overloads()}
    with pytest.raises(RuntimeError, match="duplicate"):
        register_decomposition(aten.silu.default, registry=registry)(f)
    with pytest.raises(TypeError):
        register_decomposition("aten::silu")(f)


def _recorded_calls(op, limit=4):
    """The OpOverloads a decomposition calls directly, over its first samples."""
    calls = set()
    original = OpOverload.__call__

    def recording(self, *args, **kwargs):
        calls.add(self)
        return original(self, *args, **kwargs)
    OpOverload.__call__ = recording
    try:
        for i, (args, kwargs) in enumerate(CASES[op]()):
            if i == limit:
                break
            kwargs = _generators(kwargs)
            decomposition_table[op](*_detached(args), **kwargs)
    finally:
        OpOverload.__call__ = original
    return calls


def test_decompositions_bottom_out_in_core_ops():
    # Each decomposition calls core ops or ops with a decomposition (never itself), and the
    # "calls" graph has no cycle: expanding decompositions recursively ends in core ops only.
    table = core_aten_decompositions()
    edges = {op: _recorded_calls(op) for op in table}
    for op, callees in edges.items():
        assert callees, f"{op}'s decomposition calls no aten op"
        assert op not in callees, f"{op}'s decomposition calls {op} itself"
        for c in callees:
            assert Tag.core in c.tags or c in table, f"{op} calls {c}, neither core nor decomposable"
    state = {}

    def visit(op, path):
        if state.get(op) == "done":
            return
        assert state.get(op) != "active", f"decomposition cycle: {' -> '.join(map(str, path + [op]))}"
        state[op] = "active"
        for c in edges.get(op, ()):
            if c in table:
                visit(c, path + [op])
        state[op] = "done"
    for op in edges:
        visit(op, [])


def _make_fx():
    try:
        from kiln.fx.experimental.proxy_tensor import make_fx
    except ImportError:
        return None
    return make_fx


@pytest.mark.parametrize("op", sorted(core_aten_decompositions(), key=str), ids=str)
def test_decomposition_traces_to_core_ops(op):
    make_fx = _make_fx()
    if make_fx is None:
        pytest.skip("needs kiln.fx.experimental.proxy_tensor.make_fx (the make_fx tracer), not on this branch yet")
    table = core_aten_decompositions()
    args, kwargs = next(iter(CASES[op]()))
    args, kwargs = _detached(args), _generators(kwargs)
    tensors = [a for a in args if isinstance(a, kiln.Tensor)]
    positions = [i for i, a in enumerate(args) if isinstance(a, kiln.Tensor)]

    def f(*ts):
        full = list(args)
        for i, t in zip(positions, ts):
            full[i] = t
        return op(*full, **kwargs)
    gm = make_fx(f, decomposition_table=table)(*tensors)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    for target in targets:
        if isinstance(target, OpOverload):
            assert Tag.core in target.tags, f"{op} traces to non-core {target}"
        assert target != op, f"{op}'s decomposition calls {op} itself"
