// python/csrc/python_symbolic.cc: bindings of fx/symbolic_shapes (kiln._C._ShapeEnv, kiln._C._SymNode,
// kiln._C._SymExpr: a node's expression as a typed tree) and the conversions between C++ SymInts
// and the Python classes of kiln/_symbolic.py.
#include "python/csrc/python_symbolic.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "fx/symbolic_shapes.h"
#include "python/csrc/python_tensor.h"
#include "tensor/empty.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using fx::ShapeEnv;
using fx::SymExprNode;
using NodePtr = std::shared_ptr<SymExprNode>;

PyObject* SymClass(const char* name) {
  PyObject* mod = PyImport_ImportModule("kiln._symbolic");
  if (!mod) throw py::error_already_set();
  PyObject* cls = PyObject_GetAttrString(mod, name);
  Py_DECREF(mod);
  if (!cls) throw py::error_already_set();
  return cls;  // kept for the life of the process
}
PyObject* SymIntClass() { static PyObject* c = SymClass("SymInt"); return c; }
PyObject* SymFloatClass() { static PyObject* c = SymClass("SymFloat"); return c; }
PyObject* SymBoolClass() { static PyObject* c = SymClass("SymBool"); return c; }

NodePtr NodeOf(const SymNodePtr& n) {
  auto e = std::dynamic_pointer_cast<SymExprNode>(n);
  KILN_CHECK(e != nullptr, "a symbolic value not made by a ShapeEnv cannot reach Python");
  return e;
}

py::object WrapNode(const SymNodePtr& n) {
  NodePtr node = NodeOf(n);
  fx::Expr e = node->expr();
  PyObject* cls = e->is_float ? SymFloatClass()
                  : (node->is_bool() ? SymBoolClass() : SymIntClass());
  py::object pynode = py::cast(node);
  return py::reinterpret_steal<py::object>(PyObject_CallOneArg(cls, pynode.ptr()));
}

py::object SymToPy(const SymInt& s) { return py::reinterpret_steal<py::object>(SymIntToPython(s)); }

// PyTorch passes Source objects; kiln keeps their text ("L['x']").
std::string SourceName(const py::object& source) { return source.is_none() ? "" : py::str(source).cast<std::string>(); }

py::object OptInt(int64_t v, int64_t inf) { return v == inf ? py::none() : py::object(py::int_(v)); }

// The user's frame for a guard: kiln._symbolic._user_frame() (looked up on each call, so the C++
// ShapeEnv holds no Python object and may die on any thread).
// Only on a thread that holds the GIL: a guard on a worker thread must not wait for it.
std::string PythonUserFrame() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return "";
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // a pending Python error survives the call
  std::string out;
  if (PyObject* mod = PyImport_ImportModule("kiln._symbolic")) {
    if (PyObject* r = PyObject_CallMethod(mod, "_user_frame", nullptr)) {
      if (PyUnicode_Check(r)) out = PyUnicode_AsUTF8(r);
      Py_DECREF(r);
    }
    Py_DECREF(mod);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return out;
}

}  // namespace

bool IsSymObject(PyObject* o) {
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  return t == SymIntClass() || t == SymFloatClass() || t == SymBoolClass() ||
         PyObject_IsInstance(o, SymIntClass()) == 1;
}
bool IsSymIntObject(PyObject* o) {
  if (PyLong_Check(o) || PyFloat_Check(o) || IsTensor(o)) return false;
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(SymIntClass()));
}

SymInt UnpackSymInt(PyObject* o) {
  PyObject* node = PyObject_GetAttrString(o, "node");
  if (!node) throw py::error_already_set();
  py::object holder = py::reinterpret_steal<py::object>(node);
  return SymInt(std::static_pointer_cast<SymNode>(holder.cast<NodePtr>()));
}

PyObject* SymIntToPython(const SymInt& s) {
  if (!s.is_symbolic()) return PyLong_FromLongLong(s.expect_int());
  if (!NodeOf(s.node())->is_float()) {
    if (auto v = s.maybe_as_int()) return PyLong_FromLongLong(*v);
  }
  return WrapNode(s.node()).release().ptr();
}

// An expression of fx/sym_expr.h as Python sees it: its kind, arguments and leaf values, so Python
// walks the tree (make_fx's size nodes) instead of parsing its printed text. Expression nodes are
// interned for the life of the process, so holding the pointer is enough.
struct PyExpr {
  fx::Expr e;
};

