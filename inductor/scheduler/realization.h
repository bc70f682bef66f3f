// inductor/scheduler/realization.h: which lazy values a graph's kernels have computed into buffers
// so far, and the snapshots of that some reads are decided by.
//
// Realizing a value (Scheduler::Realize) forms the kernel computing it with everything lazy
// behind it, and records its buffer here; a later reader loads the buffer instead of computing the
// value again.
//
// Note [Realized as of]: a read traced under a snapshot (`as_of`, Note [Bodies]) decides by the
// values realized when the snapshot was taken: one realized then is read from its buffer, one
// realized since is recomputed. A decision a probe made then (MergeDims: merging loops whose loads
// walk them as one) holds for the kernel: the fill `x.fill_(2.5)` probed as a constant (no load:
// x.t()'s two axes merged into one loop) was realized as an output before the sum's kernel read it
// through the merged loop, as if its buffer were laid out like the transpose (fuzz seed 171,
// program 826).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inductor/ir/values.h"

namespace kiln::inductor::scheduler {

using ir::Buffer;
using ir::Reduction;
using ir::Value;

// value -> its buffer (the value kept alive with it).
class Realized {
 public:
  std::shared_ptr<Buffer> Get(const Value& v) const;
  bool Contains(const Value& v) const { return map_.count(&v) != 0; }
  void Set(std::shared_ptr<Value> v, std::shared_ptr<Buffer> buf);
  // Removes and returns v's buffer (nullptr when it had none).
  std::shared_ptr<Buffer> Pop(const Value& v);
  size_t size() const { return map_.size(); }

 private:
  std::unordered_map<const Value*, std::pair<std::shared_ptr<Value>, std::shared_ptr<Buffer>>> map_;
};

// The realized values of the graph being lowered, its snapshots, and the reductions its
// lowerings made (in order: the candidates for horizontal fusion, Note [Sibling reductions]).
class Realization {
 public:
  Realized now;
  std::vector<std::shared_ptr<Reduction>> reductions;

  // Keeps `r` as a snapshot; returns its number (a read's as_of).
  int64_t Snapshot(Realized r);
  // What a read under `as_of` sees: the snapshot it names, or `now` for -1.
  const Realized& AsOf(int64_t as_of) const;

  // The Realization of the graph being lowered on this thread (nullptr outside one): reductions
  // made while it is current join its list. Scoped: restores the previous one when it ends.
  static Realization* Current();
  class Scope {
   public:
    explicit Scope(Realization* r);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Realization* previous_;
  };

 private:
  std::vector<Realized> snapshots_;
};

}  // namespace kiln::inductor::scheduler
