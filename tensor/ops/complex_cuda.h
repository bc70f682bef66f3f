// tensor/ops/complex_cuda.h: complex arithmetic on CUDA (complex_cuda.cc, Note [Complex on CUDA]),
// called by binary.cc and unary.cc after their checks, for complex compute types.
#pragma once

#include "tensor/scalar.h"
#include "tensor/tensor_impl.h"

namespace kiln {

enum class ComplexBinary { kAdd, kSub, kMul, kDiv };

// out (complex, allocated) = a op alpha * b (alpha: add/sub), a and b complex or real tensors, or b
// a number; broadcast to out's shape.
void ComplexBinaryCUDA(ComplexBinary op, const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* b_scalar,
                       const Scalar& alpha, const char* name);

// out = f(z): |z| (real); the predicates (bool: either part NaN / infinite, both finite, z == 0);
// the rest complex, as the CPU's std::complex functions (glibc's formulas).
enum class ComplexUnary {
  kAbs, kNeg, kReciprocal, kExp, kLog, kSqrt, kRsqrt, kSigmoid, kTanh, kSin, kCos, kTan, kSinh, kCosh,
  kIsnan, kIsinf, kIsfinite, kLogicalNot
};
void ComplexUnaryCUDA(ComplexUnary op, const Tensor& out, const Tensor& z, const char* name);

// out (bool) = (a == b), or (a != b) when `not_equal`, compared in `compute` (complex); b a tensor
// or, when null, the number b_scalar.
void ComplexEqualCUDA(bool not_equal, const Tensor& out, const Tensor& a, const Tensor* b, const Scalar* b_scalar,
                      ScalarType compute, const char* name);

// A complex (or real) operand of a select: a tensor or, when `tensor` is null, a number.
struct ComplexOperand {
  const Tensor* tensor = nullptr;
  Scalar number;
};
// out (complex) = where(cond, a, b), broadcast to out's shape (masked_fill_ is where(mask, value, self)).
void ComplexWhereCUDA(const Tensor& out, const Tensor& cond, const ComplexOperand& a, const ComplexOperand& b,
                      const char* name);

}  // namespace kiln
