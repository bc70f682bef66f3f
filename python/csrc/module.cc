// python/csrc/module.cc: the kiln._C extension module: types, registry access, tensors from
// Python data and numpy buffers, generators and global settings.
#include <set>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "init/dispatch_layers.h"
#include "python/csrc/arg_parser.h"
#include "python/csrc/python_dynamo.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/python_subgraph.h"
#include "python/csrc/python_autograd.h"
#include "python/csrc/op_function.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_fake.h"
#include "python/csrc/python_symbolic.h"
#include "python/csrc/python_tensor.h"
#include "runtime/onednn/onednn.h"
#include "runtime/thread_pool.h"
#include "tensor/cpu_capability.h"
#include "tensor/deterministic.h"
#include "tensor/ops/common.h"
#include "tensor/ops/checked_convert.h"
#include "tensor/ops/conv_onednn.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// A factory (PyTorch's gen_python_functions rule): an overload takes tensor options (dtype,
// layout, device, pin_memory) and either no tensor or is a `*_like` function. Its Python
// function takes requires_grad= (kiln/__init__.py's _factory), as torch.zeros does; read from the
// schemas, so no list of factory names is kept.
constexpr int kFactoryBit = 4;
bool IsFactoryPacket(const OpPacket& p) {
  const bool like = p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, "_like") == 0;
  for (const Op* op : p.overloads) {
    bool dtype = false, layout = false, device = false, pin_memory = false, tensor_input = false;
    for (const auto& a : op->schema().arguments) {
      dtype = dtype || a.name == "dtype";
      layout = layout || a.name == "layout";
      device = device || a.name == "device";
      pin_memory = pin_memory || a.name == "pin_memory";
      tensor_input = tensor_input || a.kind == TypeKind::Tensor || a.kind == TypeKind::TensorList;
    }
    if (dtype && layout && device && pin_memory && (!tensor_input || like)) return true;
  }
  return false;
}

// --- kiln.tensor(data): nested sequences of numbers -------------------------------------------

struct DataInfo {
  DimVector shape;
  bool any_complex = false, any_float = false, any_int = false, any_bool = false;
};

// A number of kiln.tensor's data: as an op's Scalar argument, except that an int past int64 is
// taken as a float (torch.tensor(2**70, dtype=float32) holds it; an integer dtype refuses it below).
bool DataScalar(PyObject* o, Scalar* out) {
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) {
      const double d = PyLong_AsDouble(o);
      if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
      *out = Scalar(d);
    } else {
      *out = Scalar(static_cast<int64_t>(v));
    }
    return true;
  }
  return ToScalar(o, out);
}

