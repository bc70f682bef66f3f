// python/csrc/arg_parser.cc: schema-driven conversion of Python arguments and results.
#include "python/csrc/arg_parser.h"

#include <pybind11/pybind11.h>

#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "fx/symbolic_context.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_symbolic.h"
#include "python/csrc/python_tensor.h"
#include "tensor/fake_tensor.h"
#include "tensor/ops/common.h"

namespace kiln::python {
namespace {

bool IsInt(PyObject* o) {
  if (PyLong_Check(o)) return !PyBool_Check(o);
  // numpy integers and other __index__ objects (not floats, not tensors).
  if (IsTensor(o)) {
    const Tensor& t = UnpackTensor(o);
    return t.dim() == 0 && IsIntegral(t.dtype(), false) && t->has_storage();
  }
  return Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_index && !PyFloat_Check(o);
}

int64_t AsInt(PyObject* o) {
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) throw Error("Overflow when unpacking long");
    return v;
  }
  PyObject* idx = PyNumber_Index(o);
  if (!idx) { PyErr_Clear(); throw TypeError("expected an integer"); }
  long long v = PyLong_AsLongLong(idx);
  Py_DECREF(idx);
  return v;
}

bool IsFloatLike(PyObject* o) {
  return PyFloat_Check(o) || IsInt(o) ||
         (!IsTensor(o) && !PyBool_Check(o) && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float);
}

std::string TypeNameOf(PyObject* o) {
  if (IsTensor(o)) return "Tensor";
  if (o == Py_None) return "NoneType";
  if (IsDtype(o)) return "dtype";
  return Py_TYPE(o)->tp_name;
}

// Sequence of ints (tuple, list, kiln.Size) -> SymInt list; false when o is not one.
bool ToIntList(PyObject* o, std::vector<SymInt>* out) {
  if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  out->clear();
  out->reserve(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (IsSymIntObject(items[i])) { out->push_back(UnpackSymInt(items[i])); continue; }  // kept symbolic
    if (!IsInt(items[i])) return false;
    out->emplace_back(AsInt(items[i]));
  }
  return true;
}

Device ToDevice(PyObject* o) {
  if (PyUnicode_Check(o)) return Device::Parse(PyUnicode_AsUTF8(o));
  if (IsInt(o)) return Device(DeviceType::CUDA, static_cast<int16_t>(AsInt(o)));
  PyObject* s = PyObject_Str(o);
  if (!s) { PyErr_Clear(); throw TypeError("expected a device"); }
  std::string text = PyUnicode_AsUTF8(s);
  Py_DECREF(s);
  return Device::Parse(text);
}

bool IsDeviceLike(PyObject* o) {
  if (PyUnicode_Check(o)) return true;
  static PyObject* device_type = nullptr;
  if (!device_type) {
    PyObject* mod = PyImport_ImportModule("kiln._device");
    if (!mod) { PyErr_Clear(); return false; }
    device_type = PyObject_GetAttrString(mod, "device");
    Py_DECREF(mod);
    if (!device_type) { PyErr_Clear(); return false; }
  }
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(device_type));
}

// Enum sentinels (kiln.strided, kiln.contiguous_format) carry an int `_kiln_enum`.
bool ToEnum(PyObject* o, const char* kind, int64_t* out) {
  PyObject* k = PyObject_GetAttrString(o, "_kiln_enum_kind");
  if (!k) { PyErr_Clear(); return false; }
  bool ok = PyUnicode_Check(k) && std::string(PyUnicode_AsUTF8(k)) == kind;
  Py_DECREF(k);
  if (!ok) return false;
  PyObject* v = PyObject_GetAttrString(o, "_kiln_enum");
  if (!v) { PyErr_Clear(); return false; }
  *out = PyLong_AsLongLong(v);
  Py_DECREF(v);
  return true;
}

// How far a parse may bend PyTorch's argument rules (see CallOverloads).
enum class Conversion {
  kExact,               // types as written
  kNumbersAsTensors,    // kiln's second pass: a Python number binds to a Tensor parameter
  kTensorsAsScalars,    // PyTorch's rule: a 0-d tensor not requiring grad binds to a Scalar (its item)
  kCheckTorchScalars,   // check only: kTensorsAsScalars without reading the value
  kCheckAnyTensorScalar // check only: any tensor in a Scalar slot
};

