// python/csrc/python_inductor.cc: kiln._C._inductor, the CPU code generator of codegen/.
//
// compile(kernel_dict) converts the plain-Python kernel IR (the contract in codegen/kernel_ir.h)
// to C++ structs and returns a CompiledKernel; calling it with kiln tensors (or raw int
// addresses) in buffer order runs the kernel. Tensors are checked against the IR: count, dtype,
// CPU memory, and that each storage holds every element the IR can touch.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "codegen/llvm_codegen.h"
#include "python/csrc/python_inductor.h"
#include "python/csrc/python_tensor.h"
#include "tensor/empty.h"
#include "tensor/cuda/pointwise.h"
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

py::sequence Seq(py::handle h, const char* what) {
  if (!py::isinstance<py::tuple>(h) && !py::isinstance<py::list>(h))
    throw TypeError(StrCat(kOp, what, " must be a tuple or list, got ", Repr(h)));
  return py::reinterpret_borrow<py::sequence>(h);
}

int64_t Int(py::handle h, const char* what) {
  if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr()))
    throw TypeError(StrCat(kOp, what, " must be an int, got ", Repr(h)));
  return h.cast<int64_t>();
}

DType ParseDt(py::handle h) {
  if (!py::isinstance<py::str>(h)) throw TypeError(StrCat(kOp, "dtype must be a str, got ", Repr(h)));
  DType t;
  std::string s = h.cast<std::string>();
  if (!codegen::ParseDType(s, &t))
    throw ValueError(StrCat(kOp, "unknown dtype '", s, "' (expected f32 f64 i64 i32 bool bf16)"));
  return t;
}

codegen::Index ParseIndex(py::handle h) {
  py::sequence s = Seq(h, "an index (offset, [outer strides], inner stride)");
  if (s.size() != 3) throw ValueError(StrCat(kOp, "an index has 3 parts (offset, [outer strides], inner stride), got ", Repr(h)));
  codegen::Index ix;
  ix.offset = Int(s[0], "index offset");
  for (py::handle st : Seq(s[1], "index outer strides")) ix.outer_strides.push_back(Int(st, "an outer stride"));
  ix.inner_stride = Int(s[2], "index inner stride");
  return ix;
}

ExprPtr ParseExpr(py::handle h) {
  py::sequence s = Seq(h, "an expression");
  if (s.size() == 0 || !py::isinstance<py::str>(s[0]))
    throw ValueError(StrCat(kOp, "an expression starts with its kind (a str), got ", Repr(h)));
  std::string kind = s[0].cast<std::string>();
  auto want = [&](size_t n) {
    if (s.size() != n) throw ValueError(StrCat(kOp, "'", kind, "' takes ", n - 1, " fields, got ", Repr(h)));
  };
  if (kind == "load") {
    want(3);
    return Expr::Load(static_cast<int>(Int(s[1], "load buffer")), ParseIndex(s[2]));
  }
  if (kind == "const") {
    want(3);
    DType t = ParseDt(s[2]);
    py::handle v = s[1];
    if (PyBool_Check(v.ptr())) return Expr::ConstInt(v.ptr() == Py_True, t);
    if (PyLong_Check(v.ptr())) {
      if (codegen::IsFloatDType(t)) return Expr::Const(v.cast<double>(), t);
      return Expr::ConstInt(v.cast<int64_t>(), t);
    }
    if (PyFloat_Check(v.ptr())) return Expr::Const(v.cast<double>(), t);
    throw TypeError(StrCat(kOp, "a const value must be a bool, int or float, got ", Repr(v)));
  }
  if (kind == "acc") {
    want(2);
    return Expr::Acc(static_cast<int>(Int(s[1], "acc id")));
  }
  if (kind == "index") {
    want(2);
    return Expr::LoopIndex(static_cast<int>(Int(s[1], "index dim")));
  }
  if (kind == "cast") {
    want(3);
    return Expr::Cast(ParseExpr(s[1]), ParseDt(s[2]));
  }
  codegen::OpCode op;
  if (!codegen::ParseOp(kind, &op)) throw ValueError(StrCat(kOp, "unknown expression kind or op '", kind, "'"));
  want(codegen::OpArity(op) + 1);
  std::vector<ExprPtr> args;
  for (size_t i = 1; i < s.size(); ++i) args.push_back(ParseExpr(s[i]));
  return Expr::Op(op, std::move(args));
}

