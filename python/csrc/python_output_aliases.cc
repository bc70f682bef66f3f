// python/csrc/python_output_aliases.cc: kiln._C._aot.find_output_aliases and walk_views
// (aot/output_aliases.h), the outputs of a traced function that view an input or another output
// and the view ops that made them, as typed OutputAlias, StridedLayout and ViewChain objects for
// the runtime that rebuilds those views (python/kiln/_functorch/_aot_autograd/output_analysis.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "aot/output_aliases.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/python_tensor.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

py::tuple Ints(const DimVector& v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) t[i] = py::int_(v[i]);
  return t;
}

std::string LayoutRepr(const aot::StridedLayout& l) {
  return py::str("StridedLayout(size={}, stride={}, offset={})").format(Ints(l.sizes), Ints(l.strides), l.offset);
}

// A tensor, or an undefined one for any other object.
Tensor TensorOrNone(py::handle o) { return IsTensor(o.ptr()) ? UnpackTensor(o.ptr()) : Tensor(); }

}  // namespace

void InitOutputAliasBindings(py::module_& m) {
  py::class_<aot::StridedLayout>(m, "StridedLayout", "Where a tensor lies in its storage: size, stride, offset.")
      .def_property_readonly("size", [](const aot::StridedLayout& l) { return Ints(l.sizes); })
      .def_property_readonly("stride", [](const aot::StridedLayout& l) { return Ints(l.strides); })
      .def_readonly("offset", &aot::StridedLayout::offset)
      .def("__eq__", [](const aot::StridedLayout& a, const aot::StridedLayout& b) { return a == b; })
      .def("__repr__", &LayoutRepr);
  py::class_<aot::OutputAlias>(m, "OutputAlias",
                               "An output that views an input (of_output False) or another output "
                               "(Note [Output aliases] in aot/output_aliases.h).")
      .def_property_readonly("of_output", [](const aot::OutputAlias& a) { return a.base == aot::OutputAlias::Base::kOutput; })
      .def_readonly("index", &aot::OutputAlias::index)
      .def_readonly("view", &aot::OutputAlias::view)
      .def_readonly("base_layout", &aot::OutputAlias::base_layout)
      .def("__repr__", [](const aot::OutputAlias& a) {
        const bool of_output = a.base == aot::OutputAlias::Base::kOutput;
        return std::string("OutputAlias(") + (of_output ? "output=" : "input=") + std::to_string(a.index) +
               ", view=" + LayoutRepr(a.view) + ")";
      });
  m.def(
      "find_output_aliases",
      [](const py::sequence& inputs, const py::sequence& outputs) {
        std::vector<Tensor> ins;
        for (py::handle i : inputs) ins.push_back(TensorOrNone(i));
        std::vector<aot::TracedOutput> outs;
        for (py::handle o : outputs) {
          Tensor t = TensorOrNone(o);
          const bool is_view = t.defined() && !o.attr("_base").is_none();
          outs.push_back(aot::TracedOutput{std::move(t), is_view});
        }
        return aot::FindOutputAliases(ins, outs);
      },
      py::arg("inputs"), py::arg("outputs"),
      "Per output of a fake run: the OutputAlias saying which input or output it views, or None.");
  py::class_<aot::ViewStep>(m, "ViewStep",
                            "A view op of a chain: its node, and for an item of split's or chunk's result "
                            "the item's position (piece; -1 otherwise).")
      .def_property_readonly("node", [](const aot::ViewStep& s) { return NodeObject(s.node); })
      .def_readonly("piece", &aot::ViewStep::piece);
  py::class_<aot::ViewChain>(m, "ViewChain", "The node a walk back through view ops reached, and the steps from it.")
      .def_property_readonly("reached", [](const aot::ViewChain& c) { return NodeObject(c.reached); })
      .def_readonly("steps", &aot::ViewChain::steps);
  m.def(
      "walk_views",
      [](py::handle from, py::handle stop) {
        return aot::WalkViews(from.cast<fx::Node*>(), stop.is_none() ? nullptr : stop.cast<fx::Node*>());
      },
      py::arg("node"), py::arg("stop") = py::none(),
      "The view ops that made `node`, read back to `stop` or as far as view ops go "
      "(Note [Replaying output views] in aot/output_aliases.h).");
}

}  // namespace kiln::python