void Infer(PyObject* o, size_t depth, DataInfo& info) {
  if (IsTensor(o)) {
    const Tensor& t = UnpackTensor(o);
    KILN_CHECK_VALUE(t.dim() == 0 || depth == 0, "only one element tensors can be converted to Python scalars");
    if (IsComplex(t.dtype())) info.any_complex = true;
    else if (IsFloating(t.dtype())) info.any_float = true;
    else if (t.dtype() == ScalarType::Bool) info.any_bool = true;
    else info.any_int = true;
    return;
  }
  if (PyUnicode_Check(o)) throw ValueError("too many dimensions 'str'");
  if (PyBool_Check(o)) { info.any_bool = true; return; }
  if (PyLong_Check(o)) { info.any_int = true; return; }
  if (PyFloat_Check(o)) { info.any_float = true; return; }
  if (PyComplex_Check(o)) { info.any_complex = true; return; }
  if (PyList_Check(o) || PyTuple_Check(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (depth == info.shape.size()) info.shape.push_back(n);
    else
      KILN_CHECK_VALUE(info.shape[depth] == n, "expected sequence of length ", info.shape[depth], " at dim ", depth,
                       " (got ", n, ")");
    for (Py_ssize_t i = 0; i < n; ++i) Infer(PySequence_Fast_ITEMS(o)[i], depth + 1, info);
    return;
  }
  Scalar s;
  if (DataScalar(o, &s)) {
    if (s.is_floating()) info.any_float = true;
    else if (s.is_complex()) info.any_complex = true;
    else info.any_int = true;
    return;
  }
  throw TypeError(StrCat("new(): invalid data type '", Py_TYPE(o)->tp_name, "'"));
}

template <typename T>
void Fill(PyObject* o, size_t depth, const DataInfo& info, T*& out) {
  if (PyList_Check(o) || PyTuple_Check(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    KILN_CHECK_VALUE(depth < info.shape.size() && n == info.shape[depth], "expected sequence of length ",
                     depth < info.shape.size() ? info.shape[depth] : 0, " at dim ", depth, " (got ", n, ")");
    for (Py_ssize_t i = 0; i < n; ++i) Fill(PySequence_Fast_ITEMS(o)[i], depth + 1, info, out);
    return;
  }
  KILN_CHECK_VALUE(depth == info.shape.size(), "expected sequence of length ", info.shape.size() > depth ? info.shape[depth] : 0,
                   " at dim ", depth, " (got a number)");
  Scalar s;
  if (IsTensor(o)) {
    PyObject* v = PyObject_CallMethod(o, "item", nullptr);
    if (!v) throw py::error_already_set();
    ToScalar(v, &s);
    Py_DECREF(v);
  } else {
    DataScalar(o, &s);
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // an integer dtype refuses what it cannot hold, as PyTorch's torch.tensor does (300 as int8
    // wrapped to 44); a Python int past int64 (made a double by ToScalar) fails to unpack first
    constexpr ScalarType dtype = CppTypeToScalarType<T>::value;
    KILN_CHECK_VALUE(!(PyLong_Check(o) && s.is_floating()), "Overflow when unpacking long long");
    CheckFitsDtype(s, dtype, ScalarTypeName(dtype), FloatRange::kUnchecked);  // torch.tensor([1e39]) is inf
  }
  *out++ = s.to<T>();
}

}  // namespace

Tensor TensorFromData(PyObject* data, std::optional<ScalarType> dtype) {
  DataInfo info;
  Infer(data, 0, info);
  ScalarType inferred = info.any_complex ? ToComplexType(GetDefaultDtype())
                        : info.any_float ? GetDefaultDtype()
                        : info.any_int ? ScalarType::Int64
                        : info.any_bool ? ScalarType::Bool
                                        : GetDefaultDtype();
  // A lone 0-dim tensor keeps its dtype.
  if (IsTensor(data)) inferred = UnpackTensor(data).dtype();
  ScalarType out = dtype.value_or(inferred);
  Tensor t = EmptyTensor(info.shape, out, Device(DeviceType::CPU));
  KILN_DISPATCH_ALL_AND_COMPLEX(out, "tensor", [&] {
    scalar_t* p = t.data_ptr<scalar_t>();
    Fill<scalar_t>(data, 0, info, p);
  });
  return t;
}

namespace {

// --- numpy (buffer protocol) -> tensor sharing memory -------------------------------------------

ScalarType FormatToScalarType(const char* fmt, Py_ssize_t itemsize) {
  std::string f = fmt ? fmt : "B";
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '|')) f = f.substr(1);
  if (f == "?") return ScalarType::Bool;
  if (f == "B") return ScalarType::UInt8;
  if (f == "b") return ScalarType::Int8;
  if (f == "h") return ScalarType::Int16;
  if (f == "i") return ScalarType::Int32;
  if ((f == "l" || f == "q") && itemsize == 8) return ScalarType::Int64;
  if (f == "l" && itemsize == 4) return ScalarType::Int32;
  if (f == "e") return ScalarType::Float16;
  if (f == "f") return ScalarType::Float32;
  if (f == "d") return ScalarType::Float64;
  if (f == "Zf") return ScalarType::ComplexFloat;
  if (f == "Zd") return ScalarType::ComplexDouble;
  throw TypeError(StrCat("can't convert np.ndarray of type ", f,
                         ". The only supported types are: float64, float32, float16, complex64, complex128, int64, int32, int16, int8, uint8, and bool."));
}

