// python/csrc/arg_parser.h: Python arguments -> a boxed Stack, following an op's schema.
//
// A call names an OpPacket ("add") or one overload ("add.Tensor"). Overloads are tried in
// registration order, first strictly (a Python number only matches Scalar/int/float
// parameters), then leniently (a number may stand for a Tensor, as a wrapped number, like
// `kiln.add(1, x)`). The first overload whose every argument converts wins. When none does,
// TypeError lists what was given and each overload's signature, as PyTorch's parser does.
#pragma once

#include <Python.h>

#include <string>

#include "tensor/dispatcher.h"

namespace kiln::python {

// Converts the vectorcall arguments for `op`; on mismatch returns false and says why.
bool ParseArgs(const Op& op, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, bool lenient,
               Stack& out, std::string* why);

// Parses, dispatches and converts the results; null with a Python error set on failure.
PyObject* CallOverloads(const std::string& display_name, Op* const* overloads, size_t count,
                        PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);

// One value of type `arg` (a schema's argument or result) from a Python object, types as written;
// false (and why) when it is not one (kernels written in Python: python_library.cc).
bool ConvertResult(const Argument& arg, PyObject* o, IValue* out, std::string* why);

// The results left on the stack by `op`, as Python objects (a Tensor, a namedtuple, a tuple...).
PyObject* ReturnsToPython(const Op& op, Stack& stack);

// Python scalars and objects -> C++.
bool ToScalar(PyObject* o, Scalar* out);
PyObject* ScalarToPython(const Scalar& s);

// Runs `fn`, translating kiln exceptions into Python ones; returns null on error.
template <typename F>
PyObject* Guarded(F&& fn);

void TranslateCurrentException();

template <typename F>
PyObject* Guarded(F&& fn) {
  try {
    return fn();
  } catch (...) {
    TranslateCurrentException();
    return nullptr;
  }
}

}  // namespace kiln::python