void InitExprBindings(py::module& m) {
  py::enum_<fx::ExprKind>(m, "_SymExprKind")
      .value("Integer", fx::ExprKind::kInteger).value("Float", fx::ExprKind::kFloat)
      .value("Bool", fx::ExprKind::kBool).value("Symbol", fx::ExprKind::kSymbol)
      .value("Add", fx::ExprKind::kAdd).value("Mul", fx::ExprKind::kMul).value("Pow", fx::ExprKind::kPow)
      .value("FloorDiv", fx::ExprKind::kFloorDiv).value("Mod", fx::ExprKind::kMod)
      .value("Min", fx::ExprKind::kMin).value("Max", fx::ExprKind::kMax)
      .value("TrueDiv", fx::ExprKind::kTrueDiv).value("ToFloat", fx::ExprKind::kToFloat)
      .value("Trunc", fx::ExprKind::kTrunc)
      .value("Eq", fx::ExprKind::kEq).value("Ne", fx::ExprKind::kNe).value("Lt", fx::ExprKind::kLt)
      .value("Le", fx::ExprKind::kLe).value("Gt", fx::ExprKind::kGt).value("Ge", fx::ExprKind::kGe)
      .value("Not", fx::ExprKind::kNot).value("And", fx::ExprKind::kAnd).value("Or", fx::ExprKind::kOr);
  py::class_<PyExpr>(m, "_SymExpr", "a symbolic-shape expression as a tree (fx/sym_expr.h)")
      .def_property_readonly("kind", [](const PyExpr& x) { return x.e->kind; })
      .def_property_readonly("args", [](const PyExpr& x) {
        py::tuple out(x.e->args.size());
        for (size_t i = 0; i < x.e->args.size(); ++i) out[i] = py::cast(PyExpr{x.e->args[i]});
        return out;
      })
      .def_property_readonly("value", [](const PyExpr& x) -> py::object {
        switch (x.e->kind) {
          case fx::ExprKind::kInteger: return py::int_(x.e->ival);
          case fx::ExprKind::kFloat: return py::float_(x.e->fval);
          case fx::ExprKind::kBool: return py::bool_(x.e->ival != 0);
          case fx::ExprKind::kPow: return py::int_(x.e->ival);  // the exponent
          default: return py::none();
        }
      }, "an Integer's, Float's or Bool's value, a Pow's exponent; else None")
      .def_property_readonly("name", [](const PyExpr& x) -> std::optional<std::string> {
        if (x.e->is_symbol()) return x.e->name;
        return std::nullopt;
      })
      .def_property_readonly("is_float", [](const PyExpr& x) { return x.e->is_float; })
      .def("__str__", [](const PyExpr& x) { return fx::Str(x.e); })
      .def("__repr__", [](const PyExpr& x) { return StrCat("_SymExpr(", fx::Str(x.e), ")"); })
      .def("__eq__", [](const PyExpr& x, const PyExpr& y) { return x.e == y.e; })  // hash-consed
      .def("__hash__", [](const PyExpr& x) { return std::hash<const void*>()(x.e); });
}

