// inductor/scheduler/probe.h: what a lazy value's body reads where a kernel would place it,
// without building the kernel.
//
// A probe places the body at the value's own indices (a Reduction's source: at its kept
// dimensions and r) as a kernel would: a lazy value it reads is inlined unless realized (as of
// the read's snapshot), a reduction's value stands for the accumulator. It records each load's
// element offset (its coefficient per loop variable: whether loads walk two axes as one, for
// merging a reduction's loops), the buffers loaded (a view by the buffer whose memory it is), and
// whether the body reads a reduction. Each load becomes Load(0) at index 0: the expression is for
// its cost and shape, never for a kernel.
#pragma once

#include <optional>
#include <vector>

#include "codegen/kernel_ir.h"
#include "inductor/ir/affine.h"
#include "inductor/ir/values.h"
#include "inductor/scheduler/realization.h"

namespace kiln::inductor::scheduler {

struct ProbeResult {
  codegen::ExprPtr expr;
  std::vector<ir::Affine> loads;        // each load's element offset, in the order placed
  // distinct, in the order first loaded; roots of views (alive while the values and the state are)
  std::vector<const Buffer*> buffers;
  bool reads_reduction = false;
  bool Loads(const Buffer& b) const;    // whether b's memory (its root's) is among `buffers`
};

// `value` placed at `at` (its own indices when unset; ignored for a Reduction). `state` decides
// which lazy values are realized (none without one).
ProbeResult Probe(const Value& value, const Realization* state,
                  const std::optional<std::vector<ir::Affine>>& at = std::nullopt);

}  // namespace kiln::inductor::scheduler