Tensor FromBuffer(PyObject* obj) {
  auto* view = new Py_buffer();
  if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) != 0) {
    delete view;
    throw py::error_already_set();
  }
  ScalarType dtype;
  try {
    dtype = FormatToScalarType(view->format, view->itemsize);
  } catch (...) {
    PyBuffer_Release(view);
    delete view;
    throw;
  }
  DimVector sizes, strides;
  for (int i = 0; i < view->ndim; ++i) {
    sizes.push_back(view->shape[i]);
    const bool multiple = view->strides[i] % view->itemsize == 0, nonnegative = view->strides[i] >= 0;
    if (!multiple || !nonnegative) {  // release the buffer before raising (it leaked before)
      PyBuffer_Release(view);
      delete view;
    }
    KILN_CHECK_VALUE(multiple, "given numpy array strides not a multiple of the element "
                     "byte size. Copy the numpy array to reallocate the memory.");
    KILN_CHECK_VALUE(nonnegative, "At least one stride in the given numpy array is negative, and tensors "
                     "with negative strides are not currently supported. (You can probably work around this by "
                     "making a copy of your array  with array.copy().) ");
    strides.push_back(view->strides[i] / view->itemsize);
  }
  void* data = view->buf;
  size_t nbytes = static_cast<size_t>(view->len);
  DataPtr ptr(data, [view](void*) {
    // A tensor freed after the interpreter has finalized (held by a C++ static or a thread's
    // storage until process exit) must not call into Python: the exporter is gone with it.
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyBuffer_Release(view);
    delete view;
    PyGILState_Release(g);
  }, Device(DeviceType::CPU));
  auto storage = std::make_shared<StorageImpl>(std::move(ptr), nbytes, nullptr);
  auto impl = std::make_shared<TensorImpl>(std::move(storage), dtype, Device(DeviceType::CPU),
                                           DispatchKeySet(DispatchKey::CPU));
  impl->set_sizes_and_strides(SymDimVector(sizes.begin(), sizes.end()), SymDimVector(strides.begin(), strides.end()), 0);
  return Tensor(std::move(impl));
}

ScalarType DtypeArg(py::handle h) {
  if (!IsDtype(h.ptr())) throw TypeError("expected a kiln.dtype");
  return reinterpret_cast<PyDtype*>(h.ptr())->scalar_type;
}

std::optional<ScalarType> OptDtypeArg(py::handle h) {
  if (h.is_none()) return std::nullopt;
  return DtypeArg(h);
}

py::object Wrap(Tensor t) { return py::reinterpret_steal<py::object>(WrapTensor(std::move(t))); }

void GeneratorCapsuleDestructor(PyObject* cap) {
  delete static_cast<Generator*>(PyCapsule_GetPointer(cap, "kiln.Generator"));
}
py::object MakeGeneratorCapsule(Generator g) {
  return py::reinterpret_steal<py::object>(
      PyCapsule_New(new Generator(std::move(g)), "kiln.Generator", GeneratorCapsuleDestructor));
}
Generator& GeneratorFromCapsule(py::handle cap) {
  auto* g = static_cast<Generator*>(PyCapsule_GetPointer(cap.ptr(), "kiln.Generator"));
  if (!g) throw py::error_already_set();
  return *g;
}

}  // namespace

void InitFunctionalizeBindings(py::module_& m, py::module_& aot);  // python_functionalize.cc
void InitMakeFxBindings(py::module_& m);         // python_make_fx.cc
void InitPartitionBindings(py::module_& m);      // python_partition.cc
void InitOutputAliasBindings(py::module_& m);    // python_output_aliases.cc
void InitInductorBindings(py::module_& m);       // python_inductor.cc
void InitAotRuntimeBindings(py::module_& m);     // python_aot_runtime.cc
void InitCudaBindings(py::module_& m);           // python_cuda.cc
void InitLibraryBindings(py::module_& m);        // python_library.cc

}  // namespace kiln::python