// One argument. Returns false (and sets *why) when `o` cannot be `arg`.
bool ConvertArg(const Argument& arg, PyObject* o, Conversion mode, IValue* out, std::string* why) {
  const bool lenient = mode == Conversion::kNumbersAsTensors;
  if (o == Py_None) {
    if (arg.optional || arg.kind == TypeKind::Generator) { *out = IValue(); return true; }
    *why = "argument '" + arg.name + "' must be " + TypeKindName(arg.kind) + ", not NoneType";
    return false;
  }
  auto fail = [&]() {
    *why = "argument '" + arg.name + "' (position) must be " + TypeKindName(arg.kind) + ", not " + TypeNameOf(o);
    return false;
  };
  switch (arg.kind) {
    case TypeKind::Tensor:
      if (IsTensor(o)) { *out = IValue(UnpackTensor(o)); return true; }
      if (lenient && (PyLong_Check(o) || PyFloat_Check(o) || PyBool_Check(o))) {
        Scalar s;
        ToScalar(o, &s);
        *out = IValue(WrapScalar(s, Device(DeviceType::CPU)));
        return true;
      }
      return fail();
    case TypeKind::Scalar: {
      Scalar s;
      if (IsTensor(o) && mode != Conversion::kExact && mode != Conversion::kNumbersAsTensors) {
        const Tensor& t = UnpackTensor(o);
        if (mode != Conversion::kCheckAnyTensorScalar && (t.dim() != 0 || t->requires_grad())) return fail();
        // A check parse's value is never used; a fake tensor has none to read.
        *out = mode == Conversion::kTensorsAsScalars ? IValue(ItemScalar(arg.name.c_str(), t)) : IValue();
        return true;
      }
      if (IsTensor(o) || !ToScalar(o, &s)) return fail();
      *out = IValue(s);
      return true;
    }
    case TypeKind::Int:
      if (!IsInt(o)) return fail();
      *out = IValue(AsInt(o));
      return true;
    case TypeKind::SymInt:
      if (IsSymIntObject(o)) { *out = IValue(UnpackSymInt(o)); return true; }
      if (!IsInt(o)) return fail();
      *out = IValue(SymInt(AsInt(o)));
      return true;
    case TypeKind::Float:
      if (!IsFloatLike(o) || IsTensor(o)) return fail();
      *out = IValue(PyFloat_AsDouble(o));
      if (PyErr_Occurred()) { PyErr_Clear(); return fail(); }
      return true;
    case TypeKind::Bool:
      if (!PyBool_Check(o)) return fail();
      *out = IValue(o == Py_True);
      return true;
    case TypeKind::Str:
      if (!PyUnicode_Check(o)) return fail();
      *out = IValue(std::string(PyUnicode_AsUTF8(o)));
      return true;
    case TypeKind::IntList:
    case TypeKind::SymIntList: {
      std::vector<SymInt> v;
      if (IsSymIntObject(o) && arg.list_size > 0) {
        v.assign(arg.list_size, UnpackSymInt(o));
      } else if (IsInt(o) && arg.list_size > 0) {
        v.assign(arg.list_size, SymInt(AsInt(o)));
      } else if (!ToIntList(o, &v)) {
        return fail();
      }
      *out = IValue(std::move(v));
      return true;
    }
    case TypeKind::FloatList: {
      if (!PyTuple_Check(o) && !PyList_Check(o)) {
        if (IsFloatLike(o) && arg.list_size > 0) {
          *out = IValue(std::vector<double>(arg.list_size, PyFloat_AsDouble(o)));
          return true;
        }
        return fail();
      }
      std::vector<double> v;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        PyObject* it = PySequence_Fast_ITEMS(o)[i];
        if (!IsFloatLike(it)) return fail();
        v.push_back(PyFloat_AsDouble(it));
      }
      *out = IValue(std::move(v));
      return true;
    }
    case TypeKind::BoolList: {
      if (!PyTuple_Check(o) && !PyList_Check(o)) return fail();
      std::vector<bool> v;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        PyObject* it = PySequence_Fast_ITEMS(o)[i];
        if (!PyBool_Check(it)) return fail();
        v.push_back(it == Py_True);
      }
      *out = IValue(std::move(v));
      return true;
    }
    case TypeKind::TensorList: {
      if (!PyTuple_Check(o) && !PyList_Check(o)) return fail();
      std::vector<Tensor> v;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        PyObject* it = PySequence_Fast_ITEMS(o)[i];
        if (!IsTensor(it)) {
          *why = "expected Tensor as element " + std::to_string(i) + " in argument '" + arg.name + "', but got " +
                 TypeNameOf(it);
          return false;
        }
        v.push_back(UnpackTensor(it));
      }
      *out = IValue(std::move(v));
      return true;
    }
    case TypeKind::OptionalTensorList: {
      if (!PyTuple_Check(o) && !PyList_Check(o)) return fail();
      OptionalTensorList v;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
        PyObject* it = PySequence_Fast_ITEMS(o)[i];
        if (it == Py_None) v.emplace_back(std::nullopt);
        else if (IsTensor(it)) v.emplace_back(UnpackTensor(it));
        else return fail();
      }
      *out = IValue(std::move(v));
      return true;
    }
    case TypeKind::ScalarType:
      if (!IsDtype(o)) {
        // Python types as dtypes: float -> float64, int -> int64, bool -> bool (as PyTorch).
        if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) { *out = IValue(ScalarType::Float64); return true; }
        if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) { *out = IValue(ScalarType::Int64); return true; }
        if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) { *out = IValue(ScalarType::Bool); return true; }
        return fail();
      }
      *out = IValue(reinterpret_cast<PyDtype*>(o)->scalar_type);
      return true;
    case TypeKind::Device:
      if (!IsDeviceLike(o) && !IsInt(o)) return fail();
      *out = IValue(ToDevice(o));
      return true;
    case TypeKind::Layout: {
      int64_t v;
      if (!ToEnum(o, "layout", &v)) return fail();
      *out = IValue(static_cast<Layout>(v));
      return true;
    }
    case TypeKind::MemoryFormat: {
      int64_t v;
      if (!ToEnum(o, "memory_format", &v)) return fail();
      *out = IValue(static_cast<MemoryFormat>(v));
      return true;
    }
    case TypeKind::Generator: {
      PyObject* cap = PyObject_GetAttrString(o, "_cdata");
      if (!cap) { PyErr_Clear(); return fail(); }
      auto* g = static_cast<Generator*>(PyCapsule_GetPointer(cap, "kiln.Generator"));
      Py_DECREF(cap);
      if (!g) { PyErr_Clear(); return fail(); }
      *out = IValue(*g);
      return true;
    }
  }
  return fail();
}

}  // namespace