void InitSymbolicBindings(py::module& m) {
  InitExprBindings(m);
  py::class_<SymExprNode, NodePtr>(m, "_SymNode")
      .def("add", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.add(b)); })
      .def("sub", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.sub(b)); })
      .def("mul", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.mul(b)); })
      .def("floordiv", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.floordiv(b)); })
      .def("mod", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.mod(b)); })
      .def("truediv", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.truediv(b)); })
      .def("sym_min", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.min(b)); })
      .def("sym_max", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.max(b)); })
      .def("eq", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.eq(b)); })
      .def("ne", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.ne(b)); })
      .def("lt", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.lt(b)); })
      .def("le", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.le(b)); })
      .def("gt", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.gt(b)); })
      .def("ge", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.ge(b)); })
      .def("sym_and", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.sym_and(b)); })
      .def("sym_or", [](SymExprNode& a, const NodePtr& b) { return NodeOf(a.sym_or(b)); })
      .def("sym_not", [](SymExprNode& a) { return NodeOf(a.sym_not()); })
      .def("neg", [](SymExprNode& a) { return NodeOf(a.neg()); })
      .def("sym_float", [](SymExprNode& a) { return NodeOf(a.sym_float()); })
      .def("sym_int", [](SymExprNode& a) { return NodeOf(a.sym_int()); })
      .def("pow", [](SymExprNode& a, int64_t n) { return NodeOf(a.pow(n)); })
      .def("wrap_int", [](SymExprNode& a, int64_t v) { return NodeOf(a.wrap_int(v)); })
      .def("wrap_float", [](SymExprNode& a, double v) { return NodeOf(a.wrap_float(v)); })
      .def("wrap_bool", [](SymExprNode& a, bool v) { return NodeOf(a.wrap_bool(v)); })
      .def("guard_int", [](SymExprNode& a, const std::string& file, int line) {
        return a.guard_int(file.c_str(), line);
      })
      .def("guard_bool", [](SymExprNode& a, const std::string& file, int line) {
        return a.guard_bool(file.c_str(), line);
      })
      .def("guard_float", [](SymExprNode& a, const std::string& file, int line) {
        return a.guard_float(file.c_str(), line);
      })
      .def("maybe_as_int", [](SymExprNode& a) { return a.maybe_as_int(); })
      .def("maybe_as_float", [](SymExprNode& a) -> std::optional<double> {
        fx::Expr e = a.expr();
        if (e->kind == fx::ExprKind::kFloat) return e->fval;
        if (e->is_integer()) return static_cast<double>(e->ival);
        return std::nullopt;
      })
      .def("maybe_as_bool", [](SymExprNode& a) -> std::optional<bool> {
        fx::Expr e = a.expr();
        if (e->is_bool_const()) return e->ival != 0;
        return std::nullopt;
      })
      .def("is_int", [](SymExprNode& a) { return !a.is_float() && !a.is_bool(); })
      .def("is_float", &SymExprNode::is_float)
      .def("is_bool", &SymExprNode::is_bool)
      .def("has_hint", &SymExprNode::has_hint)
      .def("hint", [](SymExprNode& a) -> py::object {
        auto v = a.hint();
        if (!v) return py::none();
        if (v->is_float) return py::float_(v->f);
        if (a.is_bool()) return py::bool_(v->i != 0);
        return py::int_(v->i);
      })
      .def("str", &SymExprNode::str)
      .def("symbol_name", [](SymExprNode& a) -> std::optional<std::string> {
        fx::Expr e = a.expr();
        if (e->is_symbol()) return e->name;
        return std::nullopt;
      }, "the symbol's name when the value is one symbol (s0, u1), else None")
      .def_property_readonly("expr", &SymExprNode::str)  // PyTorch's node.expr (a sympy expr there)
      .def_property_readonly("sym_expr", [](SymExprNode& a) { return PyExpr{a.expr()}; },
                             "the expression as a typed tree (kiln._C._SymExpr)")
      .def("__repr__", &SymExprNode::str)
      .def("free_symbols", [](SymExprNode& a) {
        std::vector<std::string> out;
        for (fx::Expr s : fx::FreeSymbols(a.expr())) out.push_back(s->name);
        return out;
      })
      .def("statically_known", [](SymExprNode& a) { return a.env()->StaticallyKnown(a.expr()); })
      .def("bound", [](SymExprNode& a) {
        fx::ValueRange r = a.env()->BoundOf(a.expr());
        return py::make_tuple(OptInt(r.lo, fx::kNegInf), OptInt(r.hi, fx::kPosInf));
      })
      .def("check", [](SymExprNode& a, const std::string& location, const std::string& message) {
        a.env()->Check(a.expr(), location, message);
      })
      .def("check_is_size", [](SymExprNode& a, const std::string& location) {
        a.env()->CheckIsSize(a.expr(), location);
      })
      .def_property_readonly("shape_env", [](SymExprNode& a) { return a.env(); });

  py::class_<ShapeEnv, std::shared_ptr<ShapeEnv>>(m, "_ShapeEnv", py::dynamic_attr())
      .def(py::init([](bool duck_shape, bool specialize_zero_one) {
             return ShapeEnv::Create(ShapeEnv::Options{duck_shape, specialize_zero_one});
           }),
           py::arg("duck_shape") = true, py::arg("specialize_zero_one") = true)
      .def("create_symbol", [](ShapeEnv& env, int64_t hint, py::object source) {
        return SymToPy(env.CreateSymbol(hint, SourceName(source)));
      }, py::arg("val"), py::arg("source") = py::none())
      .def("create_unbacked_symint", [](ShapeEnv& env, std::optional<int64_t> lo, std::optional<int64_t> hi,
                                         bool size_like) {
        return SymToPy(env.CreateUnbackedSymInt(fx::ValueRange{lo ? *lo : fx::kNegInf, hi ? *hi : fx::kPosInf},
                                                size_like));
      }, py::arg("min") = py::none(), py::arg("max") = py::none(), py::arg("size_like") = false)
      .def("create_unbacked_symfloat", [](ShapeEnv& env) { return SymToPy(env.CreateUnbackedSymFloat()); })
      .def("create_symbolic_sizes_strides_storage_offset", [](ShapeEnv& env, py::handle t, py::object source,
                                                               py::kwargs) {
        if (!IsTensor(t.ptr())) throw TypeError("create_symbolic_sizes_strides_storage_offset expects a Tensor");
        auto l = env.CreateSymbolicSizesStridesOffset(UnpackTensor(t.ptr()), SourceName(source));
        py::list sizes, strides;
        for (const SymInt& s : l.sizes) sizes.append(SymToPy(s));
        for (const SymInt& s : l.strides) strides.append(SymToPy(s));
        return py::make_tuple(py::tuple(sizes), py::tuple(strides), SymToPy(l.storage_offset));
      }, py::arg("ex"), py::arg("source") = py::none())
      .def("_meta_tensor", [](ShapeEnv& env, py::handle t, py::object source) {
        // A storage-less meta tensor with t's dtype and symbolic sizes/strides (tests, FakeTensorMode).
        if (!IsTensor(t.ptr())) throw TypeError("expected a Tensor");
        const Tensor& src = UnpackTensor(t.ptr());
        auto l = env.CreateSymbolicSizesStridesOffset(src, SourceName(source));
        Tensor out = EmptyTensor(l.sizes, src.dtype(), Device(DeviceType::Meta), l.strides);
        return py::reinterpret_steal<py::object>(WrapTensor(out));
      }, py::arg("tensor"), py::arg("source") = py::none())
      .def("_guards", [](ShapeEnv& env) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const fx::Guard& g : env.guards()) out.emplace_back(fx::Str(g.expr), g.location);
        return out;
      })
      .def("_python_guards", [](ShapeEnv& env, const std::map<std::string, std::string>& sources) {
        // Each guard as Python source over the symbols' sources. A replaced symbol no size names
        // any more (x.size()[0] is 6 once Eq(s0, 6) specialised s0) stands for its replacement,
        // so the guard that made it is true there and left out, as is an equality whose sides
        // read the same source (a unification the size checks state).
        std::map<fx::Expr, fx::Expr> unnamed;
        for (const auto& [s, v] : env.replacements()) {
          if (!sources.count(s->name)) unnamed.emplace(s, v);
        }
        std::vector<std::string> out;
        for (const fx::Guard& g : env.guards()) {
          const fx::Expr e = fx::Substitute(g.expr, unnamed);
          if (e->is_bool_const() && e->ival != 0) continue;
          if (e->kind == fx::ExprKind::kEq &&
              fx::PythonStr(e->args[0], sources) == fx::PythonStr(e->args[1], sources)) {
            continue;
          }
          out.push_back(fx::PythonStr(e, sources));
        }
        return out;
      }, py::arg("sources"))
      .def("_raw_guards", [](ShapeEnv& env) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const fx::Guard& g : env.raw_guards()) out.emplace_back(fx::Str(g.expr), g.location);
        return out;
      })
      .def("_format_guards", &ShapeEnv::FormatGuards, py::arg("with_locations") = false)
      .def("_evaluate_guards", &ShapeEnv::EvaluateGuards)
      .def("_var_to_val", [](ShapeEnv& env) {
        std::map<std::string, int64_t> out;
        for (const auto& [s, v] : env.var_to_val()) out[s->name] = v;
        return out;
      })
      .def("_var_to_range", [](ShapeEnv& env) {
        py::dict out;
        for (const auto& [s, r] : env.var_to_range())
          out[py::str(s->name)] = py::make_tuple(OptInt(r.lo, fx::kNegInf), OptInt(r.hi, fx::kPosInf));
        return out;
      })
      .def("_replacements", [](ShapeEnv& env) {
        std::map<std::string, std::string> out;
        for (const auto& [s, v] : env.replacements()) out[s->name] = fx::Str(v);
        return out;
      })
      .def("_var_to_sources", [](ShapeEnv& env) {
        std::map<std::string, std::string> out;
        for (const auto& [s, v] : env.var_to_sources()) out[s->name] = v;
        return out;
      })
      .def("_size_like", [](ShapeEnv& env) {
        std::vector<std::string> out;
        for (fx::Expr s : env.size_like()) out.push_back(s->name);
        return out;
      })
      .def("_record_python_locations", [](ShapeEnv& env, bool on) {
        env.location_provider = on ? std::function<std::string()>(&PythonUserFrame) : nullptr;
      })
      // Note [Unbacked symbols through a thread-local context]: install as this thread's context;
      // returns the previous one (None or a _ShapeEnv) for the caller to restore.
      .def("_set_as_symbolic_context", [](std::shared_ptr<ShapeEnv> env) -> py::object {
        SymbolicContextPtr prev = TlsSymbolicContext();
        TlsSymbolicContext() = env;
        auto prev_env = std::dynamic_pointer_cast<ShapeEnv>(prev);
        return prev_env ? py::cast(prev_env) : py::none();
      });
  m.def("_clear_symbolic_context", [] { TlsSymbolicContext() = nullptr; });
  m.def("_get_symbolic_context", []() -> py::object {
    auto env = std::dynamic_pointer_cast<ShapeEnv>(TlsSymbolicContext());
    return env ? py::cast(env) : py::none();
  });
  m.def("_sym_sizes", [](py::handle t) {
    if (!IsTensor(t.ptr())) throw TypeError("expected a Tensor");
    py::list out;
    for (const SymInt& s : UnpackTensor(t.ptr())->sym_sizes()) out.append(SymToPy(s));
    return py::tuple(out);
  });
}

}  // namespace kiln::python
