// python/csrc/python_kernel_ir.cc: kiln._C._inductor.kernel_ir, the kernel IR (codegen/kernel_ir.h)
// as typed Python objects. Inductor's lowering (python/kiln/_inductor) builds each kernel's
// expressions, statements and loops through these and hands compile() a Kernel; nothing is a tuple
// or a dict on the way.
//
// Expressions are built many times per kernel (every probe and every kernel that inlines a lazy
// value evaluates its function again), so Expr is a plain CPython type holding a
// codegen::ExprPtr and its constructors are METH_FASTCALL functions: a pybind11 call and
// instance cost about ten times as much. Statements, loops and kernels are made once per kernel
// and are pybind11 classes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <new>
#include <string_view>
#include <unordered_map>

#include "codegen/kernel_ir.h"
#include "python/csrc/python_inductor.h"
#include "runtime/error.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;

struct PyExprObject {
  PyObject_HEAD
  ExprPtr expr;
};

PyTypeObject g_expr_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

// --- argument parsing for the C entry points (they set a Python error and return false) ----------

bool ParseDTypeArg(PyObject* o, DType* out, const char* fn) {
  Py_ssize_t n = 0;
  const char* s = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, &n) : nullptr;
  if (s == nullptr || !codegen::ParseDType(std::string(s, n), out)) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "kernel_ir.%s: unknown dtype %R (expected f32 f64 i64 i32 bool bf16)", fn, o);
    return false;
  }
  return true;
}

bool IntArg(PyObject* o, int64_t* out, const char* fn, const char* what) {
  if (!PyLong_Check(o) || PyBool_Check(o)) {
    PyErr_Format(PyExc_TypeError, "kernel_ir.%s: %s must be an int, got %R", fn, what, o);
    return false;
  }
  *out = PyLong_AsLongLong(o);
  return !(*out == -1 && PyErr_Occurred());
}

bool ExprArg(PyObject* o, ExprPtr* out, const char* fn) {
  if (Py_TYPE(o) != &g_expr_type) {
    PyErr_Format(PyExc_TypeError, "kernel_ir.%s: operands must be kernel_ir.Expr, got %R", fn, o);
    return false;
  }
  *out = reinterpret_cast<PyExprObject*>(o)->expr;
  return true;
}

bool IndexArgs(PyObject* const* args, codegen::Index* ix, const char* fn) {
  if (!IntArg(args[0], &ix->offset, fn, "the index offset")) return false;
  PyObject* fast = PySequence_Fast(args[1], "kernel_ir: outer strides must be a sequence of ints");
  if (fast == nullptr) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  ix->outer_strides.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!IntArg(PySequence_Fast_GET_ITEM(fast, i), &ix->outer_strides[i], fn, "an outer stride")) {
      Py_DECREF(fast);
      return false;
    }
  Py_DECREF(fast);
  return IntArg(args[2], &ix->inner_stride, fn, "the inner stride");
}

bool Arity(Py_ssize_t nargs, Py_ssize_t want, const char* signature) {
  if (nargs == want) return true;
  PyErr_Format(PyExc_TypeError, "kernel_ir.%s takes %zd arguments, got %zd", signature, want, nargs);
  return false;
}

PyObject* Translate(const std::exception& e) {
  if (dynamic_cast<const ValueError*>(&e)) PyErr_SetString(PyExc_ValueError, e.what());
  else PyErr_SetString(PyExc_RuntimeError, e.what());
  return nullptr;
}

// --- constructors ---------------------------------------------------------------------------------

PyObject* Load(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!Arity(nargs, 4, "load(buffer, offset, outer_strides, inner_stride)")) return nullptr;
  int64_t buffer;
  codegen::Index ix;
  if (!IntArg(args[0], &buffer, "load", "the buffer") || !IndexArgs(args + 1, &ix, "load")) return nullptr;
  return WrapExpr(Expr::Load(static_cast<int>(buffer), std::move(ix)));
}

