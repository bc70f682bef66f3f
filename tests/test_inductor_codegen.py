"""kiln._C._inductor: kernel IR (kernel_ir's typed objects, and their canonical text) compiled
through LLVM and run on kiln tensors, compared with kiln's eager ops (no torch: this also runs on
3.12)."""
import math

import numpy as np
import pytest

import kiln

ind = kiln._C._inductor
kir = ind.kernel_ir


def row_index(n):  # element [i0, r] of a contiguous [*, n] tensor: offset, outer strides, inner stride
    return (0, [n], 1)


def pointwise_kernel(name, m, n, dtype="f32"):
    # out = relu(x * 2 + b) with b broadcast along rows, x read transposed from an [n, m] tensor
    x = kir.load(0, 0, [1], m)
    b = kir.load(1, 0, [0], 1)
    e = kir.op("relu", kir.op("add", kir.op("mul", x, kir.const(2.0, dtype)), b))
    return kir.Kernel(name, [("in_ptr0", dtype), ("in_ptr1", dtype), ("out_ptr0", dtype)], [m],
                      [kir.Loop(n, [kir.store(2, *row_index(n), e)])])


@pytest.mark.parametrize("m,n", [(1, 1), (3, 5), (17, 33), (64, 1000)])
def test_pointwise_matches_eager(m, n):
    k = ind.compile(pointwise_kernel("cpp_fused_add_mul_relu_0", m, n))
    xt = kiln.randn(n, m)
    b = kiln.randn(n)
    out = kiln.empty(m, n)
    k(xt, b, out)
    ref = kiln.relu(xt.t() * 2 + b)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    assert k.name == "cpp_fused_add_mul_relu_0"
    assert "void cpp_fused_add_mul_relu_0(float* in_ptr0, float* in_ptr1, float* out_ptr0)" in k.code
    assert "define void @cpp_fused_add_mul_relu_0" in k.llvm_ir


@pytest.mark.parametrize("dtype,kdt", [(kiln.float32, "f32"), (kiln.float64, "f64"), (kiln.int64, "i64"),
                                       (kiln.int32, "i32"), (kiln.bfloat16, "bf16")])
def test_every_dtype(dtype, kdt):
    m, n = 5, 7
    k = ind.compile(pointwise_kernel("cpp_fused_add_mul_relu_" + kdt, m, n, kdt))
    xt = (kiln.randn(n, m) * 10).to(dtype)
    b = (kiln.randn(n) * 10).to(dtype)
    out = kiln.empty(m, n, dtype=dtype)
    k(xt, b, out)
    ref = kiln.relu(xt.t() * 2 + b)
    tol = 1e-2 if dtype == kiln.bfloat16 else 1e-6
    np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), rtol=tol, atol=tol)


def test_bool_dtype():
    n = 9
    k = ind.compile(kir.Kernel.parse("kernel cpp_fused_logical_and_gt_0\nbuffers in_ptr0:f32 out_ptr0:bool\nouter\n"
                                     f"loop {n}\n  store 1(0;;1) logical_and(gt(L0(0;;1),Cf32:0x0p+0,),Cbool:1,)"))
    x = kiln.randn(n)
    out = kiln.empty(n, dtype=kiln.bool)
    k(x, out)
    assert out.numpy().tolist() == (x > 0).numpy().tolist()


def rmsnorm_silu(m, n, name="cpp_fused_add_mean_mul_pow_rsqrt_silu_0"):
    x = kir.load(0, *row_index(n))
    inv = kir.op("rsqrt", kir.op("add", kir.op("div", kir.acc(0), kir.const(float(n), "f32")), kir.const(1e-6, "f32")))
    y = kir.op("mul", kir.op("mul", x, inv), kir.load(1, 0, [0], 1))
    return kir.Kernel(name, [("in_ptr0", "f32"), ("in_ptr1", "f32"), ("out_ptr0", "f32")], [m],
                      [kir.Loop(n, [kir.reduce(0, "sum", kir.op("mul", x, x))]),
                       kir.Loop(n, [kir.store(2, *row_index(n), kir.op("mul", y, kir.op("sigmoid", y)))])])


