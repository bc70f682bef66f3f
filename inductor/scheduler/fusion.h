// inductor/scheduler/fusion.h: the fusion decisions made while a graph is lowered -- whether a
// value several nodes read is recomputed by each or realized once, and which reductions share a
// kernel.
//
// Note [Recompute or realize]: a lazy value read by several nodes is either realized (one kernel
// writes it, each reader loads it: a write and n reads of memory) or inlined into every reader
// (each recomputes it from its own inputs). Inlining wins when the value is a few cheap ops over
// the buffers it reads: batch norm's centred input `x - mean`, read by a reduction and by the
// gradient's pointwise kernel, costs a subtraction per read instead of a full write and read.
// The score is the expression's op count, transcendental ops and divisions weighing more
// (codegen::OpCost); a value that reads a reduction is always realized (inlining would repeat
// the reduction in each reader). A value that itself recomputes such a value is realized too
// (the caller's rule: recomputation does not chain). Chained, each reader would re-read the inner
// value's buffers as well, and a residual stream `x = x + f(x)` (each x read by a norm and by the
// next add) grew its sum by one load per block until the budget ran out, so a GPT's blocks made
// different kernels by their position in that cycle: 47 bodies for LLVM at 16 layers (25 now: the
// blocks alike; issue 19).
//
// Note [Sibling reductions]: a reduction several nodes read is deferred until its buffer is first
// used; when its kernel is formed, reductions not computed yet that loop over the same space and
// read a buffer it reads join the kernel (horizontal fusion: batch norm's backward sums dy and
// dy * (x - mean) in one pass over dy). Buffers no kernel has written yet -- deferred reductions'
// and those of kernels being built -- are stored by a kernel's last statements if their reduction
// joins it: a member reading one would load it first (a gradient read sum(x) * x through the
// deferred buffer of sum(x), and summed uninitialised memory). So no sibling reads one, none
// reads a reduction's value (it might be the one being formed), and none is a deferred reduction
// whose buffer this one reads.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "inductor/ir/values.h"
#include "inductor/scheduler/realization.h"

namespace kiln::inductor::scheduler {

// In units of one add: a value costing at most this is recomputed by each reader.
inline constexpr int kRecomputeBudget = 4;

// Whether `value` (read by several nodes) is recomputed by each reader: a plain Pointwise (no
// reduction loop's value, no squeezed view) reading no reduction whose expression costs at most
// kRecomputeBudget.
bool CheapToRecompute(const Value& value, const Realization* state);

// The reductions of state.reductions that join `red`'s kernel (Note [Sibling reductions]), in
// the order they were made. `deferred`: the names of the buffers of deferred reductions;
// `building`: the output buffers of reduction kernels being formed.
std::vector<std::shared_ptr<Reduction>> SiblingReductions(const Reduction& red, const Realization& state,
                                                          const std::set<std::string>& deferred,
                                                          const std::vector<const Buffer*>& building);

}  // namespace kiln::inductor::scheduler
