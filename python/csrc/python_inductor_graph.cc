// python/csrc/python_inductor_graph.cc: kiln._C._inductor.graph (inductor/graph): GraphLowering, the
// walk that lowers an aten graph to the wrapper's steps (Note [Lowering a graph]), its records and
// the hooks through which Python decides what only Python can (a lowering in an op's place,
// max-autotune's choice, the bisector's switches). python/kiln/_inductor/graph.py turns the records
// into the wrapper's steps (wrapper.py).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inductor/graph/graph_lowering.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/python_inductor.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using inductor::graph::ExternCall;
using inductor::graph::FallbackRecord;
using inductor::graph::GraphKwargs;
using inductor::graph::GraphLowering;
using inductor::graph::GraphValue;
using inductor::graph::HookChoice;
using inductor::graph::Record;

// A value of the walk as Python sees it: a Buffer, Pointwise or Reduction, a tuple or list, a constant.
py::object ToPython(const GraphValue& v) {
  switch (v.kind) {
    case GraphValue::Kind::kValue:
      return py::cast(v.value);
    case GraphValue::Kind::kTuple: {
      py::tuple t(v.items.size());
      for (size_t i = 0; i < v.items.size(); ++i) t[i] = ToPython(v.items[i]);
      return std::move(t);
    }
    case GraphValue::Kind::kList: {
      py::list l;
      for (const GraphValue& x : v.items) l.append(ToPython(x));
      return std::move(l);
    }
    case GraphValue::Kind::kConst:
      break;
  }
  return FromArgument(v.constant);
}

GraphValue FromPython(const py::handle& o) {
  if (py::isinstance<inductor::ir::Value>(o)) return GraphValue::Of(o.cast<std::shared_ptr<inductor::ir::Value>>());
  if (PyTuple_Check(o.ptr()) || PyList_Check(o.ptr())) {
    std::vector<GraphValue> items;
    for (const py::handle& x : o) items.push_back(FromPython(x));
    return GraphValue::Seq(PyTuple_Check(o.ptr()) ? GraphValue::Kind::kTuple : GraphValue::Kind::kList, std::move(items));
  }
  return GraphValue::Const(ToArgument(o));
}

py::list ListOf(const std::vector<GraphValue>& values) {
  py::list out;
  for (const GraphValue& v : values) out.append(ToPython(v));
  return out;
}

py::dict DictOf(const GraphKwargs& kwargs) {
  py::dict out;
  for (const auto& [k, v] : kwargs) out[py::str(k)] = ToPython(v);
  return out;
}

py::object NodeOf(const fx::Node* n) { return NodeObject(const_cast<fx::Node*>(n)); }

const char* KindName(Record::Kind kind) {
  switch (kind) {
    case Record::Kind::kAlloc: return "alloc";
    case Record::Kind::kKernel: return "kernel";
    case Record::Kind::kView: return "view";
    case Record::Kind::kExtern: return "extern";
    case Record::Kind::kReturn: return "return";
  }
  return "";
}

const ExternCall& CallOf(const Record& r) {
  if (!r.call) throw py::attribute_error(std::string("a ") + KindName(r.kind) + " record calls no extern op");
  return *r.call;
}

// The lowered value of one node (the pre-fusion listing's line).
struct LoweredNode {
  const fx::Node* node;
  GraphValue value;
};

}  // namespace

