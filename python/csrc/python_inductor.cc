// python/csrc/python_inductor.cc: kiln._C._inductor, the CPU code generator of codegen/.
//
// compile(kernel) takes a kernel_ir.Kernel (python_kernel_ir.cc) and returns a CompiledKernel;
// calling it with kiln tensors (or raw int addresses) in buffer order runs the kernel. Tensors are
// checked against the IR: count, dtype, CPU memory, and that each storage holds every element the
// IR can touch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "codegen/llvm_codegen.h"
#include "python/csrc/python_inductor.h"
#include "python/csrc/python_tensor.h"
#include "tensor/empty.h"
#include "tensor/cuda/pointwise.h"
#include "inductor/ir/values.h"
#include "tensor/ops/pointwise_ir.h"
#include "runtime/error.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;

constexpr const char* kOp = "[inductor.compile] ";

std::string Repr(py::handle h) { return py::repr(h).cast<std::string>(); }

DType ParseDt(const std::string& s) {
  DType t;
  if (!codegen::ParseDType(s, &t))
    throw ValueError(StrCat(kOp, "unknown dtype '", s, "' (expected f32 f64 i64 i32 bool bf16)"));
  return t;
}

}  // namespace

Tensor ReinterpretTensor(const Tensor& base, const DimVector& sizes, const DimVector& strides,
                         std::optional<int64_t> offset) {
  const int64_t off = offset.value_or(base->storage_offset());
  if (sizes.size() != strides.size())
    throw Error(StrCat("reinterpret_tensor: ", sizes.size(), " sizes but ", strides.size(), " strides"));
  // StorageBytesFor raises on overflow
  if (off < 0 || (base->has_storage() && StorageBytesFor(sizes, strides, off, base->itemsize()) >
                                             static_cast<int64_t>(base->storage()->nbytes())))
    throw Error(StrCat("reinterpret_tensor: sizes ", SizesToString(sizes), ", strides ", SizesToString(strides),
                       " and offset ", off, " do not fit the storage"));
  SymDimVector sym_sizes, sym_strides;
  for (int64_t v : sizes) sym_sizes.push_back(SymInt(v));
  for (int64_t v : strides) sym_strides.push_back(SymInt(v));
  // the wrapper's own views of its buffers, made under the compiled function's no_grad: not
  // views made under no_grad for autograd (PyTorch's _reinterpret_tensor runs below
  // ADInplaceOrView too), or an in-place op on a returned output would be refused
  BelowAutogradGuard below;
  return MakeView(base, std::move(sym_sizes), std::move(sym_strides), SymInt(off));
}

namespace {

// Note [Buffers do not alias] (codegen/kernel_ir.h): the kernel was optimised on the promise that
// no buffer it writes shares memory with another of its buffers; a call that breaks it raises
// instead of computing from half-overwritten inputs. Elements touched are compared as ranges in
// the storage (a written buffer and another one interleaved in the same storage are refused
// too); raw addresses are the caller's word.
// `tensors[i]`: buffer i's tensor, null for a raw address.
void CheckNoOverlap(const codegen::CompiledKernel& k, const std::string& op, const std::vector<const Tensor*>& tensors) {
  const std::vector<codegen::Extent>& ext = k.extents();
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!ext[i].written || tensors[i] == nullptr) continue;
    const Tensor& w = *tensors[i];
    const int64_t w_lo = w->storage_offset() + ext[i].min, w_hi = w->storage_offset() + ext[i].max;
    for (size_t j = 0; j < tensors.size(); ++j) {
      if (j == i || ext[j].max < ext[j].min || tensors[j] == nullptr) continue;
      const Tensor& o = *tensors[j];
      if (o->storage().get() != w->storage().get()) continue;
      const int64_t scale = o->itemsize(), w_scale = w->itemsize();  // ranges in bytes: dtypes may differ
      const int64_t o_lo = (o->storage_offset() + ext[j].min) * scale, o_hi = (o->storage_offset() + ext[j].max + 1) * scale;
      if (o_lo < (w_hi + 1) * w_scale && w_lo * w_scale < o_hi)
        throw ValueError(StrCat(op, "buffer ", i, " '", k.kernel().buffers[i].name, "', which the kernel writes, shares "
                                "memory with buffer ", j, " '", k.kernel().buffers[j].name,
                                "' (a kernel's buffers must not alias: pass one buffer for both, or a copy)"));
    }
  }
}

}  // namespace