// The other direction, for the element functions of the registry's pointwise ops (Note
// [Pointwise ops as kernel IR] in tensor/ops/pointwise_ir.h): operand i (a load of buffer i)
// becomes ("arg", i), for Python to put the operands' own expressions in.
py::object ExprToTuple(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLoad: return py::make_tuple("arg", e.buffer);
    case Expr::Kind::kConst: {
      const char* dtype = codegen::DTypeName(e.dtype);
      if (e.dtype == DType::Bool) return py::make_tuple("const", py::bool_(e.int_value != 0), dtype);
      if (!codegen::IsFloatDType(e.dtype)) return py::make_tuple("const", e.int_value, dtype);
      return py::make_tuple("const", e.value, dtype);
    }
    case Expr::Kind::kCast: return py::make_tuple("cast", ExprToTuple(*e.args.at(0)), codegen::DTypeName(e.dtype));
    case Expr::Kind::kOp: {
      py::tuple t(e.args.size() + 1);
      t[0] = py::str(codegen::OpName(e.op));
      for (size_t i = 0; i < e.args.size(); ++i) t[i + 1] = ExprToTuple(*e.args[i]);
      return std::move(t);
    }
    case Expr::Kind::kAcc: case Expr::Kind::kIndex: break;
  }
  throw ValueError(StrCat(kOp, "an element function reads a loop variable"));
}

ScalarType ToScalarType(DType t);  // below, with the kernel arguments' checks

codegen::Stmt ParseStmt(py::handle h) {
  py::sequence s = Seq(h, "a statement");
  if (s.size() == 0 || !py::isinstance<py::str>(s[0]))
    throw ValueError(StrCat(kOp, "a statement starts with store/reduce/welford, got ", Repr(h)));
  std::string kind = s[0].cast<std::string>();
  codegen::Stmt st;
  if (kind == "store" && s.size() == 4) {
    st.kind = codegen::Stmt::Kind::kStore;
    st.buffer = static_cast<int>(Int(s[1], "store buffer"));
    st.index = ParseIndex(s[2]);
    st.expr = ParseExpr(s[3]);
  } else if (kind == "reduce" && s.size() == 4) {
    st.kind = codegen::Stmt::Kind::kReduce;
    st.acc_id = static_cast<int>(Int(s[1], "acc id"));
    std::string r = py::str(s[2]).cast<std::string>();
    if (!codegen::ParseReduce(r, &st.reduce))
      throw ValueError(StrCat(kOp, "unknown reduction '", r,
                              "' (expected sum max min prod argmax argmin max_last min_last)"));
    st.expr = ParseExpr(s[3]);
  } else if (kind == "welford" && s.size() == 3) {
    st.kind = codegen::Stmt::Kind::kWelford;
    st.acc_id = static_cast<int>(Int(s[1], "acc id"));
    st.expr = ParseExpr(s[2]);
  } else {
    throw ValueError(StrCat(kOp, "bad statement ", Repr(h),
                            " (expected ('store', buf, index, expr), ('reduce', acc, kind, expr) or ('welford', acc, expr))"));
  }
  return st;
}

}  // namespace

