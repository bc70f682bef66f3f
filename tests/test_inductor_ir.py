"""kiln._C._inductor.ir from Python (inductor/ir, Note [Bodies]): Affine indices as the lowerings
use them, bodies traced once and placed into kernels by a reader, and typed errors for bad input."""

import pytest

from kiln._C._inductor import ir
from kiln._C._inductor import kernel_ir as kir
from kiln._C._inductor.kernel_ir import ops

A = ir.Affine


def test_affine_arithmetic_as_the_lowerings_use_it():
    a = A.var(0).scale(3) + A.var(-1) + 2
    assert a.offset == 2 and a.coeffs == {-1: 1, 0: 3}
    assert (1 + a).offset == 3 and (a + A.var(0).scale(-3)).coeffs == {-1: 1}
    assert A(4, {1: 0}).is_const() and not a.is_const()
    assert a.ir_index(2) == (2, [3, 0], 1)
    assert A.var(2) == A(0, {2: 1}) and hash(A.var(2)) == hash(A(0, {2: 1}))
    assert repr(a) == "Affine(2 + r + 3*d0)"
    with pytest.raises(ValueError, match="variable d2 of a kernel with 2 outer loops"):
        A.var(2).ir_index(2)
    assert a.__add__("x") is NotImplemented


def test_a_body_is_traced_once_and_placed_by_its_reader():
    t = ir.Tracer()
    x = t.read(7, [A.var(0), A.var(1)])
    row = t.read(3, [A.var(1)])
    body = t.finish(ops.add(ops.mul(x, row), t.read(7, [A.var(0), A.var(1)])))
    assert body.read_values == [7, 3], "each distinct read once, in order"
    asked = []

    def reader(value, idx, as_of):
        asked.append((value, len(idx), idx[0], as_of))
        return idx.load(len(asked) - 1, [8, 1] if value == 7 else [1], 1)

    # placed with d0 walking the kernel's outer loop and d1 its inner loop from 2 on
    expr = ir.instantiate(body, [A.var(0), A.var(-1) + 2], reader, as_of=4)
    assert [(v, n, repr(i), s) for v, n, i, s in asked] == [(7, 2, "Affine(d0)", 4), (3, 1, "Affine(2 + r)", 4)]
    want = ops.add(ops.mul(kir.load(0, 2, [8], 1), kir.load(1, 2, [0], 1)), kir.load(0, 2, [8], 1))
    assert str(expr) == str(want)
    assert t.finish(kir.const(1.0, "f32")).read_values == [], "a tracer is empty again after finish"


def test_inline_composes_indices_and_carries_the_snapshot():
    t = ir.Tracer()
    inner = t.finish(ops.mul(t.read(5, [A.var(0).scale(2)]), kir.index(0)))
    outer = ir.Tracer()
    placed = outer.inline(inner, [A.var(1) + 1], as_of=3)
    body = outer.finish(placed)
    assert "read0 = v5[2 + 2*d1] as of 3" in str(body)


def test_bad_input_is_a_typed_error():
    t = ir.Tracer()
    body = t.finish(t.read(1, [A.var(-1)]))
    with pytest.raises(ValueError, match="the reduced variable r"):
        ir.instantiate(body, [A.var(0)], lambda v, idx, s: kir.const(0.0, "f32"))
    with pytest.raises(TypeError, match="a reader's result must be a kernel_ir.Expr"):
        ir.instantiate(body, [A.var(0)], lambda v, idx, s: 1.0, reduced=A.var(-1))
    with pytest.raises(TypeError, match="Tracer.finish's expression must be a kernel_ir.Expr"):
        t.finish("x")
    with pytest.raises(IndexError):
        ir.Indices([A.var(0)])[3]


# --- values, their scheduler and pointwise lowering from Python (Note [Values]) --------------------
import kiln  # noqa: E402
from kiln._C._inductor import lowering, scheduler  # noqa: E402
from kiln._inductor.lowering import Fallback  # noqa: E402