void RunCompiledKernel(const codegen::CompiledKernel& k, PyObject* const* args, size_t nargs) {
  const codegen::Kernel& kernel = k.kernel();
  std::string op = StrCat("[", kernel.name, "] ");
  if (nargs != kernel.buffers.size())
    throw TypeError(StrCat(op, "expected ", kernel.buffers.size(), " buffers, got ", nargs));
  std::vector<char*> ptrs(nargs);
  std::vector<const Tensor*> tensors(nargs, nullptr);
  for (size_t i = 0; i < nargs; ++i) {
    const codegen::Buffer& b = kernel.buffers[i];
    PyObject* o = args[i];
    if (PyLong_Check(o) && !PyBool_Check(o)) {  // a raw address: the caller vouches for it
      ptrs[i] = reinterpret_cast<char*>(PyLong_AsVoidPtr(o));
      if (!ptrs[i] && PyErr_Occurred()) throw py::error_already_set();
      continue;
    }
    if (!IsTensor(o))
      throw TypeError(StrCat(op, "buffer ", i, " '", b.name, "' must be a kiln.Tensor, got ", Py_TYPE(o)->tp_name));
    const Tensor& t = UnpackTensor(o);
    if (t.dtype() != inductor::ir::ScalarTypeOfKernel(b.dtype))
      throw TypeError(StrCat(op, "buffer ", i, " '", b.name, "' must have dtype ", ScalarTypeName(inductor::ir::ScalarTypeOfKernel(b.dtype)),
                             ", got ", ScalarTypeName(t.dtype())));
    if (!t->has_storage() || !t.device().is_cpu())
      throw ValueError(StrCat(op, "buffer ", i, " '", b.name, "' must be a CPU tensor with memory (not meta or fake)"));
    const codegen::Extent& e = k.extents()[i];
    if (e.max >= e.min) {
      int64_t off = t->storage_offset();
      int64_t avail = static_cast<int64_t>(t->storage()->nbytes()) / t->itemsize();
      if (off + e.min < 0 || off + e.max >= avail)
        throw ValueError(StrCat(op, "buffer ", i, " '", b.name, "' is too small: the kernel touches elements [",
                                e.min, ", ", e.max, "] from its data pointer, the storage holds ", avail,
                                " elements from offset ", off));
    }
    ptrs[i] = static_cast<char*>(t.raw_data());
    tensors[i] = &t;
  }
  CheckNoOverlap(k, op, tensors);
  py::gil_scoped_release release;
  k.Run(ptrs.data());
}

namespace {

// reinterpret_tensor(t, size, stride, offset=None): a tensor over t's storage with the given
// layout (offset defaults to t's), checked against the storage's size. The wrapper makes one for
// every view and reused buffer; as_strided through the dispatcher cost a microsecond each.
bool IntsFrom(PyObject* seq, DimVector* out) {
  PyObject* fast = PySequence_Fast(seq, "reinterpret_tensor: size and stride must be sequences of ints");
  if (fast == nullptr) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out->push_back(v);
  }
  Py_DECREF(fast);
  return true;
}

PyObject* ReinterpretTensorEntry(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 3 || nargs > 4 || !IsTensor(args[0])) {
    PyErr_SetString(PyExc_TypeError, "reinterpret_tensor(tensor, size, stride, offset=None): expected a tensor and "
                                     "two sequences of ints");
    return nullptr;
  }
  DimVector sizes, strides;
  if (!IntsFrom(args[1], &sizes) || !IntsFrom(args[2], &strides)) return nullptr;
  std::optional<int64_t> offset;
  if (nargs == 4 && args[3] != Py_None) {
    offset = PyLong_AsLongLong(args[3]);
    if (*offset == -1 && PyErr_Occurred()) return nullptr;
  }
  try {  // no C++ exception may cross this C entry point
    return WrapTensor(ReinterpretTensor(UnpackTensor(args[0]), sizes, strides, offset));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyMethodDef g_reinterpret_def = {"reinterpret_tensor", reinterpret_cast<PyCFunction>(ReinterpretTensorEntry),
                                 METH_FASTCALL, "A tensor over another's storage with the given layout."};

}  // namespace