bool ConvertResult(const Argument& arg, PyObject* o, IValue* out, std::string* why) {
  return ConvertArg(arg, o, Conversion::kExact, out, why);
}

bool ToScalar(PyObject* o, Scalar* out) {
  if (PyBool_Check(o)) { *out = Scalar(o == Py_True); return true; }
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) {
      // PyTorch's Scalar holds an int of int64 or uint64 (-2^63 .. 2^64 - 1), and Python's
      // OverflowError reaches the user for any other ("int too big to convert")
      unsigned long long u = PyLong_AsUnsignedLongLong(o);
      if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        PyObject* text = value ? PyObject_Str(value) : nullptr;
        std::string message = text ? PyUnicode_AsUTF8(text) : "int too big to convert";
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(trace);
        throw OverflowError(message);
      }
      *out = Scalar(static_cast<double>(u));
      return true;
    }
    *out = Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_Check(o)) { *out = Scalar(PyFloat_AsDouble(o)); return true; }
  if (PyComplex_Check(o)) {
    *out = Scalar(std::complex<double>(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)));
    return true;
  }
  if (IsTensor(o)) return false;
  // numpy scalars: integers through __index__, floats through __float__.
  if (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_index) { *out = Scalar(AsInt(o)); return true; }
  if (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {
    double d = PyFloat_AsDouble(o);
    if (PyErr_Occurred()) { PyErr_Clear(); return false; }
    *out = Scalar(d);
    return true;
  }
  return false;
}

PyObject* ScalarToPython(const Scalar& s) {
  if (s.is_bool()) return PyBool_FromLong(s.to_bool());
  if (s.is_integral()) return PyLong_FromLongLong(s.to_int());
  if (s.is_complex()) return PyComplex_FromDoubles(s.to_complex().real(), s.to_complex().imag());
  return PyFloat_FromDouble(s.to_double());
}

