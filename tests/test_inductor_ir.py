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