// Note [Pointwise ops as kernel IR]: the number arguments of an op's element function (elu's
// alpha, scale, input_scale) as its call gives them: positional after the operands, by name, else
// the schema's default (nullopt: an absent optional one).
std::vector<std::optional<double>> PointwiseParams(const Op& op, const PointwiseIr& ir, const py::tuple& params,
                                                   const py::dict& kwargs) {
  std::vector<std::optional<double>> values;
  const std::vector<Argument>& schema_args = op.schema().arguments;
  for (int i = 0; i < ir.num_params; ++i) {
    const Argument& a = schema_args.at(ir.arity + i);
    py::object v = py::none();
    bool given = false;
    if (static_cast<size_t>(i) < params.size()) {
      v = params[i], given = true;
    } else if (kwargs.contains(a.name.c_str())) {
      v = kwargs[a.name.c_str()], given = true;
    }
    if (!given) {
      KILN_CHECK_VALUE(a.default_value.has_value(), kOp, op.name(), ": argument '", a.name, "' is missing");
      if (a.default_value->is_none()) values.emplace_back(std::nullopt);
      else values.emplace_back(a.default_value->to_scalar().to_double());
      continue;
    }
    if (v.is_none()) {
      values.emplace_back(std::nullopt);
    } else if (PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr())) {  // bools are ints
      values.emplace_back(v.cast<double>());
    } else {
      throw TypeError(StrCat(kOp, op.name(), ": argument '", a.name, "' must be a number, got ", Repr(v)));
    }
  }
  return values;
}