// `implicit_none`, when given, is set when an optional parameter without a default was left out
// and bound to None: PyTorch's parser requires such a parameter (`sum.dim_IntList`'s dim), so an
// overload that needs no such binding wins (x.sum() is sum.default, as in PyTorch).
bool ParseArgs(const Op& op, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Conversion lenient,
               Stack& out, std::string* why, bool* implicit_none = nullptr) {
  if (implicit_none) *implicit_none = false;
  const auto& params = op.schema().arguments;
  const size_t np = params.size();
  out.clear();
  out.resize(np);
  absl::InlinedVector<bool, 16> filled(np, false);
  // Positional arguments.
  Py_ssize_t ai = 0;
  size_t pi = 0;
  for (; ai < nargs; ++pi) {
    if (pi >= np || params[pi].kwarg_only) {
      *why = op.base_name() + "() takes " + std::to_string(pi) + " positional arguments but " +
             std::to_string(nargs) + " were given";
      return false;
    }
    const Argument& p = params[pi];
    PyObject* o = args[ai];
    // Varargs sizes: x.view(2, 3), kiln.zeros(2, 3), x.permute(1, 0).
    if ((p.kind == TypeKind::IntList || p.kind == TypeKind::SymIntList) && p.list_size < 0 && IsInt(o)) {
      std::vector<SymInt> v;
      while (ai < nargs && IsInt(args[ai])) {
        PyObject* a = args[ai++];
        if (IsSymIntObject(a)) v.push_back(UnpackSymInt(a));  // x.view(x.shape[0] * 2)
        else v.emplace_back(AsInt(a));
      }
      out[pi] = IValue(std::move(v));
      filled[pi] = true;
      continue;
    }
    if (!ConvertArg(p, o, lenient, &out[pi], why)) return false;
    filled[pi] = true;
    ++ai;
  }
  // Keyword arguments.
  if (kwnames) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nk; ++k) {
      const char* name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
      size_t j = 0;
      while (j < np && params[j].name != name) ++j;
      // PyTorch's Python names: `input` for `self`.
      if (j == np && std::string(name) == "input" && np > 0 && params[0].name == "self") j = 0;
      if (j == np) {
        *why = op.base_name() + "() got an unexpected keyword argument '" + name + "'";
        return false;
      }
      if (filled[j]) {
        *why = op.base_name() + "() got multiple values for argument '" + params[j].name + "'";
        return false;
      }
      if (!ConvertArg(params[j], args[nargs + k], lenient, &out[j], why)) return false;
      filled[j] = true;
    }
  }
  // Defaults.
  for (size_t j = 0; j < np; ++j) {
    if (filled[j]) continue;
    if (params[j].default_value) {
      out[j] = *params[j].default_value;
    } else if (params[j].optional) {
      out[j] = IValue();
      if (implicit_none) *implicit_none = true;
    } else {
      *why = op.base_name() + "() missing required argument '" + params[j].name + "'";
      return false;
    }
  }
  return true;
}

namespace {

// The result types of ops with named returns (max.dim -> values, indices): structseqs named
// kiln.return_types.<op>, built once per op, as PyTorch's torch.return_types. A structseq rather
// than a collections.namedtuple because its constructor is C: a namedtuple's __new__ is Python code
// (compiled from "<string>"), so rebuilding a result after a compiled graph ran that frame under
// Dynamo's frame hook. Both are tuples with named fields; a structseq is built from one sequence.
// repr as torch.return_types': one field per line, "kiln.return_types.max(\nvalues=...,\nindices=...)".
PyObject* StructseqRepr(PyObject* self) {
  PyObject* names = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(self)), "__match_args__");
  if (!names) return nullptr;
  std::string text = std::string(Py_TYPE(self)->tp_name) + "(";
  const Py_ssize_t n = PyTuple_GET_SIZE(self);
  for (Py_ssize_t i = 0; i < n && i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* value = PyObject_Repr(PyTuple_GET_ITEM(self, i));
    if (!value) {
      Py_DECREF(names);
      return nullptr;
    }
    text += std::string(i ? ",\n" : "\n") + PyUnicode_AsUTF8(PyTuple_GET_ITEM(names, i)) + "=" + PyUnicode_AsUTF8(value);
    Py_DECREF(value);
  }
  Py_DECREF(names);
  return PyUnicode_FromString((text + ")").c_str());
}

