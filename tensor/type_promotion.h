// tensor/type_promotion.h: the dtype an op computes in, from its tensor and number operands.
//
// Note [Weak Python numbers]: operands fall in three tiers, dimensioned tensors, 0-dim tensors,
// and Python numbers (Scalars or wrapped-number tensors). A lower tier only changes the result
// when it belongs to a higher category (bool < integer < floating < complex): int32 tensor + 2.5 -> float32
// (the default dtype), float16 tensor + float64 0-dim tensor -> float16, int8 + 1000 -> int8.
#pragma once

#include "tensor/scalar.h"
#include "tensor/tensor_impl.h"

namespace kiln {

struct ResultTypeState {
  ScalarType dim_result = ScalarType::Undefined;
  ScalarType zero_result = ScalarType::Undefined;
  ScalarType wrapped_result = ScalarType::Undefined;

  void Update(const Tensor& t);
  void Update(const Scalar& s);
  ScalarType Result() const;
};

ScalarType ResultType(const Tensor& a, const Tensor& b);
ScalarType ResultType(const Tensor& a, const Scalar& b);

}  // namespace kiln
