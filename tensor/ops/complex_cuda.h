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

// out = |z| (real), -z, or 1 / z (complex), per kind.
enum class ComplexUnary { kAbs, kNeg, kReciprocal };
void ComplexUnaryCUDA(ComplexUnary op, const Tensor& out, const Tensor& z, const char* name);

}  // namespace kiln