PyObject* ReturnType(const Op& op) {
  static std::unordered_map<const Op*, PyObject*> cache;
  auto it = cache.find(&op);
  if (it != cache.end()) return it->second;
  PyObject* type = nullptr;
  const auto& rets = op.schema().returns;
  bool named = !rets.empty();
  for (const auto& r : rets) named = named && !r.name.empty();
  if (named) {
    // PyStructSequence_NewType keeps pointers to the names and the description: they live as
    // long as the type, which is cached for the life of the process.
    auto* names = new std::vector<std::string>();
    for (const auto& r : rets) names->push_back(r.name);
    names->push_back("kiln.return_types." + op.base_name());
    auto* fields = new PyStructSequence_Field[rets.size() + 1];
    for (size_t i = 0; i < rets.size(); ++i) fields[i] = {(*names)[i].c_str(), nullptr};
    fields[rets.size()] = {nullptr, nullptr};
    auto* desc = new PyStructSequence_Desc{names->back().c_str(), "The named results of a kiln op.", fields,
                                           static_cast<int>(rets.size())};
    type = reinterpret_cast<PyObject*>(PyStructSequence_NewType(desc));
    if (type) {
      reinterpret_cast<PyTypeObject*>(type)->tp_repr = StructseqRepr;
      PyType_Modified(reinterpret_cast<PyTypeObject*>(type));
    } else {
      PyErr_Clear();
    }
  }
  cache[&op] = type;
  return type;
}

// A new reference (the raw-CPython twin of python_fx.h's IValueToPython, for the op call path).
PyObject* IValueToNewReference(const IValue& v) {
  if (v.is_none()) Py_RETURN_NONE;
  if (v.is_tensor()) return WrapTensor(v.to_tensor());
  if (v.is_int()) return PyLong_FromLongLong(v.to_int());
  if (v.is_double()) return PyFloat_FromDouble(v.to_double());
  if (v.is_bool()) return PyBool_FromLong(v.to_bool());
  if (v.is_symint()) return SymIntToPython(v.to_symint());
  if (auto* c = std::get_if<std::complex<double>>(&v.variant())) return PyComplex_FromDoubles(c->real(), c->imag());
  if (v.is_tensor_list()) {
    const auto& l = v.to_tensor_list();
    PyObject* t = PyTuple_New(l.size());
    for (size_t i = 0; i < l.size(); ++i) PyTuple_SET_ITEM(t, i, WrapTensor(l[i]));
    return t;
  }
  if (auto* s = std::get_if<ScalarType>(&v.variant())) {
    PyObject* d = DtypeObject(*s);
    Py_INCREF(d);
    return d;
  }
  throw Error("cannot convert a " + v.type_name() + " result to Python");
}

}  // namespace

PyObject* ReturnsToPython(const Op& op, Stack& stack) {
  const auto& schema = op.schema();
  if (!schema.returns_tuple || schema.returns.empty()) {  // "-> ()" returns None, as PyTorch's ops
    if (stack.empty()) Py_RETURN_NONE;
    return IValueToNewReference(stack[0]);
  }
  PyObject* tuple = PyTuple_New(stack.size());
  for (size_t i = 0; i < stack.size(); ++i) {
    PyObject* item = IValueToNewReference(stack[i]);
    if (!item) { Py_DECREF(tuple); return nullptr; }
    PyTuple_SET_ITEM(tuple, i, item);
  }
  if (PyObject* type = ReturnType(op)) {
    PyObject* result = PyObject_CallOneArg(type, tuple);
    Py_DECREF(tuple);
    return result;
  }
  return tuple;
}

// PyTorch binds Python numbers to Tensor parameters only for the arithmetic ops below
// (should_allow_numbers_as_tensors); kiln's second pass binds them for every op, where PyTorch
// takes the op's Scalar overload instead. The two agree except where that Scalar overload is
// handed a tensor: PyTorch takes a tensor as a Scalar only when it is 0-d and needs no grad, so
// `clamp(x, 0.5, t)` with `t` requiring grad is its TypeError and must be kiln's too.
// Asked on every call: compared in place (a copy of the name and a hash cost 2-3% of `y * z`).
bool AllowsNumbersAsTensors(std::string_view name) {
  static constexpr std::string_view kAllowed[] = {
      "add", "div", "divide", "mul", "multiply", "sub", "subtract", "true_divide", "floor_divide",
      "to", "_to_copy", "copy", "_conj"};
  if (!name.empty() && name.back() == '_') name.remove_suffix(1);
  if (name.size() > 4 && name.substr(name.size() - 4) == "_out") name.remove_suffix(4);
  for (std::string_view allowed : kAllowed)
    if (name == allowed) return true;
  return false;
}

