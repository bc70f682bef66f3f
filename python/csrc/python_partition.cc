// python/csrc/python_partition.cc: kiln._C._aot.JointGraph (aot/joint.h), partition and
// Partition, the joint-graph partitioners of aot/partition.h, used by kiln._functorch.partitioners;
// and tangent_masks and BackwardReads (aot/backward_reads.h), used by kiln._functorch.backward_reads.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <unordered_map>

#include "aot/backward_reads.h"
#include "aot/partition.h"
#include "python/csrc/python_fx.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// A tangent set as a Python int (bit k: tangent k), and back, through int's little-endian bytes.
py::object IntOf(const aot::BitSet& s) {
  const std::vector<uint64_t>& w = s.words();
  if (w.size() <= 1) return py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(w.empty() ? 0 : w[0]));
  std::string bytes(w.size() * 8, '\0');
  for (size_t i = 0; i < w.size(); ++i)
    for (int b = 0; b < 8; ++b) bytes[i * 8 + b] = static_cast<char>((w[i] >> (8 * b)) & 0xFF);
  return py::int_().attr("from_bytes")(py::bytes(bytes), "little");
}

aot::BitSet SetOf(const py::handle& v) {
  if (!PyLong_Check(v.ptr()) || py::int_(0).attr("__gt__")(v).cast<bool>())
    throw py::value_error("tangent_masks: a seed mask must be a non-negative int");
  const int64_t n = (v.attr("bit_length")().cast<int64_t>() + 63) / 64;
  const std::string bytes = v.attr("to_bytes")(n * 8, "little").cast<std::string>();
  std::vector<uint64_t> words(n, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int b = 0; b < 8; ++b) words[i] |= uint64_t{static_cast<unsigned char>(bytes[i * 8 + b])} << (8 * b);
  return aot::BitSet(std::move(words));
}

}  // namespace