PyObject* Const(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!Arity(nargs, 2, "const(value, dtype)")) return nullptr;
  DType t;
  if (!ParseDTypeArg(args[1], &t, "const")) return nullptr;
  PyObject* v = args[0];
  if (PyBool_Check(v)) return WrapExpr(Expr::ConstInt(v == Py_True, t));
  if (PyLong_Check(v)) {
    if (codegen::IsFloatDType(t)) {
      const double d = PyLong_AsDouble(v);  // OverflowError past a double's range
      if (d == -1.0 && PyErr_Occurred()) return nullptr;
      return WrapExpr(Expr::Const(d, t));
    }
    long long i = PyLong_AsLongLong(v);
    if (i == -1 && PyErr_Occurred()) return nullptr;
    return WrapExpr(Expr::ConstInt(i, t));
  }
  if (PyFloat_Check(v)) return WrapExpr(Expr::Const(PyFloat_AS_DOUBLE(v), t));
  PyErr_Format(PyExc_TypeError, "kernel_ir.const: the value must be a bool, int or float, got %R", v);
  return nullptr;
}

PyObject* Acc(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  int64_t id;
  if (!Arity(nargs, 1, "acc(id)") || !IntArg(args[0], &id, "acc", "the accumulator id")) return nullptr;
  return WrapExpr(Expr::Acc(static_cast<int>(id)));
}

PyObject* LoopIndex(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  int64_t dim;
  if (!Arity(nargs, 1, "index(dim)") || !IntArg(args[0], &dim, "index", "the dim")) return nullptr;
  return WrapExpr(Expr::LoopIndex(static_cast<int>(dim)));
}

PyObject* Cast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  ExprPtr e;
  DType t;
  if (!Arity(nargs, 2, "cast(expr, dtype)") || !ExprArg(args[0], &e, "cast") || !ParseDTypeArg(args[1], &t, "cast"))
    return nullptr;
  return WrapExpr(Expr::Cast(std::move(e), t));
}

const std::unordered_map<std::string_view, codegen::OpCode>& OpCodes() {
  static const auto* codes = [] {
    auto* m = new std::unordered_map<std::string_view, codegen::OpCode>();
    for (int i = 0; i <= static_cast<int>(codegen::OpCode::kWhere); ++i) {
      auto op = static_cast<codegen::OpCode>(i);
      (*m)[codegen::OpName(op)] = op;
    }
    return m;
  }();
  return *codes;
}

PyObject* MakeOp(codegen::OpCode op, PyObject* const* operands, Py_ssize_t n) {
  if (n != codegen::OpArity(op)) {
    PyErr_Format(PyExc_TypeError, "kernel_ir.op: '%s' takes %d operands, got %zd", codegen::OpName(op),
                 codegen::OpArity(op), n);
    return nullptr;
  }
  std::vector<ExprPtr> args(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!ExprArg(operands[i], &args[i], "op")) return nullptr;
  return WrapExpr(Expr::Op(op, std::move(args)));
}

// kernel_ir.ops.<name>(*operands): one function per operator, its OpCode bound as `self`.
PyObject* OpByCode(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  return MakeOp(static_cast<codegen::OpCode>(PyLong_AsLong(self)), args, nargs);
}

PyObject* Op(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "kernel_ir.op(name, *operands): name must be a str");
    return nullptr;
  }
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(args[0], &n);
  if (s == nullptr) return nullptr;
  auto it = OpCodes().find(std::string_view(s, n));
  if (it == OpCodes().end()) {
    PyErr_Format(PyExc_ValueError, "kernel_ir.op: unknown operator %R", args[0]);
    return nullptr;
  }
  return MakeOp(it->second, args + 1, nargs - 1);
}

// substitute(function, *operands): an element function (its operand i a load of buffer i, Note
// [Pointwise ops as kernel IR]) over the operands' expressions.
PyObject* Substitute(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  ExprPtr fn;
  if (nargs < 1 || !ExprArg(args[0], &fn, "substitute")) return nullptr;
  std::vector<ExprPtr> operands(nargs - 1);
  for (Py_ssize_t i = 1; i < nargs; ++i)
    if (!ExprArg(args[i], &operands[i - 1], "substitute")) return nullptr;
  try {
    return WrapExpr(codegen::SubstituteLoads(fn, operands));
  } catch (const std::exception& e) {
    return Translate(e);
  }
}