void InitInductorGraphBindings(py::module_& inductor) {
  py::module_ m = inductor.def_submodule("graph", "An aten graph lowered to the wrapper's steps (inductor/graph).");

  py::class_<HookChoice>(m, "Extern",
                         "What a lowering hook returns for a node that runs eagerly: why, and the callable it runs "
                         "(the node's own op by default).")
      .def(py::init([](std::string why, const py::object& target) {
             HookChoice c;
             c.kind = HookChoice::Kind::kExtern;
             c.why = std::move(why);
             if (!target.is_none()) c.target = ToTarget(fx::Opcode::kCallFunction, target);
             return c;
           }), py::arg("why"), py::arg("target") = py::none())
      .def_readonly("why", &HookChoice::why);

  py::class_<Record>(m, "Record", "One of the wrapper's steps: alloc, kernel, view, extern or return.")
      .def_property_readonly("kind", [](const Record& r) { return KindName(r.kind); })
      .def_readonly("buf", &Record::buf, "alloc: the buffer a kernel writes; view: the view.")
      .def_readonly("base", &Record::base, "view: the buffer it views.")
      .def_readonly("kernel", &Record::kernel, "kernel: the FormedKernel.")
      .def_property_readonly("target", [](const Record& r) { return FromTarget(CallOf(r).target); })
      .def_property_readonly("args", [](const Record& r) { return ListOf(CallOf(r).args); })
      .def_property_readonly("kwargs", [](const Record& r) { return DictOf(CallOf(r).kwargs); })
      .def_property_readonly("results", [](const Record& r) { return CallOf(r).results; },
                             "extern: a Buffer per result (None for a non-tensor one).")
      .def_property_readonly("unpack", [](const Record& r) { return CallOf(r).unpack; })
      .def_property_readonly("stack_traces", [](const Record& r) { return CallOf(r).stack_traces; })
      .def_property_readonly("values", [](const Record& r) { return ListOf(r.values); }, "return: the graph's outputs.");

  py::class_<FallbackRecord>(m, "Fallback", "A node that runs eagerly, and why.")
      .def_property_readonly("target", [](const FallbackRecord& f) { return FromTarget(f.target); })
      .def_readonly("why", &FallbackRecord::why);

  py::class_<LoweredNode>(m, "LoweredNode", "A node and its value before kernels were formed.")
      .def_property_readonly("node", [](const LoweredNode& l) { return NodeOf(l.node); })
      .def_property_readonly("value", [](const LoweredNode& l) { return ToPython(l.value); });

  py::class_<GraphLowering>(m, "GraphLowering", "An aten graph lowered to the wrapper's steps (Note [Lowering a graph]).")
      .def(py::init([](const py::handle& graph, std::optional<std::map<int64_t, std::vector<int64_t>>> output_strides) {
             return std::make_unique<GraphLowering>(UnwrapGraph(graph), std::move(output_strides));
           }), py::arg("graph"), py::arg("output_strides") = py::none())
      .def("run",
           [](GraphLowering& g, const py::object& lower, const py::object& allow_fusion) {
             inductor::graph::Hooks hooks;
             if (!lower.is_none()) {
               hooks.lower = [&lower](const fx::Node& n, const std::vector<GraphValue>& args, const GraphKwargs& kwargs) {
                 py::tuple pargs(args.size());
                 for (size_t i = 0; i < args.size(); ++i) pargs[i] = ToPython(args[i]);
                 py::object r = lower(NodeOf(&n), pargs, DictOf(kwargs));
                 if (r.is_none()) return HookChoice{};
                 if (py::isinstance<HookChoice>(r)) return r.cast<HookChoice>();
                 HookChoice c;
                 c.kind = HookChoice::Kind::kValue;
                 c.value = FromPython(r);
                 return c;
               };
             }
             if (!allow_fusion.is_none())
               hooks.allow_fusion = [&allow_fusion](const fx::Node& n) { return allow_fusion(NodeOf(&n)).cast<bool>(); };
             g.Run(hooks);
           },
           py::arg("lower") = py::none(), py::arg("allow_fusion") = py::none(),
           "Lowers the graph. `lower(node, args, kwargs)`: None (the lowering table's), a value or tuple of values, or "
           "an Extern; `allow_fusion(node)`: False realizes the node's value at once.")
      .def_property_readonly("records", [](const GraphLowering& g) { return g.records(); })
      .def_property_readonly("inputs", [](const GraphLowering& g) { return g.inputs(); })
      .def_property_readonly("fallbacks", [](const GraphLowering& g) { return g.fallbacks(); })
      .def_property_readonly("lowered", [](const GraphLowering& g) {
        std::vector<LoweredNode> out;
        for (const auto& [node, value] : g.lowered()) out.push_back({node, value});
        return out;
      });
}

}  // namespace kiln::python
