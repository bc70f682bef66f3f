// python/csrc/python_make_fx.cc: kiln._C._MakeFxTracer, the Python handle on fx/tracer.h that
// kiln.fx.experimental.proxy_tensor.make_fx drives: placeholders, the traced call, the output
// structure, constants, decompositions and how meta["val"] is made.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unordered_map>

#include "fx/tracer.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/python_symbolic.h"
#include "python/csrc/tensor_caster.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// A Python result back onto the stack, following the op's returns.
void ResultToStack(const Op& op, py::handle r, Stack& stack) {
  stack.clear();
  const FunctionSchema& s = op.schema();
  auto one = [&](py::handle x, const kiln::Argument& ret) {
    if (x.is_none()) { stack.emplace_back(Tensor()); return; }
    if (ret.kind == TypeKind::TensorList) {
      std::vector<Tensor> l;
      for (py::handle t : x) l.push_back(t.cast<Tensor>());
      stack.emplace_back(std::move(l));
      return;
    }
    stack.emplace_back(x.cast<Tensor>());
  };
  if (s.returns.size() == 1 && !s.returns_tuple) return one(r, s.returns[0]);
  size_t i = 0;
  for (py::handle x : r) {
    KILN_CHECK(i < s.returns.size(), "decomposition of ", op.name(), " returned too many values");
    one(x, s.returns[i++]);
  }
  KILN_CHECK(i == s.returns.size(), "decomposition of ", op.name(), " returned ", i, " values, expected ",
             s.returns.size());
}

class PyTracer {
 public:
  PyTracer() : tracer_(std::make_shared<fx::Graph>()) {}

  void Placeholder(const std::string& name, py::handle t) {
    tracer_.Placeholder(name, IsTensor(t.ptr()) ? UnpackTensor(t.ptr()) : Tensor());
  }

  void SetGetitem(py::handle fn) { tracer_.getitem_target = MakePyValue(fn); }

  void SetDecompositions(py::dict table) {
    decomps_.clear();
    for (auto kv : table) {
      py::handle key = kv.first;
      if (!py::hasattr(key, "_full_name")) continue;  // packets and non-aten keys: not ops
      const Op* op = Registry::Get().Find(key.attr("_full_name").cast<std::string>());
      if (op) decomps_[op] = py::reinterpret_borrow<py::object>(kv.second);
    }
    if (decomps_.empty()) { tracer_.decompose = nullptr; return; }
    tracer_.decompose = [this](const Op& op, Stack& stack) -> bool {
      auto it = decomps_.find(&op);
      if (it == decomps_.end()) return false;
      py::gil_scoped_acquire gil;
      const FunctionSchema& s = op.schema();
      py::list args;
      py::dict kwargs;
      for (size_t i = 0; i < s.arguments.size() && i < stack.size(); ++i) {
        py::object v = IValueToPython(stack[i]);
        if (s.arguments[i].kwarg_only) kwargs[py::str(s.arguments[i].name)] = v;
        else args.append(v);
      }
      py::object r = it->second(*py::tuple(args), **kwargs);
      if (r.is(py::module_::import("builtins").attr("NotImplemented"))) return false;
      ResultToStack(op, r, stack);
      return true;
    };
  }

  void SetMakeVal(py::object fn) {
    if (fn.is_none()) { tracer_.make_val = nullptr; return; }
    make_val_ = std::move(fn);
    tracer_.make_val = [this](const Tensor& t) -> fx::Argument {
      py::gil_scoped_acquire gil;
      return ToArgument(make_val_(py::reinterpret_steal<py::object>(WrapTensor(t))));
    };
  }

  // Symbolic tracing: `fn(sym)` returns the node (or number) standing for a symbolic size.
  void SetSymArg(py::object fn) {
    if (fn.is_none()) { tracer_.sym_arg = nullptr; return; }
    sym_arg_ = std::move(fn);
    tracer_.sym_arg = [this](const SymInt& s) -> std::optional<fx::Argument> {
      py::gil_scoped_acquire gil;
      py::object r = sym_arg_(py::reinterpret_steal<py::object>(SymIntToPython(s)));
      if (r.is_none()) return std::nullopt;
      return ToArgument(r);
    };
  }

  py::object Trace(py::object fn, py::args args) {
    fx::TracingGuard guard(&tracer_);
    return fn(*args);
  }

  // The output node over f's return structure: tensors as their nodes (tensors f returned
  // without computing them become constants), containers kept.
  fx::Argument OutputArg(py::handle o) {
    if (IsTensor(o.ptr())) return tracer_.TensorArg(UnpackTensor(o.ptr()));
    if (PyTuple_Check(o.ptr()) || PyList_Check(o.ptr())) {
      std::vector<fx::Argument> items;
      for (py::handle x : o) items.push_back(OutputArg(x));
      return PyList_Check(o.ptr()) ? fx::Argument::List(std::move(items)) : fx::Argument::Tuple(std::move(items));
    }
    if (PyDict_Check(o.ptr())) {
      std::vector<fx::Argument> keys, values;
      for (auto kv : py::reinterpret_borrow<py::dict>(o)) {
        keys.push_back(ToArgument(kv.first));
        values.push_back(OutputArg(kv.second));
      }
      return fx::Argument::Dict(std::move(keys), std::move(values));
    }
    return ToArgument(o);
  }
  void Output(py::handle result) { tracer_.graph().Output(OutputArg(result)); }

  py::object Graph() { return WrapGraph(tracer_.graph_ptr()); }
  // The node that computed t in this trace, or None (no node is made for an unknown tensor).
  py::object NodeFor(py::handle t) {
    if (!IsTensor(t.ptr())) return py::none();
    fx::Node* n = tracer_.NodeFor(UnpackTensor(t.ptr()));
    return n ? py::cast(n, py::return_value_policy::reference) : py::none();
  }
  std::vector<std::pair<std::string, Tensor>> Constants() const { return tracer_.constants(); }
  size_t OpsRecorded() const { return tracer_.ops_recorded(); }

 private:
  fx::Tracer tracer_;
  std::unordered_map<const Op*, py::object> decomps_;
  py::object make_val_;
  py::object sym_arg_;
};

}  // namespace

void InitMakeFxBindings(py::module_& m) {
  py::class_<PyTracer>(m, "_MakeFxTracer")
      .def(py::init<>())
      .def("placeholder", &PyTracer::Placeholder)
      .def("set_getitem", &PyTracer::SetGetitem)
      .def("set_decompositions", &PyTracer::SetDecompositions)
      .def("set_make_val", &PyTracer::SetMakeVal)
      .def("set_sym_arg", &PyTracer::SetSymArg)
      .def("trace", &PyTracer::Trace)
      .def("output", &PyTracer::Output)
      .def("graph", &PyTracer::Graph)
      .def("node_for", &PyTracer::NodeFor)
      .def("constants", &PyTracer::Constants)
      .def("ops_recorded", &PyTracer::OpsRecorded);
}

}  // namespace kiln::python