PyObject* ParseExpr(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!Arity(nargs, 1, "parse_expr(text)") || !PyUnicode_Check(args[0])) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "kernel_ir.parse_expr: text must be a str");
    return nullptr;
  }
  try {
    return WrapExpr(codegen::ParseExprText(PyUnicode_AsUTF8(args[0])));
  } catch (const std::exception& e) {
    return Translate(e);
  }
}

PyMethodDef g_functions[] = {
    {"load", reinterpret_cast<PyCFunction>(Load), METH_FASTCALL,
     "load(buffer, offset, outer_strides, inner_stride): the kernel's buffer read at an affine index"},
    {"const", reinterpret_cast<PyCFunction>(Const), METH_FASTCALL, "const(value, dtype): a constant"},
    {"acc", reinterpret_cast<PyCFunction>(Acc), METH_FASTCALL, "acc(id): a finished accumulator of an earlier loop"},
    {"index", reinterpret_cast<PyCFunction>(LoopIndex), METH_FASTCALL,
     "index(dim): the loop variable of outer dim `dim` (-1: the inner loop) as an i64"},
    {"cast", reinterpret_cast<PyCFunction>(Cast), METH_FASTCALL, "cast(expr, dtype)"},
    {"op", reinterpret_cast<PyCFunction>(Op), METH_FASTCALL, "op(name, *operands): an operator of codegen::OpCode"},
    {"substitute", reinterpret_cast<PyCFunction>(Substitute), METH_FASTCALL,
     "substitute(function, *operands): an element function whose operand i is a load of buffer i, applied"},
    {"parse_expr", reinterpret_cast<PyCFunction>(ParseExpr), METH_FASTCALL,
     "parse_expr(text): an expression from its canonical text (repr)"},
    {nullptr, nullptr, 0, nullptr}};

// --- the Expr type --------------------------------------------------------------------------------

const ExprPtr& Of(PyObject* self) { return reinterpret_cast<PyExprObject*>(self)->expr; }

void ExprDealloc(PyObject* self) {
  reinterpret_cast<PyExprObject*>(self)->expr.~ExprPtr();
  Py_TYPE(self)->tp_free(self);
}

PyObject* ExprRepr(PyObject* self) { return PyUnicode_FromString(codegen::SerializeExpr(*Of(self)).c_str()); }

Py_hash_t ExprHashFn(PyObject* self) {
  Py_hash_t h = static_cast<Py_hash_t>(codegen::ExprHash(*Of(self)));
  return h == -1 ? -2 : h;
}

PyObject* ExprCompare(PyObject* a, PyObject* b, int op) {
  if (Py_TYPE(b) != &g_expr_type || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  bool eq = codegen::ExprEqual(*Of(a), *Of(b));
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

const char* KindName(Expr::Kind k) {
  switch (k) {
    case Expr::Kind::kLoad: return "load";
    case Expr::Kind::kConst: return "const";
    case Expr::Kind::kAcc: return "acc";
    case Expr::Kind::kIndex: return "index";
    case Expr::Kind::kOp: return "op";
    case Expr::Kind::kCast: return "cast";
  }
  return "?";
}

PyObject* GetKind(PyObject* self, void*) { return PyUnicode_FromString(KindName(Of(self)->kind)); }
PyObject* GetOp(PyObject* self, void*) {
  if (Of(self)->kind != Expr::Kind::kOp) Py_RETURN_NONE;
  return PyUnicode_FromString(codegen::OpName(Of(self)->op));
}
PyObject* GetArgs(PyObject* self, void*) {
  const auto& args = Of(self)->args;
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(args.size()));
  if (t == nullptr) return nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    PyObject* a = WrapExpr(args[i]);
    if (a == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, a);
  }
  return t;
}
PyObject* GetBuffer(PyObject* self, void*) {
  if (Of(self)->kind != Expr::Kind::kLoad) Py_RETURN_NONE;
  return PyLong_FromLong(Of(self)->buffer);
}
PyObject* GetIndex(PyObject* self, void*) {
  const Expr& e = *Of(self);
  if (e.kind != Expr::Kind::kLoad) Py_RETURN_NONE;
  return py::make_tuple(e.index.offset, e.index.outer_strides, e.index.inner_stride).release().ptr();
}
PyObject* GetValue(PyObject* self, void*) {
  const Expr& e = *Of(self);
  if (e.kind != Expr::Kind::kConst) Py_RETURN_NONE;
  if (e.dtype == DType::Bool) return PyBool_FromLong(e.int_value != 0);
  if (codegen::IsFloatDType(e.dtype)) return PyFloat_FromDouble(e.value);
  return PyLong_FromLongLong(e.int_value);
}
PyObject* GetDType(PyObject* self, void*) {
  const Expr& e = *Of(self);
  if (e.kind != Expr::Kind::kConst && e.kind != Expr::Kind::kCast) Py_RETURN_NONE;
  return PyUnicode_FromString(codegen::DTypeName(e.dtype));
}
PyObject* GetAccId(PyObject* self, void*) {
  if (Of(self)->kind != Expr::Kind::kAcc) Py_RETURN_NONE;
  return PyLong_FromLong(Of(self)->acc_id);
}
PyObject* GetDim(PyObject* self, void*) {
  if (Of(self)->kind != Expr::Kind::kIndex) Py_RETURN_NONE;
  return PyLong_FromLong(Of(self)->dim);
}

