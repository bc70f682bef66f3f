// aot/output_aliases.cc: outputs that view inputs or other outputs, and the view ops that made
// them (aot/output_aliases.h).
#include "aot/output_aliases.h"

#include <algorithm>
#include <unordered_map>

#include "fx/interpreter.h"

namespace kiln::aot {
namespace {

using fx::Node;
using fx::Opcode;

StridedLayout LayoutOf(const Tensor& t) { return StridedLayout{t.sizes(), t.strides(), t->storage_offset()}; }

// The storage elements a tensor can touch, [first, last]; nullopt when it has none.
std::optional<std::pair<int64_t, int64_t>> Extent(const Tensor& t) {
  if (t.numel() == 0) return std::nullopt;
  int64_t last = t->storage_offset();
  const DimVector sizes = t.sizes(), strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
  return std::make_pair(t->storage_offset(), last);
}

// Every storage element in the tensor's extent is one of its elements, once: the strides of its
// dims longer than 1, sorted, are the running products of their sizes.
bool Dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  const DimVector sizes = t.sizes(), strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.emplace_back(strides[d], sizes[d]);
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (auto [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// The output (position) the others of a group sharing a storage are rebuilt as views of, or -1
// (Note [Output aliases]).
int AliasRoot(const std::vector<TracedOutput>& outputs, const std::vector<int>& members) {
  int best = -1;
  std::pair<int64_t, bool> best_key;  // (extent, no view)
  for (int k : members) {
    const Tensor& t = outputs[k].tensor;
    auto extent = Extent(t);
    if (!extent || !Dense(t)) continue;
    const std::pair<int64_t, bool> key(extent->second - extent->first, !outputs[k].is_view);
    if (best < 0 || key > best_key) best = k, best_key = key;
  }
  if (best >= 0) return best;
  for (int k : members)
    if (!outputs[k].is_view) return k;
  return -1;
}

// Note [Replaying output views]'s two kinds of view op.
bool ViewsFirstArgument(const Node* n) {
  const Op* op = n->op() == Opcode::kCallFunction ? n->target().op : nullptr;
  if (op == nullptr) return false;
  if (op->has_tag(Tag::view)) return true;
  const FunctionSchema& s = op->schema();
  auto aliases_a = [](const Argument& a) { return a.kind == TypeKind::Tensor && !a.optional && a.alias.set == "a" && !a.alias.is_write; };
  return !s.arguments.empty() && s.arguments[0].name == "self" && aliases_a(s.arguments[0]) && !s.returns_tuple &&
         s.returns.size() == 1 && aliases_a(s.returns[0]);
}

bool ReturnsViews(const Node* n) {
  const Op* op = n->op() == Opcode::kCallFunction ? n->target().op : nullptr;
  if (op == nullptr) return false;
  const FunctionSchema& s = op->schema();
  return s.returns.size() == 1 && s.returns[0].kind == TypeKind::TensorList && s.returns[0].alias.set == "a" &&
         !s.returns[0].alias.is_write;
}

// Whether a node's arguments after the first, or its keyword arguments, hold a node: a replay
// has only the base to pass.
bool OtherArgumentsHoldNodes(const Node* n) {
  bool found = false;
  for (size_t i = 1; i < n->args().size(); ++i) n->args()[i].ForEachNode([&](Node*) { found = true; });
  for (const auto& [name, value] : n->kwargs()) value.ForEachNode([&](Node*) { found = true; });
  return found;
}

}  // namespace

std::vector<std::optional<OutputAlias>> FindOutputAliases(const std::vector<Tensor>& inputs,
                                                          const std::vector<TracedOutput>& outputs) {
  std::vector<std::optional<OutputAlias>> aliases(outputs.size());
  // A layout with symbolic sizes (an unbacked size: nonzero's count) has no extent to compare:
  // such an output is left a tensor of its own.
  auto usable = [](const Tensor& t) { return t.defined() && !t->is_symbolic(); };
  std::unordered_map<const void*, int> input_storages;  // the first input with each storage
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) input_storages.emplace(inputs[i]->storage().get(), static_cast<int>(i));
  std::vector<std::vector<int>> groups;  // outputs sharing a storage no input has, in order of first output
  std::unordered_map<const void*, size_t> group_of;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& t = outputs[k].tensor;
    if (!usable(t)) continue;
    const void* storage = t->storage().get();
    if (auto it = input_storages.find(storage); it != input_storages.end()) {
      aliases[k] = OutputAlias{OutputAlias::Base::kInput, it->second, LayoutOf(t), std::nullopt};
      continue;
    }
    auto [it, fresh] = group_of.emplace(storage, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(static_cast<int>(k));
  }
  for (const std::vector<int>& members : groups) {
    const int root = AliasRoot(outputs, members);
    if (root < 0) continue;
    const Tensor& base = outputs[root].tensor;
    const auto outer = Extent(base);
    for (int k : members) {
      if (k == root) continue;
      const auto inner = Extent(outputs[k].tensor);
      if (inner && !(outer && outer->first <= inner->first && inner->second <= outer->second)) continue;
      aliases[k] = OutputAlias{OutputAlias::Base::kOutput, root, LayoutOf(outputs[k].tensor), LayoutOf(base)};
    }
  }
  return aliases;
}

ViewChain WalkViews(Node* from, const Node* stop) {
  ViewChain chain;
  Node* node = from;
  while (node != stop && node->op() == Opcode::kCallFunction) {
    const auto& args = node->args();
    if (fx::IsGetItem(node->target()) && args.size() == 2 && args[0].is_node() && ReturnsViews(args[0].node)) {
      // a piece of split/chunk: replayed as that op and the item, so the output is one of its
      // multi-output views as in eager (which refuse in-place changes under autograd)
      Node* piece = args[0].node;
      if (OtherArgumentsHoldNodes(piece) || args[1].kind != fx::Argument::Kind::kConst ||
          !args[1].value.is_int() || piece->args().empty() || !piece->args()[0].is_node())
        break;
      chain.steps.push_back(ViewStep{piece, args[1].value.to_int()});
      node = piece->args()[0].node;
      continue;
    }
    if (!ViewsFirstArgument(node) || OtherArgumentsHoldNodes(node) || args.empty() || !args[0].is_node()) break;
    chain.steps.push_back(ViewStep{node, -1});
    node = args[0].node;
  }
  std::reverse(chain.steps.begin(), chain.steps.end());
  chain.reached = node;
  return chain;
}

}  // namespace kiln::aot
