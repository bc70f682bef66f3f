// python/csrc/python_aot_runtime.cc: kiln._C._aot.layout_key, the per-call cache key of
// AOTAutograd's compiled functions (python/kiln/_functorch/aot_autograd.py).
//
// Every call of a compiled function looks its compiled code up by the layout of its arguments
// (sizes, strides, storage offset, dtype, device, requires_grad) and the grad mode. Built in
// Python that key costs several microseconds for a handful of tensors, more than a small fused
// kernel runs; here it is one tuple of ints per tensor.
#include <Python.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"

#include "autograd/grad_mode.h"
#include "python/csrc/python_tensor.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// (dtype, device type, device index, requires_grad, storage offset, sizes..., strides...); None
// for a tensor with symbolic sizes (the caller then builds the key in Python).
PyObject* TensorKey(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->is_symbolic()) Py_RETURN_NONE;
  const int64_t ndim = impl->dim();
  PyObject* key = PyTuple_New(5 + 2 * ndim);
  if (key == nullptr) return nullptr;
  auto set = [&](Py_ssize_t i, long long v) { PyTuple_SET_ITEM(key, i, PyLong_FromLongLong(v)); };
  set(0, static_cast<long long>(impl->dtype()));
  set(1, static_cast<long long>(impl->device().type));
  set(2, impl->device().index);
  set(3, impl->requires_grad() ? 1 : 0);
  set(4, impl->storage_offset());
  const SymDimVector& sizes = impl->sym_sizes();
  const SymDimVector& strides = impl->sym_strides();
  for (int64_t d = 0; d < ndim; ++d) {
    set(5 + d, sizes[d].expect_int());
    set(5 + ndim + d, strides[d].expect_int());
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); ++i) {
    if (PyTuple_GET_ITEM(key, i) == nullptr) {
      Py_DECREF(key);
      return nullptr;
    }
  }
  return key;
}

// Note [Aliased arguments]: a compiled function traced for distinct arguments is wrong for
// arguments that share memory (a tensor passed twice, as tied weights reached through two module
// paths are, or a tensor and a view of it): its gradients were traced per argument and its code
// may write one argument while reading another. So the key also says which arguments share a
// storage: a trailing tuple of (later, earlier, same tensor) triples, present only when some do.
PyObject* AliasingKey(PyObject** items, Py_ssize_t n) {
  // (storage, argument index), sorted: arguments sharing a storage become neighbours, the
  // earliest first. A call of a compiled function passes tens of tensors, so this stays cheap.
  absl::InlinedVector<std::pair<const StorageImpl*, Py_ssize_t>, 32> by_storage;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (IsTensor(items[i])) by_storage.emplace_back(UnpackTensor(items[i]).impl()->storage().get(), i);
  }
  std::sort(by_storage.begin(), by_storage.end());
  absl::InlinedVector<std::pair<Py_ssize_t, Py_ssize_t>, 4> aliases;  // (later, earliest) by index
  for (size_t k = 1, first = 0; k < by_storage.size(); ++k) {
    if (by_storage[k].first != by_storage[k - 1].first) {
      first = k;
      continue;
    }
    if (by_storage[k].first != nullptr) aliases.emplace_back(by_storage[k].second, by_storage[first].second);
  }
  if (aliases.empty()) Py_RETURN_NONE;
  std::sort(aliases.begin(), aliases.end());  // pointer order differs between calls; indices do not
  PyObject* key = PyTuple_New(static_cast<Py_ssize_t>(aliases.size()));
  if (key == nullptr) return nullptr;
  for (size_t k = 0; k < aliases.size(); ++k) {
    const auto [later, earlier] = aliases[k];
    const bool same = UnpackTensor(items[later]).impl() == UnpackTensor(items[earlier]).impl();
    PyObject* triple = Py_BuildValue("(nnO)", later, earlier, same ? Py_True : Py_False);
    if (triple == nullptr) {
      Py_DECREF(key);
      return nullptr;
    }
    PyTuple_SET_ITEM(key, static_cast<Py_ssize_t>(k), triple);
  }
  return key;
}

// layout_key(args) -> (grad_enabled, per-argument key, ..., [aliasing]) or None; args a tuple
// or list. A non-tensor argument keys as (type, value), as the traced program baked it in.
PyObject* AotLayoutKey(PyObject*, PyObject* args) {
  PyObject* seq = PySequence_Fast(args, "layout_key: expected a tuple or list of arguments");
  if (seq == nullptr) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  PyObject* key = PyTuple_New(n + 1);
  if (key == nullptr) {
    Py_DECREF(seq);
    return nullptr;
  }
  PyObject* grad = autograd::GradMode::is_enabled() ? Py_True : Py_False;
  Py_INCREF(grad);
  PyTuple_SET_ITEM(key, 0, grad);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item;
    if (IsTensor(items[i])) {
      item = TensorKey(UnpackTensor(items[i]));
      if (item == Py_None) {  // symbolic: no fast key
        Py_DECREF(key);
        Py_DECREF(seq);
        return item;
      }
    } else {
      item = PyTuple_Pack(2, reinterpret_cast<PyObject*>(Py_TYPE(items[i])), items[i]);
    }
    if (item == nullptr) {
      Py_DECREF(key);
      Py_DECREF(seq);
      return nullptr;
    }
    PyTuple_SET_ITEM(key, i + 1, item);
  }
  PyObject* aliasing = AliasingKey(items, n);
  Py_DECREF(seq);
  if (aliasing == nullptr) {
    Py_DECREF(key);
    return nullptr;
  }
  if (aliasing == Py_None) {
    Py_DECREF(aliasing);
    return key;
  }
  const int resized = _PyTuple_Resize(&key, n + 2);  // steals key on failure
  if (resized < 0) {
    Py_DECREF(aliasing);
    return nullptr;
  }
  PyTuple_SET_ITEM(key, n + 1, aliasing);
  return key;
}

PyMethodDef g_layout_key_def = {"layout_key", AotLayoutKey, METH_O,
                                "The layout cache key of AOTAutograd's compiled functions."};

}  // namespace

void InitAotRuntimeBindings(py::module_& m) {
  m.attr("layout_key") = py::reinterpret_steal<py::object>(PyCFunction_New(&g_layout_key_def, nullptr));
}

}  // namespace kiln::python