def test_values_are_typed_objects_traced_by_their_constructors():
    x = ir.Buffer("x", kiln.float32, [4, 8], [8, 1])
    assert x.origin == "input" and x.is_contiguous() and repr(x) == "x: kiln.float32 [4, 8]"
    xt = ir.Buffer(None, kiln.float32, [8, 4], [1, 8], origin=x)
    assert xt.origin is x and xt.name is None and not xt.is_contiguous()
    e = ir.Pointwise(kiln.float32, [8, 4], lambda ctx, idx: ops.exp(ctx.load(xt, idx)), {"exp"})
    assert e.inputs == (xt,) and e.ops == {"exp"} and e.space is None and e.squeeze_of is None
    assert "read0 = v%d[d0, d1]" % xt.handle in str(e.body)
    assert ir.value_of(e.handle) is e
    s = ir.Reduction(kiln.float32, [8], 4, "sum", lambda ctx, kept, r: ctx.read(e, [kept[0], r]), {"sum"}, [8, 1],
                     finish=lambda acc: ops.div(acc, kir.const(4.0, "f32")))
    s.axis = 1
    assert s.space == ir.LoopSpace([8], 4, 1) and s.kind == "sum" and s.inputs == (e,)
    assert str(s.finished(kir.acc(2))) == str(ops.div(kir.acc(2), kir.const(4.0, "f32")))
    ir.make_group([e, s])
    assert set(v.handle for v in e.group) == {e.handle, s.handle}
    e.add_origin(3, "line 3")
    assert e.all_origins() == {(3, "line 3")}


def test_bad_values_are_typed_errors():
    with pytest.raises(TypeError, match="must be a kiln.dtype"):
        ir.Buffer("x", "float32", [2], [1])
    with pytest.raises(ValueError, match='origin must be "input", "kernel" or the Buffer it views'):
        ir.Buffer("x", kiln.float32, [2], [1], origin="extern")
    with pytest.raises(ValueError, match="1 strides for 2 dimensions"):
        ir.Buffer("x", kiln.float32, [2, 2], [1])
    with pytest.raises(TypeError, match="a traced function's result must be a kernel_ir.Expr"):
        ir.Pointwise(kiln.float32, [2], lambda ctx, idx: 1.0, set())
    with pytest.raises(NotImplementedError, match="kiln.float16 has no kernel type"):
        ir.kernel_dtype(kiln.float16)


def test_the_scheduler_forms_one_kernel_for_a_value_and_what_it_reads():
    sched = scheduler.Scheduler()
    x = ir.Buffer("x", kiln.float32, [4, 8], [8, 1])
    y = lowering.lower_elementwise("aten::mul.Tensor", kiln.float32, [4, 8], [x, 2.0])
    z = lowering.lower_elementwise("aten::relu", kiln.float32, [4, 8], [y])
    assert z.ops == {"mul", "relu"}
    assert scheduler.cheap_to_recompute(y, sched.state) and not scheduler.probe(z).reads_reduction
    out = sched.realize(z)
    steps = sched.take_steps()
    assert [s.kind for s in steps] == ["alloc", "kernel"] and steps[0].buf is out
    kernel = steps[1].kernel
    assert kernel.ir.name == "cpp_fused_mul_relu_0" and kernel.buffers[0] is x and kernel.buffers[1] is out
    assert sched.state.now[z] is out and z in sched.state.now and y not in sched.state.now
    assert sched.take_steps() == [], "taken once"


def test_pointwise_lowering_falls_back_where_eager_must_run():
    x = ir.Buffer("x", kiln.int64, [3], [1])
    with pytest.raises(Fallback, match="of integers by 0"):
        lowering.lower_elementwise("aten::floor_divide", kiln.int64, [3], [x, 0])
    with pytest.raises(Fallback, match="argument of type str"):
        lowering.make_pointwise("add", kiln.int64, [3], [x, "2"], ops.add)
    assert lowering.one_element_in_float(kiln.bfloat16, 2.0) == [None, "f32"]
    assert lowering.one_element_in_float(kiln.float32, 2.0) is None
