// inductor/scheduler/realization.cc: realized values and snapshots (realization.h).
#include "inductor/scheduler/realization.h"

#include "runtime/error.h"

namespace kiln::inductor::scheduler {
namespace {
thread_local Realization* t_current = nullptr;
}  // namespace

std::shared_ptr<Buffer> Realized::Get(const Value& v) const {
  auto it = map_.find(&v);
  return it == map_.end() ? nullptr : it->second.second;
}

void Realized::Set(std::shared_ptr<Value> v, std::shared_ptr<Buffer> buf) {
  KILN_CHECK_VALUE(v != nullptr && buf != nullptr, "realized: a value and its buffer are needed");
  const Value* key = v.get();
  map_[key] = {std::move(v), std::move(buf)};
}

std::shared_ptr<Buffer> Realized::Pop(const Value& v) {
  auto it = map_.find(&v);
  if (it == map_.end()) return nullptr;
  std::shared_ptr<Buffer> buf = std::move(it->second.second);
  map_.erase(it);
  return buf;
}

int64_t Realization::Snapshot(Realized r) {
  snapshots_.push_back(std::move(r));
  return static_cast<int64_t>(snapshots_.size()) - 1;
}

const Realized& Realization::AsOf(int64_t as_of) const {
  if (as_of < 0) return now;
  KILN_CHECK_VALUE(as_of < static_cast<int64_t>(snapshots_.size()), "realization: snapshot ", as_of, " of ",
                   snapshots_.size());
  return snapshots_[as_of];
}

Realization* Realization::Current() { return t_current; }

Realization::Scope::Scope(Realization* r) : previous_(t_current) { t_current = r; }
Realization::Scope::~Scope() { t_current = previous_; }

}  // namespace kiln::inductor::scheduler