codegen::Kernel ParseKernel(py::handle h) {
  if (!py::isinstance<py::dict>(h)) throw TypeError(StrCat(kOp, "expects a kernel dict, got ", Repr(h)));
  py::dict d = py::reinterpret_borrow<py::dict>(h);
  for (const char* key : {"name", "buffers", "outer", "loops"})
    if (!d.contains(key)) throw ValueError(StrCat(kOp, "the kernel dict has no '", key, "'"));
  codegen::Kernel k;
  k.name = py::str(d["name"]).cast<std::string>();
  for (py::handle b : Seq(d["buffers"], "buffers")) {
    py::sequence bs = Seq(b, "a buffer (name, dtype)");
    if (bs.size() != 2) throw ValueError(StrCat(kOp, "a buffer is (name, dtype), got ", Repr(b)));
    k.buffers.push_back({py::str(bs[0]).cast<std::string>(), ParseDt(bs[1])});
  }
  for (py::handle n : Seq(d["outer"], "outer")) k.outer.push_back(Int(n, "an outer extent"));
  for (py::handle l : Seq(d["loops"], "loops")) {
    if (!py::isinstance<py::dict>(l)) throw TypeError(StrCat(kOp, "a loop is a dict {extent, stmts}, got ", Repr(l)));
    py::dict ld = py::reinterpret_borrow<py::dict>(l);
    if (!ld.contains("extent") || !ld.contains("stmts"))
      throw ValueError(StrCat(kOp, "a loop needs 'extent' and 'stmts', got ", Repr(l)));
    codegen::Loop loop;
    loop.extent = Int(ld["extent"], "loop extent");
    for (py::handle st : Seq(ld["stmts"], "stmts")) loop.stmts.push_back(ParseStmt(st));
    k.loops.push_back(std::move(loop));
  }
  return k;
}

namespace {

ScalarType ToScalarType(DType t) {
  switch (t) {
    case DType::F32: return ScalarType::Float32;
    case DType::F64: return ScalarType::Float64;
    case DType::I64: return ScalarType::Int64;
    case DType::I32: return ScalarType::Int32;
    case DType::Bool: return ScalarType::Bool;
    case DType::BF16: return ScalarType::BFloat16;
    case DType::F16: return ScalarType::Float16;
    case DType::I16: return ScalarType::Int16;
    case DType::I8: return ScalarType::Int8;
    case DType::U8: return ScalarType::UInt8;
  }
  return ScalarType::Undefined;
}

struct PyCompiledKernel {
  std::shared_ptr<codegen::CompiledKernel> k;

  void Call(py::args args) const {
    const codegen::Kernel& kernel = k->kernel();
    std::string op = StrCat("[", kernel.name, "] ");
    if (args.size() != kernel.buffers.size())
      throw TypeError(StrCat(op, "expected ", kernel.buffers.size(), " buffers, got ", args.size()));
    std::vector<char*> ptrs(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const codegen::Buffer& b = kernel.buffers[i];
      PyObject* o = args[i].ptr();
      if (PyLong_Check(o) && !PyBool_Check(o)) {  // a raw address: the caller vouches for it
        ptrs[i] = reinterpret_cast<char*>(PyLong_AsVoidPtr(o));
        if (!ptrs[i] && PyErr_Occurred()) throw py::error_already_set();
        continue;
      }
      if (!IsTensor(o))
        throw TypeError(StrCat(op, "buffer ", i, " '", b.name, "' must be a kiln.Tensor, got ", Py_TYPE(o)->tp_name));
      const Tensor& t = UnpackTensor(o);
      if (t.dtype() != ToScalarType(b.dtype))
        throw TypeError(StrCat(op, "buffer ", i, " '", b.name, "' must have dtype ", ScalarTypeName(ToScalarType(b.dtype)),
                               ", got ", ScalarTypeName(t.dtype())));
      if (!t->has_storage() || !t.device().is_cpu())
        throw ValueError(StrCat(op, "buffer ", i, " '", b.name, "' must be a CPU tensor with memory (not meta or fake)"));
      const codegen::Extent& e = k->extents()[i];
      if (e.max >= e.min) {
        int64_t off = t->storage_offset();
        int64_t avail = static_cast<int64_t>(t->storage()->nbytes()) / t->itemsize();
        if (off + e.min < 0 || off + e.max >= avail)
          throw ValueError(StrCat(op, "buffer ", i, " '", b.name, "' is too small: the kernel touches elements [",
                                  e.min, ", ", e.max, "] from its data pointer, the storage holds ", avail,
                                  " elements from offset ", off));
      }
      ptrs[i] = static_cast<char*>(t.raw_data());
    }
    py::gil_scoped_release release;
    k->Run(ptrs.data());
  }
};

// reinterpret_tensor(t, size, stride, offset=None): a tensor over t's storage with the given
// layout (offset defaults to t's), checked against the storage's size. The wrapper calls it for
// every view and reused buffer; as_strided through the dispatcher cost a microsecond each.
bool IntsFrom(PyObject* seq, SymDimVector* out, DimVector* concrete) {
  PyObject* fast = PySequence_Fast(seq, "reinterpret_tensor: size and stride must be sequences of ints");
  if (fast == nullptr) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out->push_back(SymInt(v));
    concrete->push_back(v);
  }
  Py_DECREF(fast);
  return true;
}

