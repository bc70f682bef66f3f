// aot/backward_reads.cc: tangent masks over a joint or backward graph (Note [Tangent masks]) and
// the inputs its backward reads when some tangents are absent (Note [Inputs read by the backward]).
#include "aot/backward_reads.h"

#include <algorithm>
#include <unordered_map>

#include "tensor/schema.h"

namespace kiln::aot {
namespace {

using fx::Node;
using fx::Opcode;

// Whether an op's first result views its first argument, and the positions of the arguments it
// writes, from its schema (none for a Python callable).
struct Aliasing {
  bool first_result_views = false;
  std::vector<size_t> writes;
};

Aliasing AliasingOf(const Node* n) {
  Aliasing a;
  const Op* op = n->target().op;
  if (n->op() != Opcode::kCallFunction || op == nullptr) return a;
  const FunctionSchema& schema = op->schema();
  a.first_result_views =
      !schema.returns.empty() && !schema.returns[0].alias.set.empty() && !schema.returns[0].alias.is_write;
  for (size_t i = 0; i < schema.arguments.size(); ++i)
    if (!schema.arguments[i].alias.set.empty() && schema.arguments[i].alias.is_write) a.writes.push_back(i);
  return a;
}

// Whether an op reads only its arguments' metadata: every result a size (sym_size, sym_numel, ...).
bool ReadsMetadataOnly(const Node* n) {
  const Op* op = n->target().op;
  if (n->op() != Opcode::kCallFunction || op == nullptr || op->schema().returns.empty()) return false;
  for (const auto& r : op->schema().returns)
    if (r.kind != TypeKind::SymInt && r.kind != TypeKind::Int && r.kind != TypeKind::SymIntList &&
        r.kind != TypeKind::IntList)
      return false;
  return true;
}

// The storage a node's tensor value ("val" in its meta) lives in; nullptr for none (or no tensor).
const void* StorageOf(const Node* n, bool* is_tensor) {
  const fx::Argument* val = n->FindMeta("val");
  *is_tensor = val != nullptr && val->kind == fx::Argument::Kind::kConst && val->value.is_tensor();
  if (!*is_tensor) return nullptr;
  const Tensor& t = val->value.to_tensor();
  return t->storage() ? static_cast<const void*>(t->storage().get()) : nullptr;
}

}  // namespace

BitSet::BitSet(std::vector<uint64_t> words) : words_(std::move(words)) { Trim(); }

BitSet BitSet::Of(int k) {
  std::vector<uint64_t> w(k / 64 + 1, 0);
  w.back() = uint64_t{1} << (k % 64);
  return BitSet(std::move(w));
}

BitSet BitSet::FirstN(int n) {
  std::vector<uint64_t> w((n + 63) / 64, ~uint64_t{0});
  if (n % 64) w.back() = (uint64_t{1} << (n % 64)) - 1;
  return BitSet(std::move(w));
}

bool BitSet::Has(int k) const {
  const size_t i = static_cast<size_t>(k) / 64;
  return i < words_.size() && (words_[i] >> (k % 64) & 1);
}

bool BitSet::Intersects(const BitSet& other) const {
  const size_t n = std::min(words_.size(), other.words_.size());
  for (size_t i = 0; i < n; ++i)
    if (words_[i] & other.words_[i]) return true;
  return false;
}

BitSet BitSet::Minus(const BitSet& other) const {
  std::vector<uint64_t> w = words_;
  for (size_t i = 0; i < std::min(w.size(), other.words_.size()); ++i) w[i] &= ~other.words_[i];
  return BitSet(std::move(w));
}

BitSet& BitSet::operator|=(const BitSet& other) {
  if (other.words_.size() > words_.size()) words_.resize(other.words_.size(), 0);
  for (size_t i = 0; i < other.words_.size(); ++i) words_[i] |= other.words_[i];
  return *this;
}

bool BitSet::operator==(const BitSet& other) const { return words_ == other.words_; }

bool BitSet::empty() const { return words_.empty(); }

void BitSet::Trim() {
  while (!words_.empty() && words_.back() == 0) words_.pop_back();
}

std::vector<std::pair<const Node*, BitSet>> TangentMasks(
    const fx::Graph& graph, int num_tangents, const std::unordered_map<const Node*, BitSet>& seeds) {
  std::vector<std::pair<const Node*, BitSet>> masks;
  std::unordered_map<const Node*, size_t> position;
  std::unordered_map<const Node*, const Node*> base;    // a view's node -> the node it views
  std::unordered_map<const Node*, BitSet> written;  // root of a view chain -> what was written into it
  auto root = [&base](const Node* n) {
    for (auto it = base.find(n); it != base.end(); it = base.find(n)) n = it->second;
    return n;
  };
  std::unordered_map<const Node*, int> tangent_number;
  for (const Node* t : TrailingPlaceholders(graph, num_tangents))
    tangent_number.emplace(t, static_cast<int>(tangent_number.size()));
  for (const Node* n : graph.nodes()) {
    if (n->op() == Opcode::kOutput) continue;
    BitSet m;
    if (n->op() == Opcode::kPlaceholder) {
      if (auto t = tangent_number.find(n); t != tangent_number.end()) m = BitSet::Of(t->second);
    } else {
      if (auto seed = seeds.find(n); seed != seeds.end()) m = seed->second;
      for (const Node* a : n->AllInputNodes()) {
        m |= masks[position.at(a)].second;
        if (auto w = written.find(root(a)); w != written.end()) m |= w->second;
      }
      const Aliasing aliasing = AliasingOf(n);
      const std::vector<fx::Argument>& args = n->args();
      if (aliasing.first_result_views && !args.empty() && args[0].is_node()) base[n] = args[0].node;
      for (size_t i : aliasing.writes)
        if (i < args.size() && args[i].is_node()) written[root(args[i].node)] |= m;
    }
    position[n] = masks.size();
    masks.emplace_back(n, std::move(m));
  }
  for (auto& [n, m] : masks)
    if (auto w = written.find(root(n)); w != written.end()) m |= w->second;
  return masks;
}

BackwardReads::BackwardReads(const JointGraph& joint, std::vector<std::pair<int, BitSet>> saved_reads)
    : saved_reads_(std::move(saved_reads)) {
  const std::vector<Node*> nodes = joint.graph->nodes();
  std::vector<const Node*> outs;  // the output is one flat tuple (checked by JointGraph)
  for (const fx::Argument& x : joint.graph->output_node()->args()[0].items)
    outs.push_back(x.is_node() ? x.node : nullptr);
  const int fw_outs = joint.num_fwd_outputs;
  // the forward: ancestors of its outputs
  std::unordered_map<const Node*, bool> forward;
  std::vector<const Node*> stack;
  for (int k = 0; k < fw_outs; ++k)
    if (outs[k]) stack.push_back(outs[k]);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (forward.emplace(n, true).second)
      for (const Node* a : n->AllInputNodes()) stack.push_back(a);
  }
  // bit: the inputs (by position among the primals) and forward outputs each node is
  std::unordered_map<const Node*, BitSet> bit;
  const int primals = joint.num_primals;
  {
    int k = 0;
    for (const Node* p : joint.primals()) bit[p] = BitSet::Of(k++);
  }
  for (int k = 0; k < fw_outs; ++k)
    if (outs[k] && outs[k]->op() != Opcode::kPlaceholder) bit[outs[k]] |= BitSet::Of(primals + k);
  // a value sharing an input's or an output's memory is that tensor to eager's check
  std::unordered_map<const void*, BitSet> memory;
  for (const auto& [n, b] : bit) {
    bool is_tensor = false;
    const void* storage = StorageOf(n, &is_tensor);
    if (is_tensor) memory[storage] |= b;
  }
  for (const Node* n : nodes) {
    if (n->op() != Opcode::kCallFunction) continue;
    bool is_tensor = false;
    const void* storage = StorageOf(n, &is_tensor);
    if (!is_tensor) continue;
    if (auto m = memory.find(storage); m != memory.end()) bit[n] |= m->second;
  }
  std::unordered_map<const Node*, BitSet> masks;
  for (auto& [n, m] : TangentMasks(*joint.graph, joint.num_tangents)) masks.emplace(n, std::move(m));
  std::unordered_map<const Node*, int> step_of;
  for (const Node* n : nodes) {
    if (n->op() == Opcode::kPlaceholder || n->op() == Opcode::kOutput || forward.count(n)) continue;
    Step s;
    s.mask = masks.at(n);
    s.metadata_only = ReadsMetadataOnly(n);
    for (const Node* a : n->AllInputNodes()) {
      if (auto b = bit.find(a); b != bit.end()) s.direct |= b->second;
      if (auto k = step_of.find(a); k != step_of.end()) s.inputs.push_back(k->second);
    }
    step_of[n] = static_cast<int>(steps_.size());
    steps_.push_back(std::move(s));
  }
  all_tangents_ = BitSet::FirstN(joint.num_tangents);
  positions_ = primals + fw_outs;
}

std::vector<int> BackwardReads::Read(const BitSet& absent) const {
  const BitSet present = all_tangents_.Minus(absent);
  std::vector<BitSet> reach(steps_.size());
  BitSet found;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    const bool runs = s.mask.empty() || s.mask.Intersects(present);
    if (!runs || s.metadata_only) continue;  // computed from absent tangents only, or reads sizes only
    BitSet r = s.direct;
    for (int k : s.inputs) r |= reach[k];
    if (s.mask.Intersects(present)) found |= r;
    reach[i] = std::move(r);
  }
  for (const auto& [position, tangents] : saved_reads_)
    if (tangents.Intersects(present) || (tangents.empty() && !present.empty())) found |= BitSet::Of(position);
  std::vector<int> out;
  for (int i = 0; i < positions_; ++i)
    if (found.Has(i)) out.push_back(i);
  return out;
}

}  // namespace kiln::aot
