// python/csrc/python_partition.cc: kiln._C._aot.partition and Partition, the joint-graph
// partitioners of aot/partition.h, used by kiln._functorch.partitioners; and tangent_masks
// (aot/backward_reads.h), used by kiln._functorch.backward_reads.
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
  m.def("tangent_masks", [](py::handle graph, std::optional<py::dict> seeds) {
        std::unordered_map<const fx::Node*, aot::BitSet> seed_sets;
        if (seeds)
          for (const auto& [node, mask] : *seeds) seed_sets.emplace(node.cast<fx::Node*>(), SetOf(mask));
        py::dict out;
        for (const auto& [node, set] : aot::TangentMasks(*UnwrapGraph(graph), seed_sets))
          out[NodeObject(const_cast<fx::Node*>(node))] = IntOf(set);
        return out;
      }, py::arg("graph"), py::arg("seeds") = py::none(),
      "{node: bitmask of the tangents it is computed from} (aot/backward_reads.h, Note [Tangent masks])");
  py::class_<aot::BackwardReads>(m, "BackwardReads",
                                 "Which inputs a joint graph's backward reads when some tangents are absent "
                                 "(aot/backward_reads.h, Note [Inputs read by the backward])")
      .def(py::init([](py::handle graph, int num_fwd_outputs, const std::vector<std::pair<int, py::object>>& saved) {
             std::vector<std::pair<int, aot::BitSet>> reads;
             for (const auto& [position, mask] : saved) reads.emplace_back(position, SetOf(mask));
             return aot::BackwardReads(*UnwrapGraph(graph), num_fwd_outputs, std::move(reads));
           }),
           py::arg("joint"), py::arg("num_fwd_outputs"), py::arg("saved_reads"))
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