PyObject* ReinterpretTensor(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 3 || nargs > 4 || !IsTensor(args[0])) {
    PyErr_SetString(PyExc_TypeError, "reinterpret_tensor(tensor, size, stride, offset=None): expected a tensor and "
                                     "two sequences of ints");
    return nullptr;
  }
  const Tensor& base = UnpackTensor(args[0]);
  SymDimVector sizes, strides;
  DimVector s, st;
  if (!IntsFrom(args[1], &sizes, &s) || !IntsFrom(args[2], &strides, &st)) return nullptr;
  int64_t offset = base->storage_offset();
  if (nargs == 4 && args[3] != Py_None) {
    offset = PyLong_AsLongLong(args[3]);
    if (offset == -1 && PyErr_Occurred()) return nullptr;
  }
  if (sizes.size() != strides.size()) {
    PyErr_Format(PyExc_RuntimeError, "reinterpret_tensor: %zd sizes but %zd strides", sizes.size(), strides.size());
    return nullptr;
  }
  try {  // StorageBytesFor raises on overflow: no C++ exception may cross this C entry point
    if (offset < 0 ||
        (base->has_storage() && StorageBytesFor(s, st, offset, base->itemsize()) >
                                    static_cast<int64_t>(base->storage()->nbytes()))) {
      PyErr_Format(PyExc_RuntimeError, "reinterpret_tensor: sizes %s, strides %s and offset %lld do not fit the storage",
                   SizesToString(s).c_str(), SizesToString(st).c_str(), static_cast<long long>(offset));
      return nullptr;
    }
    // the wrapper's own views of its buffers, made under the compiled function's no_grad: not
    // views made under no_grad for autograd (PyTorch's _reinterpret_tensor runs below
    // ADInplaceOrView too), or an in-place op on a returned output would be refused
    BelowAutogradGuard below;
    return WrapTensor(MakeView(base, std::move(sizes), std::move(strides), SymInt(offset)));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyMethodDef g_reinterpret_def = {"reinterpret_tensor", reinterpret_cast<PyCFunction>(ReinterpretTensor),
                                 METH_FASTCALL, "A tensor over another's storage with the given layout."};

}  // namespace