PyGetSetDef g_expr_getset[] = {
    {"kind", GetKind, nullptr, "'load', 'const', 'acc', 'index', 'op' or 'cast'", nullptr},
    {"op", GetOp, nullptr, "an op's operator name (None for other kinds)", nullptr},
    {"args", GetArgs, nullptr, "an op's operands, a cast's one operand (a tuple of Expr)", nullptr},
    {"buffer", GetBuffer, nullptr, "a load's buffer position", nullptr},
    {"index", GetIndex, nullptr, "a load's index: (offset, [outer strides], inner stride)", nullptr},
    {"value", GetValue, nullptr, "a constant's value (bool, int or float by its dtype)", nullptr},
    {"dtype", GetDType, nullptr, "a constant's dtype, or the dtype a cast converts to", nullptr},
    {"acc_id", GetAccId, nullptr, "an accumulator read's id", nullptr},
    {"dim", GetDim, nullptr, "a loop index's dim (-1: the inner loop)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* ExprCostMethod(PyObject* self, PyObject*) { return PyLong_FromLong(codegen::ExprCost(*Of(self))); }
PyObject* ExprUsesLoopIndex(PyObject* self, PyObject*) {
  bool found = false;
  codegen::ForEachExpr(*Of(self), [&](const Expr& e) { found = found || e.kind == Expr::Kind::kIndex; });
  return PyBool_FromLong(found);
}

PyMethodDef g_expr_methods[] = {
    {"cost", ExprCostMethod, METH_NOARGS,
     "What evaluating it once costs in units of one add (codegen::ExprCost: 4 for a transcendental op or a division)"},
    {"uses_loop_index", ExprUsesLoopIndex, METH_NOARGS, "Whether it reads a loop variable (index(dim))"},
    {nullptr, nullptr, 0, nullptr}};

// --- statements, loops, kernels -------------------------------------------------------------------

ExprPtr ExprFrom(py::handle h, const char* fn) {
  ExprPtr e;
  if (!ExprArg(h.ptr(), &e, fn)) throw py::error_already_set();
  return e;
}

codegen::Index IndexFrom(int64_t offset, std::vector<int64_t> outer_strides, int64_t inner_stride) {
  return codegen::Index{offset, std::move(outer_strides), inner_stride};
}

const char* StmtKindName(codegen::Stmt::Kind k) {
  switch (k) {
    case codegen::Stmt::Kind::kStore: return "store";
    case codegen::Stmt::Kind::kReduce: return "reduce";
    case codegen::Stmt::Kind::kWelford: return "welford";
  }
  return "?";
}

}  // namespace

PyObject* WrapExpr(codegen::ExprPtr e) {
  auto* obj = PyObject_New(PyExprObject, &g_expr_type);
  if (obj == nullptr) return nullptr;
  new (&obj->expr) ExprPtr(std::move(e));
  return reinterpret_cast<PyObject*>(obj);
}

codegen::ExprPtr UnwrapExpr(PyObject* o, const char* what) {
  if (Py_TYPE(o) != &g_expr_type)
    throw py::type_error(StrCat(what, " must be a kernel_ir.Expr, got ", py::repr(o).cast<std::string>()));
  return reinterpret_cast<PyExprObject*>(o)->expr;
}

void InitKernelIrBindings(py::module_& inductor) {
  using codegen::Kernel;
  using codegen::Loop;
  using codegen::Stmt;
  py::module_ m = inductor.def_submodule(
      "kernel_ir", "The kernel IR (codegen/kernel_ir.h) as typed objects: Expr, Stmt, Loop, Kernel and their constructors.");

  g_expr_type.tp_name = "kiln._C._inductor.kernel_ir.Expr";
  g_expr_type.tp_basicsize = sizeof(PyExprObject);
  g_expr_type.tp_dealloc = ExprDealloc;
  g_expr_type.tp_repr = ExprRepr;
  g_expr_type.tp_hash = ExprHashFn;
  g_expr_type.tp_richcompare = ExprCompare;
  g_expr_type.tp_flags = Py_TPFLAGS_DEFAULT;
  g_expr_type.tp_doc = "An immutable kernel IR expression (codegen::Expr); repr is its canonical text, == compares structure.";
  g_expr_type.tp_getset = g_expr_getset;
  g_expr_type.tp_methods = g_expr_methods;
  if (PyType_Ready(&g_expr_type) < 0) throw py::error_already_set();
  Py_INCREF(&g_expr_type);
  m.attr("Expr") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&g_expr_type));
  for (PyMethodDef* def = g_functions; def->ml_name != nullptr; ++def)
    m.attr(def->ml_name) = py::reinterpret_steal<py::object>(PyCFunction_New(def, nullptr));
  // ops.add(a, b), ops.exp(x), ...: as Inductor's `ops` handler spells them; no name lookup per call
  py::module_ ops = m.def_submodule("ops", "One constructor per kernel IR operator: ops.add(a, b), ops.where(c, a, b)");
  constexpr int kNumOps = static_cast<int>(codegen::OpCode::kWhere) + 1;
  static PyMethodDef op_defs[kNumOps];
  for (int i = 0; i < kNumOps; ++i) {
    op_defs[i] = {codegen::OpName(static_cast<codegen::OpCode>(i)), reinterpret_cast<PyCFunction>(OpByCode),
                  METH_FASTCALL, "kernel_ir.op(<this name>, *operands)"};
    py::object code = py::int_(i);
    ops.attr(op_defs[i].ml_name) = py::reinterpret_steal<py::object>(PyCFunction_New(&op_defs[i], code.ptr()));
  }

  py::class_<Stmt>(m, "Stmt", "A loop statement: store, reduce or welford.")
      .def_property_readonly("kind", [](const Stmt& s) { return StmtKindName(s.kind); })
      .def_property_readonly("buffer", [](const Stmt& s) -> py::object {
        return s.kind == Stmt::Kind::kStore ? py::int_(s.buffer) : py::object(py::none());
      })
      .def_property_readonly("index", [](const Stmt& s) -> py::object {
        if (s.kind != Stmt::Kind::kStore) return py::none();
        return py::make_tuple(s.index.offset, s.index.outer_strides, s.index.inner_stride);
      })
      .def_property_readonly("acc_id", [](const Stmt& s) -> py::object {
        return s.kind == Stmt::Kind::kStore ? py::object(py::none()) : py::int_(s.acc_id);
      })
      .def_property_readonly("reduction", [](const Stmt& s) -> py::object {
        return s.kind == Stmt::Kind::kReduce ? py::str(codegen::ReduceName(s.reduce)) : py::object(py::none());
      })
      .def_property_readonly("expr", [](const Stmt& s) { return py::reinterpret_steal<py::object>(WrapExpr(s.expr)); });
  m.def("store",
        [](int buffer, int64_t offset, std::vector<int64_t> outer_strides, int64_t inner_stride, py::handle expr) {
          Stmt s;
          s.kind = Stmt::Kind::kStore;
          s.buffer = buffer;
          s.index = IndexFrom(offset, std::move(outer_strides), inner_stride);
          s.expr = ExprFrom(expr, "store");
          return s;
        },
        py::arg("buffer"), py::arg("offset"), py::arg("outer_strides"), py::arg("inner_stride"), py::arg("expr"),
        "expr stored into the kernel's buffer at an affine index");
  m.def("reduce",
        [](int acc, const std::string& kind, py::handle expr) {
          Stmt s;
          s.kind = Stmt::Kind::kReduce;
          s.acc_id = acc;
          KILN_CHECK_VALUE(codegen::ParseReduce(kind, &s.reduce), "kernel_ir.reduce: unknown reduction '", kind,
                           "' (expected sum max min prod argmax argmin max_last min_last)");
          s.expr = ExprFrom(expr, "reduce");
          return s;
        },
        py::arg("acc"), py::arg("kind"), py::arg("expr"), "expr reduced into accumulator `acc` along the loop");
  m.def("welford",
        [](int acc, py::handle expr) {
          Stmt s;
          s.kind = Stmt::Kind::kWelford;
          s.acc_id = acc;
          s.expr = ExprFrom(expr, "welford");
          return s;
        },
        py::arg("acc"), py::arg("expr"), "Welford's mean, m2 and count of expr into accumulators acc, acc+1, acc+2");
  py::class_<Loop>(m, "Loop", "An inner loop of `extent` iterations running its statements in order.")
      .def(py::init([](int64_t extent, std::vector<Stmt> stmts) { return Loop{extent, std::move(stmts)}; }),
           py::arg("extent"), py::arg("stmts"))
      .def_readonly("extent", &Loop::extent)
      .def_readonly("stmts", &Loop::stmts);
  py::class_<Kernel, std::shared_ptr<Kernel>>(
      m, "Kernel", "One generated function: its buffers, outer extents and loops; checked when made (codegen::Validate).")
      .def(py::init([](std::string name, const std::vector<std::pair<std::string, std::string>>& buffers,
                       std::vector<int64_t> outer, std::vector<Loop> loops) {
             auto k = std::make_shared<Kernel>();
             k->name = std::move(name);
             for (const auto& [buffer, dtype] : buffers) {
               codegen::Buffer b{buffer, DType::F32};
               KILN_CHECK_VALUE(codegen::ParseDType(dtype, &b.dtype), "[inductor.compile] buffer '", buffer,
                                "': unknown dtype '", dtype, "'");
               k->buffers.push_back(std::move(b));
             }
             k->outer = std::move(outer);
             k->loops = std::move(loops);
             codegen::Validate(*k);
             return k;
           }),
           py::arg("name"), py::arg("buffers"), py::arg("outer"), py::arg("loops"))
      .def_static("parse",
                  [](const std::string& text) {
                    auto k = std::make_shared<Kernel>(codegen::ParseKernelText(text));
                    codegen::Validate(*k);
                    return k;
                  },
                  py::arg("text"), "A kernel from its canonical text (str(kernel))")
      .def_readonly("name", &Kernel::name)
      .def_property_readonly("buffers", [](const Kernel& k) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& b : k.buffers) out.emplace_back(b.name, codegen::DTypeName(b.dtype));
        return out;
      }, "(name, dtype) of each argument, in order")
      .def_readonly("outer", &Kernel::outer)
      .def_readonly("loops", &Kernel::loops)
      .def("renamed", [](const Kernel& k, std::string name) {
        auto out = std::make_shared<Kernel>(k);
        out->name = std::move(name);
        codegen::Validate(*out);
        return out;
      }, py::arg("name"), "The same kernel under another name")
      .def_property_readonly("hash", [](const Kernel& k) { return codegen::HashKernel(k); },
                             "128-bit FNV hash of its canonical text (name included), as hex")
      .def("code", [](const Kernel& k) { return codegen::PrintKernel(k); }, "The readable C-like listing")
      .def("__str__", [](const Kernel& k) { return codegen::Serialize(k); })
      .def("__repr__", [](const Kernel& k) {
        return StrCat("<kiln._C._inductor.kernel_ir.Kernel ", k.name, " ", codegen::HashKernel(k), ">");
      });
}

}  // namespace kiln::python