void InitPartitionBindings(py::module_& m) {
  // Note [The joint graph's contract] (aot/joint.h): the joint graph with its counts.
  py::class_<aot::JointGraph>(m, "JointGraph",
                              "A joint forward+backward graph and its contract: num_primals inputs, then "
                              "num_tangents; the first num_fwd_outputs outputs the forward's (aot/joint.h)")
      .def(py::init([](py::handle graph, int num_primals, int num_tangents, int num_fwd_outputs,
                       std::vector<int> mutated_inputs, std::vector<std::optional<aot::OutputAlias>> output_aliases) {
             return aot::JointGraph(UnwrapGraph(graph), num_primals, num_tangents, num_fwd_outputs,
                                    std::move(mutated_inputs), std::move(output_aliases));
           }),
           py::arg("graph"), py::arg("num_primals"), py::arg("num_tangents"), py::arg("num_fwd_outputs"),
           py::arg("mutated_inputs") = std::vector<int>{},
           py::arg("output_aliases") = std::vector<std::optional<aot::OutputAlias>>{})
      .def_property_readonly("graph", [](const aot::JointGraph& j) { return WrapGraph(j.graph); })
      .def_readonly("num_primals", &aot::JointGraph::num_primals)
      .def_readonly("num_tangents", &aot::JointGraph::num_tangents)
      .def_readonly("num_fwd_outputs", &aot::JointGraph::num_fwd_outputs)
      .def_readonly("mutated_inputs", &aot::JointGraph::mutated_inputs)
      .def_readonly("output_aliases", &aot::JointGraph::output_aliases)
      .def("__repr__", [](const aot::JointGraph& j) {
        return StrCat("JointGraph(num_primals=", j.num_primals, ", num_tangents=", j.num_tangents,
                      ", num_fwd_outputs=", j.num_fwd_outputs, ", mutated_inputs=", j.mutated_inputs.size(), ")");
      });
  m.def("tangent_masks", [](py::handle graph, int num_tangents, std::optional<py::dict> seeds) {
        std::unordered_map<const fx::Node*, aot::BitSet> seed_sets;
        if (seeds)
          for (const auto& [node, mask] : *seeds) seed_sets.emplace(node.cast<fx::Node*>(), SetOf(mask));
        py::dict out;
        for (const auto& [node, set] : aot::TangentMasks(*UnwrapGraph(graph), num_tangents, seed_sets))
          out[NodeObject(const_cast<fx::Node*>(node))] = IntOf(set);
        return out;
      }, py::arg("graph"), py::arg("num_tangents"), py::arg("seeds") = py::none(),
      "{node: bitmask of the tangents (the last num_tangents placeholders) it is computed from} "
      "(aot/backward_reads.h, Note [Tangent masks])");
  py::class_<aot::BackwardReads>(m, "BackwardReads",
                                 "Which inputs a joint graph's backward reads when some tangents are absent "
                                 "(aot/backward_reads.h, Note [Inputs read by the backward])")
      .def(py::init([](const aot::JointGraph& joint, const std::vector<std::pair<int, py::object>>& saved) {
             std::vector<std::pair<int, aot::BitSet>> reads;
             for (const auto& [position, mask] : saved) reads.emplace_back(position, SetOf(mask));
             return aot::BackwardReads(joint, std::move(reads));
           }),
           py::arg("joint"), py::arg("saved_reads"))
      .def("read", [](const aot::BackwardReads& r, const py::handle& absent) { return r.Read(SetOf(absent)); },
           py::arg("absent"), "positions read when the tangents in the bitmask `absent` are None");

  // The partition, typed: its two graphs and what the forward saves for the backward, in order.
  py::class_<aot::Partition>(m, "Partition")
      .def_property_readonly("forward", [](const aot::Partition& p) { return WrapGraph(p.forward); })
      .def_property_readonly("backward", [](const aot::Partition& p) { return WrapGraph(p.backward); })
      .def_readonly("saved_values", &aot::Partition::saved_values, "joint-graph names, in the forward's order")
      .def_readonly("saved_sym_nodes", &aot::Partition::saved_sym_nodes, "the sizes the backward reads")
      .def_readonly("recomputed", &aot::Partition::recomputed, "forward nodes the backward computes again")
      .def_readonly("saved_bytes", &aot::Partition::saved_bytes)
      .def_readonly("saved_order", &aot::Partition::saved_order,
                    "per backward input before the tangents: its position among the forward's saved outputs")
      // immutable: a copied GraphModule's meta shares it
      .def("__copy__", [](py::object self) { return self; })
      .def("__deepcopy__", [](py::object self, py::handle) { return self; })
      .def("__repr__", [](const aot::Partition& p) {
        return StrCat("Partition(saved_values=", p.saved_values.size(), ", saved_sym_nodes=",
                      p.saved_sym_nodes.size(), ", recomputed=", p.recomputed.size(), ", saved_bytes=",
                      p.saved_bytes, ")");
      });
  // partition(joint, kind, ban_if_not_in_allowlist, ban_if_materialized_backward, ban_if_reduction)
  //   -> Partition; kind: "default" | "min_cut".
  m.def("partition", [](const aot::JointGraph& joint, const std::string& kind, bool ban_if_not_in_allowlist,
                         bool ban_if_materialized_backward, bool ban_if_reduction) {
    if (kind == "default") return aot::DefaultPartition(joint);
    if (kind != "min_cut")
      throw ValueError(StrCat("partition: unknown kind '", kind, "' (expected 'default' or 'min_cut')"));
    aot::MinCutOptions options;
    options.ban_if_not_in_allowlist = ban_if_not_in_allowlist;
    options.ban_if_materialized_backward = ban_if_materialized_backward;
    options.ban_if_reduction = ban_if_reduction;
    return aot::MinCutPartition(joint, options);
  }, py::arg("joint"), py::arg("kind") = "default", py::arg("ban_if_not_in_allowlist") = true,
     py::arg("ban_if_materialized_backward") = true, py::arg("ban_if_reduction") = true);
}

}  // namespace kiln::python