void InitInductorBindings(py::module_& m) {
  py::module_ ind = m.def_submodule("_inductor", "CPU code generation for kernel IR (codegen/)");
  InitMemoryPlanBindings(ind);
  py::class_<PyCompiledKernel>(ind, "CompiledKernel")
      .def("__call__", &PyCompiledKernel::Call)
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
  ind.def("compile", [](py::handle kernel) {
    codegen::Kernel k = ParseKernel(kernel);
    std::shared_ptr<codegen::CompiledKernel> ck;
    {
      py::gil_scoped_release release;
      ck = codegen::Compile(k);
    }
    return PyCompiledKernel{std::move(ck)};
  });
  ind.def(
      "compile_many",
      [](py::sequence kernels, int threads) {
        std::vector<codegen::Kernel> parsed;
        parsed.reserve(py::len(kernels));
        for (py::handle k : kernels) parsed.push_back(ParseKernel(k));
        std::vector<std::shared_ptr<codegen::CompiledKernel>> compiled;
        {
          py::gil_scoped_release release;
          compiled = codegen::CompileMany(parsed, threads);
        }
        std::vector<PyCompiledKernel> out;
        for (auto& ck : compiled) out.push_back(PyCompiledKernel{std::move(ck)});
        return out;
      },
      py::arg("kernels"), py::arg("threads"),
      "Compiles kernel dicts on up to `threads` threads; identical bodies compile once.");
  ind.def("code", [](py::handle kernel) { return codegen::PrintKernel(ParseKernel(kernel)); },
          "The readable listing of a kernel dict, without compiling it.");
  ind.def(
      "op_costs",
      [] {
        py::dict costs;
        for (int i = 0; i <= static_cast<int>(codegen::OpCode::kWhere); ++i) {
          auto op = static_cast<codegen::OpCode>(i);
          costs[py::str(codegen::OpName(op))] = codegen::OpCost(op);
        }
        return costs;
      },
      "Each kernel IR operator's cost in units of one add (codegen::OpCost), by name.");
  ind.def("pointwise_ops", [] {
    std::vector<std::string> names;
    for (const Op* op : OpsWithPointwiseIr()) names.push_back(op->name());
    return names;
  }, "The registry's ops whose element function is kernel IR (tensor/ops/pointwise_ir.h), by full name.");
  // Note [Pointwise ops as kernel IR] (tensor/ops/pointwise_ir.h): what Inductor needs of an op's
  // element function, for operands of given dtypes
  struct PointwiseFunction {
    py::object expr;      // a tuple expression over ("arg", i)
    std::string compute;  // the kernel IR dtype it computes in
    bool integer_division, reads_scalar_in_opmath;
  };
  py::class_<PointwiseFunction>(ind, "PointwiseFunction")
      .def_readonly("expr", &PointwiseFunction::expr)
      .def_readonly("compute", &PointwiseFunction::compute)
      .def_readonly("integer_division", &PointwiseFunction::integer_division)
      .def_readonly("reads_scalar_in_opmath", &PointwiseFunction::reads_scalar_in_opmath);
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
        // the number arguments after the operands: positional, by name, or the schema's default
        std::vector<std::optional<double>> values;
        const std::vector<Argument>& schema_args = op->schema().arguments;
        for (int i = 0; i < ir->num_params; ++i) {
          const Argument& a = schema_args.at(ir->arity + i);
          py::object v = py::none();
          bool given = false;
          if (static_cast<size_t>(i) < params.size()) {
            v = params[i], given = true;
          } else if (kwargs.contains(a.name.c_str())) {
            v = kwargs[a.name.c_str()], given = true;
          }
          if (!given) {
            KILN_CHECK_VALUE(a.default_value.has_value(), kOp, full_name, ": argument '", a.name, "' is missing");
            if (a.default_value->is_none()) values.emplace_back(std::nullopt);
            else values.emplace_back(a.default_value->to_scalar().to_double());
            continue;
          }
          if (v.is_none()) {
            values.emplace_back(std::nullopt);
          } else if (PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr())) {  // bools are ints
            values.emplace_back(v.cast<double>());
          } else {
            throw TypeError(StrCat(kOp, full_name, ": argument '", a.name, "' must be a number, got ", Repr(v)));
          }
        }
        const int n = static_cast<int>(operand_dtypes.size());
        if (n != ir->arity && !(ir->has_alpha && n == ir->arity + 1))
          throw ValueError(StrCat(kOp, full_name, " reads ", ir->arity,
                                  ir->has_alpha ? " operands (and alpha)" : " operands", ", got ", n, " dtypes"));
        std::vector<ScalarType> types;
        std::vector<ExprPtr> operands;
        for (int i = 0; i < n; ++i) {
          types.push_back(ToScalarType(ParseDt(py::str(operand_dtypes[i]))));
          operands.push_back(Expr::Load(i, codegen::Index{}));
        }
        ScalarType compute = ir->compute(types);
        ExprPtr e = ir->build_with_params ? ir->build_with_params(std::move(operands), compute, DeviceType::CPU, values)
                                          : ir->build(std::move(operands), compute, DeviceType::CPU);
        return py::cast(PointwiseFunction{ExprToTuple(*e), codegen::DTypeName(cuda::CodegenDType(compute, full_name.c_str())),
                                          ir->integer_division, ir->reads_scalar_in_opmath});
      },
      py::arg("op"), py::arg("operand_dtypes"), py::arg("params") = py::tuple(), py::arg("kwargs") = py::dict(),
      "The element function of a pointwise op on the CPU for operands of these kernel IR dtypes (alpha's "
      "last, where the op has one) and the values of its number arguments (`params` positional, `kwargs` by "
      "name, else their defaults), or None when the op has none.");
  ind.def("hash", [](py::handle kernel) { return codegen::HashKernel(ParseKernel(kernel)); });
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