def test_rmsnorm_silu_matches_eager():
    m, n = 33, 515
    k = ind.compile(rmsnorm_silu(m, n))
    x, w = kiln.randn(m, n), kiln.randn(n)
    out = kiln.empty(m, n)
    k(x, w, out)
    y = x * kiln.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    ref = y * kiln.sigmoid(y)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def row_reduction(name, kind, m, n, dtype, out_dtype):
    return kir.Kernel(name, [("in_ptr0", dtype), ("out_ptr0", out_dtype)], [m],
                      [kir.Loop(n, [kir.reduce(0, kind, kir.load(0, *row_index(n)))]),
                       kir.Loop(1, [kir.store(1, 0, [1], 0, kir.acc(0))])])


@pytest.mark.parametrize("kind", ["sum", "max", "min", "argmax", "argmin"])
def test_row_reductions(kind):
    m, n = 6, 101
    x = kiln.randn(m, n)
    arg = kind.startswith("arg")
    k = ind.compile(row_reduction("cpp_fused_%s_0" % kind, kind, m, n, "f32", "i64" if arg else "f32"))
    out = kiln.empty(m, dtype=kiln.int64 if arg else kiln.float32)
    k(x, out)
    ref = getattr(x, kind)(-1)
    if kind in ("max", "min"):
        ref = ref[0] if isinstance(ref, tuple) else ref.values
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("n", [31, 32, 33, 47, 256, 1000])
@pytest.mark.parametrize("kind", ["max", "min", "max_last", "min_last"])
def test_max_min_in_lanes(kind, n, dtype):
    # Note [Lanes for max and min] (codegen/llvm_emit.cc): rows of 32 or more reduce in 16 lanes
    # plus a tail; the values (NaN anywhere, -inf/inf, ties, -0.0 alone) are the scalar loop's
    kd = kiln.float32 if dtype == "f32" else kiln.float64
    rows = [np.random.default_rng(n).standard_normal(n) for _ in range(9)]
    rows[1][0] = np.nan                   # in the first round of lanes
    rows[2][n - 1] = np.nan               # in the tail (or the last lane)
    rows[3][n // 2] = np.nan
    rows[3][n // 3] = np.nan
    rows[4][:] = -np.inf
    rows[5][n // 2] = np.inf
    rows[5][1] = -np.inf
    rows[6][:] = 2.5                      # all ties
    rows[7][:] = -0.0
    rows[8][17 % n] = 1e30 if kind.startswith("max") else -1e30  # the extreme in a late lane
    x = kiln.tensor(np.stack(rows), dtype=kd)
    m = x.shape[0]
    k = ind.compile(row_reduction(f"cpp_fused_{kind}_lanes_{n}", kind, m, n, dtype, dtype))
    out = kiln.empty(m, dtype=kd)
    k(x, out)
    want = (x.amax(-1) if kind.startswith("max") else x.amin(-1)).numpy()
    got = out.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    assert np.signbit(got[7])  # a row of -0.0 gives -0.0
    if n == 256:  # the lanes became vector compares
        import re
        assert re.search(r"fcmp u[gl][te] <\d+ x (float|double)>", k.llvm_ir), k.llvm_ir[:2000]


def test_welford_var_mean():
    m, n = 4, 300
    x = kiln.randn(m, n) + 50
    var = kir.op("div", kir.acc(1), kir.op("sub", kir.acc(2), kir.const(1, "f32")))
    buffers = [("in_ptr0", "f32"), ("out_ptr0", "f32"), ("out_ptr1", "f32")]
    k = ind.compile(kir.Kernel("cpp_fused_var_mean_0", buffers, [m],
                               [kir.Loop(n, [kir.welford(0, kir.load(0, *row_index(n)))]),
                                kir.Loop(1, [kir.store(1, 0, [1], 0, kir.acc(0)), kir.store(2, 0, [1], 0, var)])]))
    mean, var = kiln.empty(m), kiln.empty(m)
    k(x, mean, var)
    xn = x.numpy().astype(np.float64)
    np.testing.assert_allclose(mean.numpy(), xn.mean(-1), rtol=1e-5)
    np.testing.assert_allclose(var.numpy(), xn.var(-1, ddof=1), rtol=1e-3)


def test_unary_ops_match_eager():
    n = 257
    x = kiln.rand(n) * 4 - 2
    for op in ["exp", "tanh", "sigmoid", "sin", "cos", "floor", "ceil", "round", "trunc", "abs", "neg", "erf", "expm1"]:
        k = ind.compile(kir.Kernel("cpp_fused_%s_0" % op, [("in_ptr0", "f32"), ("out_ptr0", "f32")], [],
                                   [kir.Loop(n, [kir.store(1, 0, [], 1, kir.op(op, kir.load(0, 0, [], 1)))])]))
        out = kiln.empty(n)
        k(x, out)
        ref = getattr(kiln, op)(x)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=2e-6, atol=2e-6, err_msg=op)


def test_cache_hit_on_recompile():
    kd = rmsnorm_silu(3, 77, "cpp_fused_cache_probe_py_0")
    a = ind.compile(kd)
    before = ind.cache_stats()
    b = ind.compile(kd)
    after = ind.cache_stats()
    assert after["memory_hits"] == before["memory_hits"] + 1 and after["compiled"] == before["compiled"]
    assert a.hash == b.hash == kd.hash and len(a.hash) == 32


def test_same_body_under_another_name_compiles_once():
    # Note [Kernels keyed by body]: a repeated layer's kernel runs the first one's code
    first = rmsnorm_silu(5, 83, "cpp_fused_layer_py_2")
    repeat = first.renamed("cpp_fused_layer_py_9")
    before = ind.cache_stats()
    a = ind.compile(first)
    b = ind.compile(repeat)
    after = ind.cache_stats()
    assert after["compiled"] + after["disk_hits"] == before["compiled"] + before["disk_hits"] + 1
    assert after["memory_hits"] == before["memory_hits"] + 1
    assert (a.name, b.name) == ("cpp_fused_layer_py_2", "cpp_fused_layer_py_9")
    assert b.hash == repeat.hash != a.hash
    assert "void cpp_fused_layer_py_9(" in b.code and "define void @cpp_fused_layer_py_9" in b.llvm_ir
    x, w = kiln.randn(5, 83), kiln.randn(83)
    out_a, out_b = kiln.empty(5, 83), kiln.empty(5, 83)
    a(x, w, out_a)
    b(x, w, out_b)
    assert kiln.equal(out_a, out_b)


_TOGETHER = """
import json, sys
sys.path.insert(0, {tests!r})
import kiln
from test_inductor_codegen import ind, rmsnorm_silu
kernels = [rmsnorm_silu(3, 71 + i, f"cpp_fused_together_{{i}}") for i in range(4)]
compiled = ind.compile_many(kernels, {threads})
x = (kiln.arange(240.0) / 240 - 0.5).reshape(3, 80)
outs = []
for i, k in enumerate(compiled):
    out = kiln.empty(3, 71 + i)
    k(x[:, :71 + i].contiguous(), x[0, :71 + i].contiguous(), out)
    outs.append(out.tolist())
print(json.dumps({{"stats": ind.cache_stats(), "outs": outs}}))
"""


def _compile_together(cache, threads):
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, KILN_INDUCTOR_CACHE_DIR=str(cache))
    code = _TOGETHER.format(tests=os.path.dirname(__file__), threads=threads)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_kernels_compiled_together_are_cached_together(tmp_path):
    """Note [Kernels compiled together] (codegen/llvm_codegen.cc): the kernels compile_many must
    compile are one module per thread, written once as the group's object, each kernel's key naming
    it (.ref); a fresh process links the group once and finds every kernel there; without the
    group's object it compiles them afresh. Every way, each kernel computes what it does alone."""
    cold = _compile_together(tmp_path, 1)
    assert cold["stats"]["compiled"] == 4 and cold["stats"]["disk_hits"] == 0
    suffixes = sorted(p.suffix for p in tmp_path.iterdir())
    assert suffixes.count(".ref") == 4 and suffixes.count(".o") == 1
    warm = _compile_together(tmp_path, 2)
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["disk_hits"] == 4
    assert warm["outs"] == cold["outs"]
    (group,) = [p for p in tmp_path.iterdir() if p.suffix == ".o"]
    group.unlink()
    again = _compile_together(tmp_path, 2)  # two groups of two now
    assert again["stats"]["compiled"] == 4 and again["stats"]["disk_hits"] == 0
    assert again["outs"] == cold["outs"]
    assert sorted(p.suffix for p in tmp_path.iterdir()).count(".o") == 2
    x = (kiln.arange(240.0) / 240 - 0.5).reshape(3, 80)
    for i, out in enumerate(cold["outs"]):  # and a kernel compiled alone, here, computes the same bits
        alone = kiln.empty(3, 71 + i)
        ind.compile(rmsnorm_silu(3, 71 + i, "cpp_fused_together_alone"))(x[:, :71 + i].contiguous(),
                                                                         x[0, :71 + i].contiguous(), alone)
        assert alone.tolist() == out


@pytest.mark.parametrize("threads", [1, 3])
def test_compile_many(threads):
    kernels = [rmsnorm_silu(2 + i % 3, 59, f"cpp_fused_many_{threads}_{i}") for i in range(7)]
    before = ind.cache_stats()
    compiled = ind.compile_many(kernels, threads)
    after = ind.cache_stats()
    assert [k.name for k in compiled] == [k.name for k in kernels]
    assert after["memory_hits"] - before["memory_hits"] >= 4  # three bodies among seven kernels
    x, w = kiln.randn(4, 59), kiln.randn(59)
    for k, kd in zip(compiled, kernels):
        rows = kd.outer[0]
        got, want = kiln.empty(rows, 59), kiln.empty(rows, 59)
        k(x[:rows], w, got)
        ind.compile(kd.renamed("cpp_fused_many_alone"))(x[:rows], w, want)
        assert kiln.equal(got, want)
    assert ind.compile_many([], threads) == []
    with pytest.raises(ValueError, match="bad name"):
        rmsnorm_silu(2, 61).renamed("bad name")
    with pytest.raises(TypeError):
        ind.compile_many([rmsnorm_silu(2, 61), "kernel"], threads)


def test_bad_arguments_are_refused():
    k = ind.compile(pointwise_kernel("cpp_fused_add_mul_relu_0", 4, 6))
    with pytest.raises(TypeError, match="expected 3 buffers"):
        k(kiln.randn(6, 4), kiln.randn(6))
    with pytest.raises(TypeError, match="in_ptr1.*float32.*float64"):
        k(kiln.randn(6, 4), kiln.randn(6, dtype=kiln.float64), kiln.empty(4, 6))
    with pytest.raises(ValueError, match="out_ptr0.*too small"):
        k(kiln.randn(6, 4), kiln.randn(6), kiln.empty(4, 5))
    with pytest.raises(ValueError, match="in_ptr0.*too small"):
        k(kiln.randn(6, 4)[1:], kiln.randn(6), kiln.empty(4, 6))
    with pytest.raises(TypeError, match="kiln.Tensor"):
        k("x", kiln.randn(6), kiln.empty(4, 6))


def test_written_buffers_must_not_alias_the_others():
    # Note [Buffers do not alias]: the kernel is optimised on the promise that out_ptr0 shares no
    # memory with its inputs, so a call that breaks it raises and leaves the output untouched
    k = ind.compile(pointwise_kernel("cpp_fused_add_mul_relu_0", 4, 6))
    base = kiln.randn(48)
    xt, out = base[:24].view(6, 4), base[20:44].view(4, 6)  # overlapping ranges of one storage
    before = base.clone()
    with pytest.raises(ValueError, match="out_ptr0.*shares memory with buffer 0 'in_ptr0'"):
        k(xt, kiln.randn(6), out)
    assert kiln.equal(base, before)
    with pytest.raises(ValueError, match="out_ptr0.*shares memory with buffer 1 'in_ptr1'"):
        k(kiln.randn(6, 4), base[:6], base[4:28].view(4, 6))
    # disjoint parts of one storage, and inputs sharing memory with each other, are fine
    k(base[:24].view(6, 4), base[:6], base[24:48].view(4, 6))
    np.testing.assert_allclose(base[24:48].view(4, 6).numpy(),
                               kiln.relu(before[:24].view(6, 4).t() * 2 + before[:6]).numpy(), rtol=1e-6)


def test_bad_ir_is_refused():
    with pytest.raises(ValueError, match="unknown dtype"):
        pointwise_kernel("k", 2, 2, "f8")
    with pytest.raises(ValueError, match="the CPU code generator has no f16"):
        ind.compile(pointwise_kernel("k", 2, 2, "f16"))  # a dtype of the NVPTX code generator only
    buffers = [("in_ptr0", "f32"), ("in_ptr1", "f32"), ("out_ptr0", "f32")]

    def kernel(stmt):
        return kir.Kernel("k", buffers, [2], [kir.Loop(2, [stmt])])

    with pytest.raises(ValueError, match="buffer index 5"):
        kernel(kir.store(5, *row_index(2), kir.const(1.0, "f32")))
    with pytest.raises(ValueError, match="outer strides"):
        kernel(kir.store(2, 0, [], 1, kir.const(1.0, "f32")))
    with pytest.raises(ValueError, match="accumulator 0 is read before"):
        kernel(kir.store(2, *row_index(2), kir.acc(0)))
    with pytest.raises(ValueError, match="unknown operator 'frobnicate'"):
        kir.op("frobnicate", kir.const(1.0, "f32"))
    with pytest.raises(TypeError, match="'add' takes 2 operands, got 1"):
        kir.op("add", kir.const(1.0, "f32"))
    with pytest.raises(TypeError, match="must be kernel_ir.Expr"):
        kir.op("neg", ("const", 1.0, "f32"))
    with pytest.raises(ValueError, match="unknown reduction 'mean'"):
        kir.reduce(0, "mean", kir.const(1.0, "f32"))
    with pytest.raises(TypeError, match="must be a bool, int or float"):
        kir.const("1", "f32")
    with pytest.raises(OverflowError):
        kir.const(10**400, "f32")
    with pytest.raises(OverflowError):
        kir.const(2**70, "i64")
    with pytest.raises(TypeError):
        ind.compile({"name": "k", "buffers": [], "outer": [], "loops": []})  # the old dicts are gone


def test_expressions_are_values():
    """Expr: == compares structure (hash agrees), repr is the canonical text, which parse_expr and
    Kernel.parse read back; its parts are readable for passes written in Python."""
    a = kir.op("add", kir.load(0, 1, [4], 1), kir.const(1.5, "f32"))
    b = kir.op("add", kir.load(0, 1, [4], 1), kir.const(1.5, "f32"))
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != kir.op("add", kir.load(0, 1, [4], 2), kir.const(1.5, "f32"))
    assert len({a, b}) == 1
    assert repr(a) == "add(L0(1;4,;1),Cf32:0x1.8p+0,)" and kir.parse_expr(repr(a)) == a
    assert (a.kind, a.op, a.args[0].kind, a.args[0].buffer, a.args[0].index) == ("op", "add", "load", 0, (1, [4], 1))
    assert (a.args[1].value, a.args[1].dtype) == (1.5, "f32")
    assert kir.const(True, "bool").value is True and kir.const(3, "i64").value == 3
    assert kir.const(2**62 + 1, "i64").value == 2**62 + 1  # integers stay exact
    assert kir.cast(a, "bf16").dtype == "bf16" and kir.acc(2).acc_id == 2 and kir.index(-1).dim == -1
    assert kir.op("exp", a).cost() == 1 + 4 and kir.cast(a, "f64").cost() == 1 and a.args[0].cost() == 0
    assert kir.op("mul", kir.index(0), a).uses_loop_index() and not a.uses_loop_index()
    nan = kir.const(float("nan"), "f32")
    assert nan == kir.const(float("nan"), "f32") and kir.const(-0.0, "f32") != kir.const(0.0, "f32")


def test_ops_namespace_has_every_operator():
    """kernel_ir.ops.<name>: one constructor per operator, the same Expr as op(name, ...)."""
    x, y = kir.load(0, 0, [], 1), kir.const(2.0, "f32")
    assert kir.ops.add(x, y) == kir.op("add", x, y) and kir.ops.where(x, x, y) == kir.op("where", x, x, y)
    names = [n for n in dir(kir.ops) if not n.startswith("_")]
    assert {"exp", "gelu_backward", "bitwise_not", "lshift", "where"} <= set(names) and len(names) == 67
    for name in names:
        assert getattr(kir.ops, name)(*[x] * _arity(name)).op == name
    with pytest.raises(TypeError, match="'exp' takes 1 operands, got 2"):
        kir.ops.exp(x, y)


def _arity(name):
    """An operator's operand count, as the canonical text's parser checks it."""
    for n in (1, 2, 3):
        try:
            kir.parse_expr(f"{name}({'A0,' * n})")
            return n
        except ValueError:
            pass
    raise AssertionError(name)


def test_element_functions_are_substituted():
    # an element function's operand i is a load of buffer i (Note [Pointwise ops as kernel IR])
    fn = ind.pointwise_ir("aten::mul.Tensor", ["f32", "f32"]).expr
    x, y = kir.load(3, 0, [2], 1), kir.const(2.0, "f32")
    assert kir.substitute(fn, x, y) == kir.op("mul", x, y)
    with pytest.raises(ValueError, match="reads operand 1 of 1"):
        kir.substitute(fn, x)


def test_kernel_text_round_trips():
    k = rmsnorm_silu(4, 16, "cpp_fused_text_0")
    text = str(k)
    assert text.startswith("kernel cpp_fused_text_0\nbuffers in_ptr0:f32 in_ptr1:f32 out_ptr0:f32\nouter 4\nloop 16\n")
    again = kir.Kernel.parse(text)
    assert str(again) == text and again.hash == k.hash
    assert [loop.extent for loop in again.loops] == [16, 16]
    assert [s.kind for s in again.loops[0].stmts] == ["reduce"] and again.loops[0].stmts[0].reduction == "sum"
    assert again.loops[1].stmts[0].buffer == 2 and again.loops[1].stmts[0].index == (0, [16], 1)
    assert "for (int64_t r = 0; r < 16; ++r)" in k.code()
    with pytest.raises(ValueError, match="line 5, column 3: expected store, reduce or welford"):
        kir.Kernel.parse(text.replace("  reduce", "  redux"))


def test_read_through_store():
    """The memory plan's in-place rewrite: the victim's loads read the output, the victim leaves
    the arguments, and the kernel computes the same values over one buffer."""
    k = kir.Kernel.parse("kernel cpp_fused_add_exp_0\nbuffers in_ptr0:f32 in_ptr1:f32 out_ptr0:f32\nouter 3\n"
                         "loop 5\n  store 2(0;5,;1) add(exp(L1(0;5,;1),),L0(0;0,;1),)")
    merged = ind.read_through_store(k, 1, 2)
    assert str(merged).endswith("buffers in_ptr0:f32 out_ptr0:f32\nouter 3\nloop 5\n"
                                "  store 1(0;5,;1) add(exp(L1(0;5,;1),),L0(0;0,;1),)")
    x, b = kiln.randn(3, 5), kiln.randn(5)
    want = kiln.empty(3, 5)
    ind.compile(k)(b, x, want)
    ind.compile(merged)(b, x)  # in place over x
    assert kiln.equal(x, want)
    with pytest.raises(ValueError, match="cannot read buffer 2 through buffer 2"):
        ind.read_through_store(k, 2, 2)


def test_reinterpret_tensor_views_storage_and_checks_bounds():
    """The wrapper's reinterpret_tensor: a view of the same storage (and version counter) with
    the given layout; a layout outside the storage or mismatched lists raise RuntimeError."""
    t = kiln.arange(12.0)
    v = kiln._C._inductor.reinterpret_tensor(t, (3, 2), (1, 3))
    assert v.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert kiln._C._inductor.reinterpret_tensor(t, [2], [1], 10).tolist() == [10.0, 11.0]
    v.add_(1)
    assert t[0].item() == 1.0 and t._version == v._version
    for args in [((13,), (1,)), ((2,), (1,), 11), ((2, 2), (1,))]:
        with pytest.raises(RuntimeError):
            kiln._C._inductor.reinterpret_tensor(t, *args)
    with pytest.raises(TypeError):
        kiln._C._inductor.reinterpret_tensor([1.0], (1,), (1,))
