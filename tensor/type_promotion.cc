// tensor/type_promotion.cc: see Note [Weak Python numbers].
#include "tensor/type_promotion.h"

namespace kiln {
namespace {

ScalarType PromoteSkipUndefined(ScalarType a, ScalarType b) {
  if (a == ScalarType::Undefined) return b;
  if (b == ScalarType::Undefined) return a;
  return PromoteTypes(a, b);
}

// `higher` comes from a higher tier than `lower`; lower only wins with a higher category.
ScalarType CombineCategories(ScalarType higher, ScalarType lower) {
  if (IsComplex(higher)) return higher;
  // a complex lower tier keeps a floating higher tier's width: float32 tensor * 1j is complex64
  if (IsComplex(lower)) return IsFloating(higher) ? ToComplexType(higher) : lower;
  if (IsFloating(higher)) return higher;
  if (higher == ScalarType::Bool || IsFloating(lower)) return PromoteSkipUndefined(higher, lower);
  if (higher != ScalarType::Undefined) return higher;
  return lower;
}

ScalarType WeakType(ScalarType t) {
  return IsFloating(t) ? GetDefaultDtype() : IsComplex(t) ? ToComplexType(GetDefaultDtype()) : t;
}

}  // namespace

void ResultTypeState::Update(const Tensor& t) {
  if (!t.defined()) return;
  if (t->is_wrapped_number()) {
    wrapped_result = PromoteSkipUndefined(wrapped_result, WeakType(t.dtype()));
  } else if (t.dim() == 0) {
    zero_result = PromoteSkipUndefined(zero_result, t.dtype());
  } else {
    dim_result = PromoteSkipUndefined(dim_result, t.dtype());
  }
}

void ResultTypeState::Update(const Scalar& s) {
  wrapped_result = PromoteSkipUndefined(wrapped_result, s.dtype());
}

ScalarType ResultTypeState::Result() const {
  return CombineCategories(dim_result, CombineCategories(zero_result, wrapped_result));
}

ScalarType ResultType(const Tensor& a, const Tensor& b) {
  ResultTypeState s;
  s.Update(a);
  s.Update(b);
  return s.Result();
}

ScalarType ResultType(const Tensor& a, const Scalar& b) {
  ResultTypeState s;
  s.Update(a);
  s.Update(b);
  return s.Result();
}

}  // namespace kiln
