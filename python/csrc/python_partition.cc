// python/csrc/python_partition.cc: kiln._C._aot.partition and Partition, the joint-graph
// partitioners of aot/partition.h, used by kiln._functorch.partitioners.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "aot/partition.h"
#include "python/csrc/python_fx.h"

namespace py = pybind11;

namespace kiln::python {

void InitPartitionBindings(py::module_& m) {
  // The partition, typed: its two graphs and what the forward saves for the backward, in order.
  py::class_<aot::Partition>(m, "Partition")
      .def_property_readonly("forward", [](const aot::Partition& p) { return WrapGraph(p.forward); })
      .def_property_readonly("backward", [](const aot::Partition& p) { return WrapGraph(p.backward); })
      .def_readonly("saved_values", &aot::Partition::saved_values, "joint-graph names, in the forward's order")
      .def_readonly("saved_sym_nodes", &aot::Partition::saved_sym_nodes, "the sizes the backward reads")
      .def_readonly("recomputed", &aot::Partition::recomputed, "forward nodes the backward computes again")
      .def_readonly("saved_bytes", &aot::Partition::saved_bytes)
      // immutable: a copied GraphModule's meta shares it
      .def("__copy__", [](py::object self) { return self; })
      .def("__deepcopy__", [](py::object self, py::handle) { return self; })
      .def("__repr__", [](const aot::Partition& p) {
        return StrCat("Partition(saved_values=", p.saved_values.size(), ", saved_sym_nodes=",
                      p.saved_sym_nodes.size(), ", recomputed=", p.recomputed.size(), ", saved_bytes=",
                      p.saved_bytes, ")");
      });
  // partition(graph, num_fwd_outputs, kind, ban_if_not_in_allowlist, ban_if_materialized_backward,
  //           ban_if_reduction) -> Partition; kind: "default" | "min_cut".
  m.def("partition", [](py::handle graph, int64_t num_fwd_outputs, const std::string& kind,
                         bool ban_if_not_in_allowlist, bool ban_if_materialized_backward, bool ban_if_reduction) {
    std::shared_ptr<fx::Graph> joint = UnwrapGraph(graph);
    aot::Partition p;
    if (kind == "default") {
      p = aot::DefaultPartition(*joint, num_fwd_outputs);
    } else if (kind == "min_cut") {
      aot::MinCutOptions options;
      options.ban_if_not_in_allowlist = ban_if_not_in_allowlist;
      options.ban_if_materialized_backward = ban_if_materialized_backward;
      options.ban_if_reduction = ban_if_reduction;
      p = aot::MinCutPartition(*joint, num_fwd_outputs, options);
    } else {
      throw ValueError(StrCat("partition: unknown kind '", kind, "' (expected 'default' or 'min_cut')"));
    }
    return p;
  }, py::arg("graph"), py::arg("num_fwd_outputs"), py::arg("kind") = "default",
     py::arg("ban_if_not_in_allowlist") = true, py::arg("ban_if_materialized_backward") = true,
     py::arg("ban_if_reduction") = true);
}

}  // namespace kiln::python