// Note [Numbers in arithmetic]: PyTorch gives some Scalar overloads no Python binding
// (gen_python_functions.py's SKIP_PYTHON_BINDINGS_SIGNATURES, and the rounding-mode and
// floor_divide ones it leaves out the same way): `x + 1` binds add.Tensor with 1 as a wrapped
// number, and a traced graph records `add.Tensor(x, 1)`. kiln does the same while a tracer
// records (make_fx, AOT), so its graphs match PyTorch's. Untraced, the Scalar overload computes the same
// result without a wrapped tensor to make: `x + 1` of 8 elements takes 1.3 us so, 2.7 us through
// add.Tensor (CPU time; tools/bench/scalar_overhead.py). A symbolic number (`x * s`, s a SymInt)
// has no value to wrap: the Scalar overload takes it, last.
bool Traced() {
  const LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
  return tls.included.has(DispatchKey::Tracing) && !tls.excluded.has(DispatchKey::Tracing);
}

bool HiddenFromPython(const Op& op) {
  static const std::unordered_set<std::string> kHidden = {
      "aten::add.Scalar", "aten::add_.Scalar", "aten::sub.Scalar", "aten::sub_.Scalar", "aten::mul.Scalar",
      "aten::mul_.Scalar", "aten::div.Scalar", "aten::div_.Scalar", "aten::div.Scalar_mode",
      "aten::div_.Scalar_mode", "aten::floor_divide.Scalar", "aten::floor_divide_.Scalar"};
  return kHidden.count(op.name()) > 0;
}

bool RefusedByPyTorch(const std::string& name, Op* const* overloads, size_t count, PyObject* const* args,
                      Py_ssize_t nargs, PyObject* kwnames) {
  if (AllowsNumbersAsTensors(name)) return false;
  Stack scratch;
  std::string why;
  auto any_parses = [&](Conversion mode) {
    for (size_t i = 0; i < count; ++i)
      if (ParseArgs(*overloads[i], args, nargs, kwnames, mode, scratch, &why)) return true;
    return false;
  };
  return !any_parses(Conversion::kCheckTorchScalars) && any_parses(Conversion::kCheckAnyTensorScalar);
}

