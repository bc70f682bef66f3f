// python/csrc/python_partition.cc: kiln._C._partition, the joint-graph partitioners of
// aot/partition.h, used by kiln._functorch.partitioners.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "aot/partition.h"
#include "python/csrc/python_fx.h"

namespace py = pybind11;

namespace kiln::python {

void InitPartitionBindings(py::module_& m) {
  // _partition(graph, num_fwd_outputs, kind, ban_if_not_in_allowlist, ban_if_materialized_backward,
  //            ban_if_reduction) -> dict(forward=Graph, backward=Graph, saved_values=[names],
  //            saved_sym_nodes=[names], recomputed=[names], saved_bytes=int); kind: "default" | "min_cut".
  m.def("_partition", [](py::handle graph, int64_t num_fwd_outputs, const std::string& kind,
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
      throw ValueError(StrCat("_partition: unknown kind '", kind, "' (expected 'default' or 'min_cut')"));
    }
    py::dict d;
    d["forward"] = WrapGraph(p.forward);
    d["backward"] = WrapGraph(p.backward);
    d["saved_values"] = py::cast(p.saved_values);
    d["saved_sym_nodes"] = py::cast(p.saved_sym_nodes);
    d["recomputed"] = py::cast(p.recomputed);
    d["saved_bytes"] = py::int_(p.saved_bytes);
    return d;
  }, py::arg("graph"), py::arg("num_fwd_outputs"), py::arg("kind") = "default",
     py::arg("ban_if_not_in_allowlist") = true, py::arg("ban_if_materialized_backward") = true,
     py::arg("ban_if_reduction") = true);
}

}  // namespace kiln::python
