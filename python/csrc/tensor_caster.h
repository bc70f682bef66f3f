// python/csrc/tensor_caster.h: pybind11 conversion between kiln.Tensor objects and kiln::Tensor,
// for the pybind11-bound helpers (the hot op path uses the raw TensorBase type instead).
#pragma once

#include <pybind11/pybind11.h>

#include "python/csrc/python_tensor.h"

namespace pybind11::detail {

template <>
struct type_caster<kiln::Tensor> {
  PYBIND11_TYPE_CASTER(kiln::Tensor, const_name("kiln.Tensor"));
  bool load(handle src, bool) {
    if (!src || !kiln::python::IsTensor(src.ptr())) return false;
    value = kiln::python::UnpackTensor(src.ptr());
    return value.defined();
  }
  static handle cast(const kiln::Tensor& t, return_value_policy, handle) { return kiln::python::WrapTensor(t); }
};

}  // namespace pybind11::detail