void InitInductorBindings(py::module_& m) {
  py::module_ ind = m.def_submodule("_inductor", "CPU code generation for kernel IR (codegen/)");
  InitKernelIrBindings(ind);
  InitInductorIrBindings(ind);
  InitMemoryPlanBindings(ind);
  InitInductorSchedulerBindings(ind);
  InitInductorLoweringBindings(ind);
  InitInductorGraphBindings(ind);
  InitWrapperProgramBindings(ind);
  py::class_<PyCompiledKernel>(ind, "CompiledKernel")
      .def("__call__", [](const PyCompiledKernel& c, py::args args) {
        RunCompiledKernel(*c.k, reinterpret_cast<PyObject* const*>(&PyTuple_GET_ITEM(args.ptr(), 0)), args.size());
      })
      .def_property_readonly("name", [](const PyCompiledKernel& c) { return c.k->name(); })
      .def_property_readonly("hash", [](const PyCompiledKernel& c) { return c.k->hash(); })
      .def_property_readonly("llvm_ir", [](const PyCompiledKernel& c) { return c.k->llvm_ir(); })
      .def_property_readonly("code", [](const PyCompiledKernel& c) { return c.k->code(); })
      .def_property_readonly("from_cache", [](const PyCompiledKernel& c) { return c.k->from_cache(); })
      .def_property_readonly("buffers", [](const PyCompiledKernel& c) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& b : c.k->kernel().buffers) out.emplace_back(b.name, codegen::DTypeName(b.dtype));
        return out;
      })
      .def("__repr__", [](const PyCompiledKernel& c) {
        return StrCat("<kiln._C._inductor.CompiledKernel ", c.k->name(), " ", c.k->hash(), ">");
      });
  ind.def("compile", [](const codegen::Kernel& k) {
    std::shared_ptr<codegen::CompiledKernel> ck;
    {
      py::gil_scoped_release release;
      ck = codegen::Compile(k);
    }
    return PyCompiledKernel{std::move(ck)};
  }, py::arg("kernel"), "Compiles a kernel_ir.Kernel (through the memory and disk caches).");
  ind.def(
      "compile_many",
      [](const std::vector<std::shared_ptr<codegen::Kernel>>& kernels, int threads) {
        std::vector<codegen::Kernel> copies;
        copies.reserve(kernels.size());
        for (const auto& k : kernels) copies.push_back(*k);
        std::vector<std::shared_ptr<codegen::CompiledKernel>> compiled;
        {
          py::gil_scoped_release release;
          compiled = codegen::CompileMany(copies, threads);
        }
        std::vector<PyCompiledKernel> out;
        for (auto& ck : compiled) out.push_back(PyCompiledKernel{std::move(ck)});
        return out;
      },
      py::arg("kernels"), py::arg("threads"),
      "Compiles kernel_ir.Kernels on up to `threads` threads; identical bodies compile once.");
  ind.def("pointwise_ops", [] {
    std::vector<std::string> names;
    for (const Op* op : OpsWithPointwiseIr()) names.push_back(op->name());
    return names;
  }, "The registry's ops whose element function is kernel IR (tensor/ops/pointwise_ir.h), by full name.");
  // Note [Pointwise ops as kernel IR] (tensor/ops/pointwise_ir.h): what Inductor needs of an op's
  // element function, for operands of given dtypes
  struct PointwiseFunction {
    py::object expr;      // a kernel_ir.Expr whose operand i is a load of buffer i
    std::string compute;  // the kernel IR dtype it computes in
    bool integer_division, reads_scalar_in_opmath;
  };
  py::class_<PointwiseFunction>(ind, "PointwiseFunction")
      .def_readonly("expr", &PointwiseFunction::expr)
      .def_readonly("compute", &PointwiseFunction::compute)
      .def_readonly("integer_division", &PointwiseFunction::integer_division)
      .def_readonly("reads_scalar_in_opmath", &PointwiseFunction::reads_scalar_in_opmath);
  ind.def("core_op_of", [](const std::string& operator_name) -> py::object {
    codegen::OpCode code;
    if (!codegen::ParseOp(operator_name, &code))
      throw ValueError(StrCat(kOp, "unknown kernel IR operator '", operator_name, "'"));
    const Op* op = CoreOpOf(code);
    return op ? py::object(py::str(op->name())) : py::object(py::none());
  }, py::arg("operator"),
  "The full name of the core aten op computing a kernel IR operator on tensors (tensor/ops/pointwise_ir.h's "
  "CoreOpOf: read off the pointwise families' rows), or None.");
  ind.def("pointwise_num_params", [](const std::string& full_name) {
    const Op* op = Registry::Get().Find(full_name);
    const PointwiseIr* ir = op ? FindPointwiseIr(*op) : nullptr;
    return ir ? ir->num_params : 0;
  }, "How many number arguments follow the tensor operands of a pointwise op with kernel IR (elu: 3).");
  ind.def(
      "pointwise_ir",
      [](const std::string& full_name, const std::vector<std::string>& operand_dtypes, py::tuple params,
         py::dict kwargs) -> py::object {
        const Op* op = Registry::Get().Find(full_name);
        const PointwiseIr* ir = op ? FindPointwiseIr(*op) : nullptr;
        if (ir == nullptr) return py::none();
        const std::vector<std::optional<double>> values = PointwiseParams(*op, *ir, params, kwargs);
        const int n = static_cast<int>(operand_dtypes.size());
        if (n != ir->arity && !(ir->has_alpha && n == ir->arity + 1))
          throw ValueError(StrCat(kOp, full_name, " reads ", ir->arity,
                                  ir->has_alpha ? " operands (and alpha)" : " operands", ", got ", n, " dtypes"));
        std::vector<ScalarType> types;
        std::vector<ExprPtr> operands;
        for (int i = 0; i < n; ++i) {
          types.push_back(inductor::ir::ScalarTypeOfKernel(ParseDt(operand_dtypes[i])));
          operands.push_back(Expr::Load(i, codegen::Index{}));
        }
        ScalarType compute = ir->compute(types);
        ExprPtr e = ir->build_with_params ? ir->build_with_params(std::move(operands), compute, DeviceType::CPU, values)
                                          : ir->build(std::move(operands), compute, DeviceType::CPU);
        return py::cast(PointwiseFunction{py::reinterpret_steal<py::object>(WrapExpr(std::move(e))), codegen::DTypeName(cuda::CodegenDType(compute, full_name.c_str())),
                                          ir->integer_division, ir->reads_scalar_in_opmath});
      },
      py::arg("op"), py::arg("operand_dtypes"), py::arg("params") = py::tuple(), py::arg("kwargs") = py::dict(),
      "The element function of a pointwise op on the CPU for operands of these kernel IR dtypes (alpha's "
      "last, where the op has one) and the values of its number arguments (`params` positional, `kwargs` by "
      "name, else their defaults), or None when the op has none.");
  ind.def("cache_stats", [] {
    auto s = codegen::GetCacheStats();
    py::dict d;
    d["compiled"] = s.compiled;
    d["memory_hits"] = s.memory_hits;
    d["disk_hits"] = s.disk_hits;
    return d;
  });
  ind.def("clear_memory_cache", [] { codegen::ClearMemoryCache(); });
  ind.def("cache_dir", [] { return codegen::CacheDir(); });
  ind.def("host_cpu", [] { return codegen::HostCpuKey(); });
  ind.attr("reinterpret_tensor") = py::reinterpret_steal<py::object>(PyCFunction_New(&g_reinterpret_def, nullptr));
}

}  // namespace kiln::python
