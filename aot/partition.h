// aot/partition.h: the joint-graph partitioners — split a traced forward+backward graph into a
// forward graph and a backward graph, choosing which forward values the backward keeps.
//
// The joint graph's contract (what aot_function traces; Note [The joint graph's contract] in
// joint.h): a JointGraph's N primals, then its M tangents; the output's single argument is a flat
// tuple `(fw_out_1..fw_out_K, grad_1..grad_N)` (None where a primal gets no gradient); node meta
// "val" holds the value (a fake or real tensor, a SymInt, a tuple of them) and meta "recompute"
// may hold a CheckpointPolicy.
//
// Both partitioners return
//   forward:  primals                                  -> (*fw_outs, *saved_values, *saved_sym_nodes)
//   backward: (*saved_sym_nodes, *saved_values, *tangents) -> (*grads)
// each dead-code free, nodes named as in the joint graph (as PyTorch's _extract_fwd_bwd_modules).
// See Note [Partitioning the joint graph] in partition.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aot/joint.h"
#include "fx/graph.h"

namespace kiln::aot {

// Selective activation checkpointing (torch.utils.checkpoint.CheckpointPolicy; same values).
enum class CheckpointPolicy : uint8_t { kMustSave = 0, kPreferSave = 1, kMustRecompute = 2, kPreferRecompute = 3 };
// meta["recompute"] of `n`: an int 0..3, a policy name, or a Python enum whose repr names one
// ("<CheckpointPolicy.MUST_SAVE: 0>"); nullopt when absent.
std::optional<CheckpointPolicy> PolicyOf(const fx::Node* n);

struct Partition {
  std::shared_ptr<fx::Graph> forward;
  std::shared_ptr<fx::Graph> backward;
  std::vector<std::string> saved_values;     // joint-graph names, forward order
  std::vector<std::string> saved_sym_nodes;  // size values the backward reads
  std::vector<std::string> recomputed;       // forward nodes the backward computes again
  int64_t saved_bytes = 0;                   // sum of NodeBytes over saved_values
  // For each backward input before the tangents (saved_sym_nodes, then saved_values), its
  // position among the forward's saved outputs (saved_values, then saved_sym_nodes): how the
  // runtime hands the backward what the forward kept.
  std::vector<int> saved_order;
};

// PyTorch's MinCutOptions (the ones kiln implements); compiler="inductor" turns them all on.
struct MinCutOptions {
  // Ban recomputing ops that are not cheap to fuse (pointwise, reduction, view and a few more);
  // off: ban only compute-heavy (matmul, convolution, attention) and random ops.
  bool ban_if_not_in_allowlist = true;
  // Ban recomputing a value the backward reads through a non-fusible op (it is materialised
  // there anyway, so recomputing it is not free).
  bool ban_if_materialized_backward = true;
  // Ban recomputing a value at least 4x smaller than its inputs (reductions: cheap to keep).
  bool ban_if_reduction = true;
};

// Bytes of a node's value: numel * itemsize of its meta "val" tensor (symbolic sizes at their
// hint, 4096 without one), summed over a tuple; 0 for non-tensors.
int64_t NodeBytes(const fx::Node* n);

// Saves every forward value the backward reads (size values as size nodes). A graph with
// MUST_RECOMPUTE/PREFER_RECOMPUTE annotations goes to MinCutPartition, as in PyTorch.
Partition DefaultPartition(const JointGraph& joint);
// Saves a minimum-byte cut of the forward values and recomputes the rest in the backward.
Partition MinCutPartition(const JointGraph& joint, const MinCutOptions& options = {});

// Max-flow/min-cut on a directed graph (Dinic): capacities are int64, kInfinity means unbounded.
class FlowNetwork {
 public:
  static constexpr int64_t kInfinity = INT64_MAX / 4;
  int AddVertex();
  void AddEdge(int from, int to, int64_t capacity);
  // The maximum flow from `source` to `sink` (>= kInfinity: no finite cut exists).
  int64_t MaxFlow(int source, int sink);
  // After MaxFlow: whether `v` is reachable from the source in the residual graph (the source
  // side of a minimum cut).
  bool OnSourceSide(int v) const { return source_side_[v]; }
  int size() const { return static_cast<int>(adj_.size()); }

 private:
  struct Edge {
    int to;
    int64_t cap;
  };
  bool Levels(int s, int t);
  int64_t Push(int v, int t, int64_t f);
  std::vector<Edge> edges_;  // edge i and i^1 are a pair (forward, residual)
  std::vector<std::vector<int>> adj_;
  std::vector<int> level_, next_;
  std::vector<bool> source_side_;
};

}  // namespace kiln::aot