PYBIND11_MODULE(_C, m) {
  using namespace kiln;
  using namespace kiln::python;
  m.doc() = "kiln's C++ core: tensors, the dispatcher and its ops";
  InstallDispatchLayers();  // every layer in the registry before any binding is made (init/)
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const py::error_already_set&) {
      throw;
    } catch (const kiln::Error&) {
      TranslateCurrentException();
    }
  });
  InitDtypes(m.ptr());
  InitTensorType(m.ptr());
  InitAutogradBindings(m);
  InitOpFunctionType(m.ptr());
  InitFakeBindings(m);
  InitSymbolicBindings(m);
  InitFxBindings(m);
  InitSubgraphBindings(m);
  InitDynamoBindings(m);
  // kiln._C._aot: aot/'s own entry points (the functionalization API keeps PyTorch's _C names)
  py::module_ aot = m.def_submodule("_aot", "AOTAutograd in C++ (aot/): input mutations, partitioners, layout keys");
  InitFunctionalizeBindings(m, aot);
  InitMakeFxBindings(m);
  InitPartitionBindings(aot);
  InitOutputAliasBindings(aot);
  InitInductorBindings(m);
  InitAotRuntimeBindings(aot);
  InitCudaBindings(m);
  InitLibraryBindings(m);

  m.def("_set_tensor_class", [](py::object cls) {
    if (!PyType_Check(cls.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()), g_tensor_base_type))
      throw TypeError("_set_tensor_class expects a subclass of TensorBase");
    cls.inc_ref();
    g_tensor_class = reinterpret_cast<PyTypeObject*>(cls.ptr());
  });
  m.def("_packets", [] {
    std::vector<std::tuple<std::string, std::string, int>> out;
    for (const auto& p : Registry::Get().packets())
      out.emplace_back(p->qualified_name, p->name, p->variants | (IsFactoryPacket(*p) ? kFactoryBit : 0));
    return out;
  }, "All op packets: (qualified name, name, bits: 1 function, 2 method, 4 a factory whose function takes "
     "requires_grad=).");
  m.def("_op_aliases", [] {
    std::vector<std::tuple<std::string, std::string, int>> out;
    for (const auto& p : Registry::Get().packets())
      for (const OpAlias& a : p->aliases) out.emplace_back(a.name, p->name, a.variants);
    return out;
  }, "torch's second names of ops (Note [Op aliases] in tensor/dispatcher.h): (alias, the op's name, bits: 1 "
     "function, 2 method, 0 a function of the module its prefix names: special_expit is kiln.special.expit).");
  m.def("_overload_names", [](const std::string& qualified) {
    std::vector<std::string> out;
    OpPacket* p = Registry::Get().FindPacket(qualified);
    if (p) for (Op* op : p->overloads) out.push_back(op->schema().overload);
    return out;
  });
  m.def("_packet_function", [](const std::string& qualified) -> py::object {
    OpPacket* p = Registry::Get().FindPacket(qualified);
    if (!p) throw py::attribute_error("no op named " + qualified);
    return py::reinterpret_steal<py::object>(MakeOpFunction(p->name, p->overloads));
  });
  m.def("_overload_function", [](const std::string& full_name) -> py::object {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    return py::reinterpret_steal<py::object>(MakeOpFunction(op->base_name() + (op->schema().overload.empty() ? "" : "." + op->schema().overload), {op}));
  });
  m.def("_schema", [](const std::string& full_name) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    return op->schema().str();
  });
  // A schema's arguments and returns as typed objects (torch._C.Argument's fields that kiln has):
  // the compiler asks whether a result aliases an argument without parsing the schema's text.
  py::class_<AliasInfo>(m, "AliasInfo")
      .def_readonly("is_write", &AliasInfo::is_write)
      .def_property_readonly("before_set", [](const AliasInfo& a) { return std::set<std::string>{a.set}; })
      .def_property_readonly("after_set", [](const AliasInfo& a) { return std::set<std::string>{a.set}; });
  py::class_<Argument>(m, "Argument")
      .def_readonly("name", &Argument::name)
      .def_readonly("kwarg_only", &Argument::kwarg_only)
      .def_property_readonly("type", [](const Argument& a) { return a.type_str; })
      .def_property_readonly("alias_info", [](const Argument& a) -> py::object {
        return a.alias.set.empty() ? py::none() : py::cast(a.alias);
      })
      .def("__repr__", [](const Argument& a) { return a.type_str + (a.name.empty() ? "" : " " + a.name); });
  m.def("_schema_arguments", [](const std::string& full_name) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    return op->schema().arguments;
  });
  m.def("_schema_returns", [](const std::string& full_name) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    return op->schema().returns;
  });
  m.def("_tags", [](const std::string& full_name) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    std::vector<std::string> tags;
    for (int i = 0; i < kNumTags; ++i) {
      Tag t = static_cast<Tag>(1u << i);
      if (op->has_tag(t)) tags.push_back(TagName(t));
    }
    return tags;
  });
  m.def("_cost_class", [](const std::string& full_name) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    return std::string(CostClassName(op->cost_class()));
  });
  m.def("_has_outer_reduction_kernel", [](const std::string& full_name, py::handle dtype) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    return op->has_outer_reduction_kernel(DtypeArg(dtype));
  }, "Note [Outer reduction kernels] in tensor/dispatcher.h");
  m.def("_has_kernel", [](const std::string& full_name, const std::string& key) {
    Op* op = Registry::Get().Find(full_name);
    if (!op) throw py::attribute_error("no op named " + full_name);
    for (int i = 0; i < kNumDispatchKeys; ++i)
      if (key == DispatchKeyName(static_cast<DispatchKey>(i))) return static_cast<bool>(op->table_entry(static_cast<DispatchKey>(i)));
    throw py::value_error("unknown dispatch key " + key);
  });
  m.def("_tensor_from_data", [](py::handle data, py::handle dtype) {
    return Wrap(TensorFromData(data.ptr(), OptDtypeArg(dtype)));
  });
  m.def("_from_buffer", [](py::handle obj) { return Wrap(FromBuffer(obj.ptr())); });
  m.def("get_default_dtype", [] {
    return py::reinterpret_borrow<py::object>(DtypeObject(GetDefaultDtype()));
  });
  m.def("set_default_dtype", [](py::handle d) { SetDefaultDtype(DtypeArg(d)); });
  m.def("promote_types", [](py::handle a, py::handle b) {
    return py::reinterpret_borrow<py::object>(DtypeObject(PromoteTypes(DtypeArg(a), DtypeArg(b))));
  });
  m.def("can_cast", [](py::handle from, py::handle to) { return CanCast(DtypeArg(from), DtypeArg(to)); });
  m.def("result_type", [](py::handle a, py::handle b) {
    ResultTypeState s;
    for (py::handle h : {a, b}) {
      if (IsTensor(h.ptr())) s.Update(UnpackTensor(h.ptr()));
      else {
        Scalar sc;
        if (!ToScalar(h.ptr(), &sc)) throw TypeError("result_type(): expected Tensor or Number");
        s.Update(sc);
      }
    }
    return py::reinterpret_borrow<py::object>(DtypeObject(s.Result()));
  });
  m.def("set_num_threads", [](int n) { SetNumThreads(n); });
  m.def("_set_deterministic_algorithms", &SetDeterministicAlgorithms);
  m.def("_get_cpu_capability", [] { return std::string(CpuCapabilityName(GetCpuCapability())); });
  // C++ warnings (tensor/deterministic.h) as Python UserWarnings, from whichever thread warns
  SetWarningHandler([](const std::string& message) {
    PyGILState_STATE gil = PyGILState_Ensure();
    if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) PyErr_Clear();  // -W error: not raised here
    PyGILState_Release(gil);
  });
  m.def("get_num_threads", [] { return GetNumThreads(); });
  // kiln.backends.mkldnn: oneDNN loaded at run time (runtime/onednn/)
  m.def("_onednn_available", [] { return onednn::Available(); });
  m.def("_onednn_unavailable_reason", [] { return onednn::UnavailableReason(); });
  m.def("_onednn_version", [] { return onednn::Version(); });
  m.def("_set_mkldnn_enabled", [](bool enabled) { onednn::SetEnabled(enabled); });
  m.def("_get_mkldnn_enabled", [] { return onednn::Enabled(); });
  m.def("_onednn_convolution_calls", [] { return OneDnnConvolutionCalls(); });
  m.def("_default_generator", [] { return MakeGeneratorCapsule(DefaultCPUGenerator()); });
  m.def("_new_generator", [](const std::string& device) {
    return MakeGeneratorCapsule(std::make_shared<GeneratorImpl>(GeneratorImpl::kDefaultSeed, Device::Parse(device)));
  });
  m.def("_default_cuda_generator", [](int index) { return MakeGeneratorCapsule(DefaultCUDAGenerator(index)); });
  m.def("_cuda_manual_seed_all", [](uint64_t seed) { ManualSeedAllCUDA(seed); });
  m.def("_generator_manual_seed", [](py::handle cap, uint64_t seed) { GeneratorFromCapsule(cap)->manual_seed(seed); });
  m.def("_generator_initial_seed", [](py::handle cap) { return GeneratorFromCapsule(cap)->initial_seed(); });
  m.def("_generator_get_state", [](py::handle cap) {
    Generator& g = GeneratorFromCapsule(cap);
    return std::make_pair(g->initial_seed(), g->offset());
  });
  m.def("_generator_set_state", [](py::handle cap, uint64_t seed, uint64_t offset) {
    GeneratorFromCapsule(cap)->set_state(seed, offset);
  });
  m.def("_wrap_number", [](py::handle n) {
    Scalar s;
    if (!ToScalar(n.ptr(), &s)) throw TypeError("expected a number");
    return Wrap(WrapScalar(s, Device(DeviceType::CPU)));
  });
  m.def("_is_wrapped_number", [](py::handle t) {
    if (!IsTensor(t.ptr())) throw TypeError("expected a Tensor");
    return UnpackTensor(t.ptr())->is_wrapped_number();
  });
}
