"""Decompositions read off the registry's element functions (Note [Pointwise ops as kernel IR] in
tensor/ops/pointwise_ir.h): a pointwise op whose element function the registry gives as kernel IR,
and which no decomposition here spells out by hand, decomposes into the core aten op of each IR
operator of that function, computed in the op's opmath dtype (float32 for float16/bfloat16) and
converted to the op's result dtype once, as its eager kernel stores it. So a new row of a
pointwise family needs no decomposition of its own (special_ndtr: (1 + erf(x / sqrt 2)) / 2).
"""

import functools

import kiln
from kiln import _C
from kiln._decomp import decomposition_table, register_decomposition
from kiln._decomp.decompositions import pw_opmath, scalar, to_dtype
from kiln._ops import overload_named

aten = kiln.ops.aten

_DTYPES = {"f32": kiln.float32, "f64": kiln.float64, "i64": kiln.int64, "i32": kiln.int32, "bool": kiln.bool,
           "bf16": kiln.bfloat16, "f16": kiln.float16, "i16": kiln.int16, "i8": kiln.int8, "u8": kiln.uint8}
_IR_DTYPE = {v: k for k, v in _DTYPES.items()}


@functools.lru_cache(maxsize=None)
def _core_op(operator):
    """The core aten op computing a kernel IR operator, from the registry (CoreOpOf in
    tensor/ops/pointwise_ir.h), or None."""
    full = _C._inductor.core_op_of(operator)
    return None if full is None else overload_named(full)


def _evaluate(expr, operands, like):
    """The element function (a kernel_ir.Expr whose operand i is a load of buffer i) over tensors."""
    kind = expr.kind
    if kind == "load":
        return operands[expr.buffer]
    if kind == "const":
        return scalar(expr.value, like, dtype=_DTYPES[expr.dtype])
    if kind == "cast":
        return to_dtype(_evaluate(expr.args[0], operands, like), _DTYPES[expr.dtype])
    return _core_op(expr.op)(*(_evaluate(e, operands, like) for e in expr.args))


def _uses_only_core_operators(expr):
    if expr.kind in ("load", "const"):
        return True
    if expr.kind == "cast":
        return _uses_only_core_operators(expr.args[0])
    return expr.kind == "op" and _core_op(expr.op) is not None and all(_uses_only_core_operators(e) for e in expr.args)


def _decomposition(full_name):
    @pw_opmath  # float16/bfloat16 computed in float32, rounded once
    def decompose(*operands):
        function = _C._inductor.pointwise_ir(full_name, [_IR_DTYPE[t.dtype] for t in operands])
        compute = _DTYPES[function.compute]
        result = _evaluate(function.expr, [to_dtype(t, compute) for t in operands], operands[0])
        # the result dtype eager gives: compute's, or bool for predicates
        return result if result.dtype == kiln.bool else to_dtype(result, compute)

    return decompose


def _register():
    for full in _C._inductor.pointwise_ops():
        op = overload_named(full)
        if kiln.Tag.core in op.tags or op in decomposition_table or "(Tensor self) ->" not in str(op._schema):
            continue  # unary ops: the binary ones' numbers and alpha are not tensors
        if _uses_only_core_operators(_C._inductor.pointwise_ir(full, ["f32"]).expr):
            register_decomposition(op)(_decomposition(full))


_register()