PyObject* CallOverloads(const std::string& display_name, Op* const* overloads, size_t count, PyObject* const* args,
                        Py_ssize_t nargs, PyObject* kwnames) {
  return Guarded([&]() -> PyObject* {
    thread_local Stack stack;
    // A failed parse leaves the arguments it converted in `stack`; they must not outlive this
    // call. Kept, a tensor stayed alive until thread exit, after the interpreter was gone, and a
    // tensor over a Python buffer then released it without an interpreter (segfault at exit).
    struct ClearOnExit {
      Stack& s;
      ~ClearOnExit() { s.clear(); }
    } clear_on_exit{stack};
    std::string why;
    std::vector<std::string> reasons;
    // Pass 0 binds types as written. Outside PyTorch's arithmetic ops, PyTorch's own next step
    // comes first: 0-d tensors stand for Scalars (`clamp(x, -0.5, t)` takes the Scalar overload,
    // and t's dtype takes no part in promotion; on a fake tensor the value read is a graph break,
    // as in PyTorch). Then numbers stand for tensors (PyTorch's rule for the arithmetic ops,
    // kiln's for all where PyTorch has no binding at all), and last 0-d tensors for Scalars.
    const bool arithmetic = AllowsNumbersAsTensors(display_name);
    const Conversion kPasses[] = {Conversion::kExact, Conversion::kTensorsAsScalars, Conversion::kNumbersAsTensors,
                                  Conversion::kTensorsAsScalars};
    // In pass 0 an overload that binds a left-out optional parameter to None only takes the call
    // when no later overload binds without doing so.
    auto call = [&](const Op& op) {
      Stack local = std::move(stack);  // re-entrant: kernels may call back into Python
      stack = Stack();
      op.Call(local);
      return ReturnsToPython(op, local);
    };
    // Traced, the overloads a Python user of PyTorch sees; the hidden ones are tried after them,
    // as written (Note [Numbers in arithmetic]).
    Op* const* shown = overloads;
    size_t n_shown = count;
    std::vector<Op*> reordered;  // shown, then hidden; only made when traced (a call's cost counts)
    if (arithmetic && count > 1 && Traced()) {
      for (size_t i = 0; i < count; ++i) if (!HiddenFromPython(*overloads[i])) reordered.push_back(overloads[i]);
      n_shown = reordered.size();
      for (size_t i = 0; i < count; ++i) if (HiddenFromPython(*overloads[i])) reordered.push_back(overloads[i]);
      shown = reordered.data();
    }
    for (int pass = 0; pass < 4; ++pass) {
      if (pass == 1 && arithmetic) continue;
      if (pass == 2 && RefusedByPyTorch(display_name, overloads, count, args, nargs, kwnames)) break;
      int deferred = -1;
      for (size_t i = 0; i < n_shown; ++i) {
        const Op& op = *shown[i];
        bool implicit = false;
        if (ParseArgs(op, args, nargs, kwnames, kPasses[pass], stack, &why, &implicit)) {
          if (pass != 0 || !implicit) return call(op);
          if (deferred < 0) deferred = static_cast<int>(i);
          why.clear();
        }
        if (pass == 0) reasons.push_back(why);
      }
      if (deferred >= 0 && ParseArgs(*shown[deferred], args, nargs, kwnames, kPasses[pass], stack, &why))
        return call(*shown[deferred]);
    }
    for (size_t i = n_shown; i < count; ++i)
      if (ParseArgs(*shown[i], args, nargs, kwnames, Conversion::kExact, stack, &why)) return call(*shown[i]);
    std::ostringstream msg;
    if (n_shown == 1) {
      msg << display_name << "(): " << reasons[0];
      throw TypeError(msg.str());
    }
    msg << display_name << "() received an invalid combination of arguments - got (";
    for (Py_ssize_t i = 0; i < nargs; ++i) msg << (i ? ", " : "") << TypeNameOf(args[i]);
    if (kwnames) {
      for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(kwnames); ++k)
        msg << (nargs + k ? ", " : "") << PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k)) << "="
            << TypeNameOf(args[nargs + k]);
    }
    msg << "), but expected one of:";
    for (size_t i = 0; i < n_shown; ++i) {
      const auto& s = shown[i]->schema();
      msg << "\n * (";
      bool kw = false;
      for (size_t j = 0; j < s.arguments.size(); ++j) {
        const Argument& a = s.arguments[j];
        if (j) msg << ", ";
        if (a.kwarg_only && !kw) { msg << "*, "; kw = true; }
        msg << a.type_str << " " << a.name;
      }
      msg << ")\n      didn't match because: " << reasons[i];
    }
    throw TypeError(msg.str());
  });
}

// Note [Python errors through the dispatcher]: a kernel written in Python (python_library.cc)
// raises a Python exception, carried through C++ as pybind11's error_already_set; restored here,
// the caller sees the exception the kernel raised, not a RuntimeError naming it.
void TranslateCurrentException() {
  try {
    throw;
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (const NamedError& e) {
    // A RuntimeError subclass defined in Python (GuardOnDataDependentSymNode, ...).
    PyObject* cls = nullptr;
    if (PyObject* mod = PyImport_ImportModule(e.python_module().c_str())) {
      cls = PyObject_GetAttrString(mod, e.python_class().c_str());
      Py_DECREF(mod);
    }
    if (!cls) PyErr_Clear();
    PyErr_SetString(cls ? cls : PyExc_RuntimeError, e.what());
    Py_XDECREF(cls);
  } catch (const IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  } catch (const OverflowError& e) {
    PyErr_SetString(PyExc_OverflowError, e.what());
  } catch (const FakeAssertionError& e) {
    PyErr_SetString(PyExc_AssertionError, e.what());
  } catch (const Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_SetString(PyExc_MemoryError, "kiln: out of memory");
  } catch (const std::exception& e) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

}  // namespace kiln::python
