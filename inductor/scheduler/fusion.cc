// inductor/scheduler/fusion.cc: recompute-or-realize and sibling reductions (fusion.h).
#include "inductor/scheduler/fusion.h"

#include <algorithm>

#include "inductor/scheduler/probe.h"

namespace kiln::inductor::scheduler {
namespace {

bool Intersects(const std::vector<const Buffer*>& a, const std::vector<const Buffer*>& b) {
  for (const Buffer* x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

}  // namespace

bool CheapToRecompute(const Value& value, const Realization* state) {
  if (value.kind() != Value::Kind::kPointwise) return false;
  const auto& pw = static_cast<const ir::Pointwise&>(value);
  if (pw.space || pw.squeeze_of) return false;
  ProbeResult probe = Probe(value, state);
  return !probe.reads_reduction && codegen::ExprCost(*probe.expr) <= kRecomputeBudget;
}

std::vector<std::shared_ptr<Reduction>> SiblingReductions(const Reduction& red, const Realization& state,
                                                          const std::set<std::string>& deferred,
                                                          const std::vector<const Buffer*>& building) {
  const std::vector<const Buffer*> reads = Probe(red, &state).buffers;
  std::vector<const Buffer*> pending = building;
  auto is_deferred = [&](const std::shared_ptr<Buffer>& b) { return b && b->name && deferred.count(*b->name); };
  for (const auto& r : state.reductions) {
    std::shared_ptr<Buffer> b = state.now.Get(*r);
    if (is_deferred(b)) pending.push_back(&b->Root());
  }
  std::vector<std::shared_ptr<Reduction>> found;
  const ir::LoopSpace space = red.Space();
  for (const auto& other : state.reductions) {
    std::shared_ptr<Buffer> done = state.now.Get(*other);
    if (other.get() == &red || (done && !is_deferred(done))) continue;
    if (std::find(found.begin(), found.end(), other) != found.end()) continue;
    if (!(other->Space() == space)) continue;
    ProbeResult probe = Probe(*other, &state);
    if (probe.reads_reduction || !Intersects(probe.buffers, reads) || Intersects(probe.buffers, pending)) continue;
    if (done && std::find(reads.begin(), reads.end(), &done->Root()) != reads.end()) continue;
    found.push_back(other);
  }
  return found;
}

}  // namespace kiln::inductor::scheduler
