// aot/backward_reads.cc: tangent masks over a joint or backward graph (Note [Tangent masks]).
#include "aot/backward_reads.h"

#include <algorithm>

#include "tensor/schema.h"

namespace kiln::aot {
namespace {

using fx::Node;
using fx::Opcode;

bool IsTangentPlaceholder(const Node* n) {
  return n->op() == Opcode::kPlaceholder && n->name().rfind("tangents", 0) == 0;
}

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

}  // namespace

TangentSet::TangentSet(std::vector<uint64_t> words) : words_(std::move(words)) { Trim(); }

TangentSet TangentSet::Of(int tangent) {
  std::vector<uint64_t> w(tangent / 64 + 1, 0);
  w.back() = uint64_t{1} << (tangent % 64);
  return TangentSet(std::move(w));
}

TangentSet& TangentSet::operator|=(const TangentSet& other) {
  if (other.words_.size() > words_.size()) words_.resize(other.words_.size(), 0);
  for (size_t i = 0; i < other.words_.size(); ++i) words_[i] |= other.words_[i];
  return *this;
}

bool TangentSet::operator==(const TangentSet& other) const { return words_ == other.words_; }

bool TangentSet::empty() const { return words_.empty(); }

void TangentSet::Trim() {
  while (!words_.empty() && words_.back() == 0) words_.pop_back();
}

std::vector<std::pair<const Node*, TangentSet>> TangentMasks(
    const fx::Graph& graph, const std::unordered_map<const Node*, TangentSet>& seeds) {
  std::vector<std::pair<const Node*, TangentSet>> masks;
  std::unordered_map<const Node*, size_t> position;
  std::unordered_map<const Node*, const Node*> base;    // a view's node -> the node it views
  std::unordered_map<const Node*, TangentSet> written;  // root of a view chain -> what was written into it
  auto root = [&base](const Node* n) {
    for (auto it = base.find(n); it != base.end(); it = base.find(n)) n = it->second;
    return n;
  };
  int tangents = 0;
  for (const Node* n : graph.nodes()) {
    if (n->op() == Opcode::kOutput) continue;
    TangentSet m;
    if (n->op() == Opcode::kPlaceholder) {
      if (IsTangentPlaceholder(n)) m = TangentSet::Of(tangents++);
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

}  // namespace kiln::aot
