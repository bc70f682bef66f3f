// inductor/lowering/reductions.h: reductions lowered to the loop IR -- sum, mean, prod, amax/amin,
// max/min, any/all, count_nonzero, argmax/argmin, logsumexp, vector norms, variance and standard
// deviation, softmax and log_softmax.
//
// One axis is reduced at a time: a Reduction accumulates along one axis of its source (Note
// [Values]), so a reduction over several axes is one per axis, the innermost first, each keeping
// its axis (size 1) so the others keep their positions -- except where adjacent reduced axes are
// laid out as one (NCHW's H and W for batch norm: MergeDims), which are read as one longer axis.
// Partial results towards a bfloat16 result are kept in float32 (a bfloat16 partial sum read
// back would be rounded).
//
// Note [Outer reductions]: a loop kernel reduces each output separately, so a sum over a dim outer
// to the kept ones (a Linear bias's gradient, g.sum(0); layer norm's weight gradient) walks a
// strided column per output, one element per cache line: 8.7 ms for a 1024x1024 bias gradient in
// the GPT step's backward, where eager's kernel adds whole rows into column accumulators in 0.1 ms
// (Note [Outer sums] in tensor/ops/reduce.cc). Such a reduction runs eager's kernel instead, its
// input realized, where the registry says that op's kernel reduces outer dimensions by whole rows
// for the result's dtype (Op::has_outer_reduction_kernel, Note [Outer reduction kernels] in
// tensor/dispatcher.h: sum and mean for every dtype, a float amax or amin, whose extreme comes
// down whole rows: x.amax(0) of a 1024x512 float32 x took 1.0 ms as a loop kernel); the results
// are then eager's too.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inductor/ir/values.h"
#include "inductor/lowering/pointwise.h"
#include "inductor/scheduler/scheduler.h"

namespace kiln::inductor::lowering {

using ValuePtr = std::shared_ptr<ir::Value>;
// The dimensions an op reduces, as aten gives them (negative ones count from the end); unset or
// empty: every dimension.
using Dims = std::optional<std::vector<int64_t>>;

// What the lowerings of one graph share: its scheduler, which realizes the intermediate values a
// lowering needs in memory (a variance's partial statistics over axes that do not merge), and the
// means variances computed with it (batch norm's decomposition asks for var and then mean of the
// same input over the same axes, and gets the one mean: one kernel stores both).
class GraphContext {
 public:
  explicit GraphContext(scheduler::Scheduler* scheduler) : scheduler_(scheduler) {}
  scheduler::Scheduler* scheduler() const { return scheduler_; }

  struct Mean {
    std::shared_ptr<ir::Pointwise> value;    // of the (merged) keepdim shape
    std::optional<scheduler::Merged> merged;  // the input as it was reduced, where axes merged
  };
  // (input's handle, reduced axes, sorted) -> the mean a variance computed
  std::map<std::pair<int64_t, std::vector<int>>, Mean> means;

 private:
  scheduler::Scheduler* scheduler_;
};

// Each lowering is given the graph's context (nullptr outside a graph: axes then merge without
// knowing what is realized, and a variance over axes that do not merge falls back), the result's
// dtype and shape (the node's meta value), the input and the op's arguments.

// `name`: sum, mean, amax, amin, prod, and max or min over every element (which keep the later of
// equal values, as PyTorch's kernels do: [0., -0.].max() is -0.).
ValuePtr LowerReduce(GraphContext* graph, const std::string& name, ScalarType dtype, std::vector<int64_t> shape,
                     const ValuePtr& x, const Dims& dims, bool keepdim);
// any: a nonzero element; all: no zero element (NaN counts as nonzero). Counted, so an empty
// reduction gives False and True.
ValuePtr LowerAnyAll(GraphContext* graph, bool any, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                     const Dims& dims, bool keepdim);
ValuePtr LowerCountNonzero(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                           const Dims& dims);
// argmax/argmin along `dim` (the first index of the extreme, or of the first NaN); unset: over
// every element of a contiguous buffer read flat (ViewOfUnrealized for any other x).
ValuePtr LowerArgReduce(bool max, ScalarType dtype, std::vector<int64_t> shape, ValuePtr x,
                        std::optional<int64_t> dim, bool keepdim);
// max + log(sum(exp(x - max))), the max taken as 0 where it is infinite (as eager does).
ValuePtr LowerLogsumexp(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                        const Dims& dims, bool keepdim);
// sum(|x|^p)^(1/p): p = 1 and 2 without pow, +-inf as amax/amin of |x|, 0 counting nonzeros.
ValuePtr LowerVectorNorm(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                         double ord, const Dims& dims, bool keepdim);
// The variance (`std`: its square root) divided by max(0, count - correction) (1 when unset),
// from Welford's partial statistics (Note [Shifted means] in reductions.cc).
std::shared_ptr<ir::Pointwise> LowerVar(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape,
                                        const ValuePtr& x, const Dims& dims, std::optional<double> correction,
                                        bool keepdim);
std::shared_ptr<ir::Pointwise> LowerStd(GraphContext* graph, ScalarType dtype, std::vector<int64_t> shape,
                                        const ValuePtr& x, const Dims& dims, std::optional<double> correction,
                                        bool keepdim);
// exp(x - max) * (1 / sum(exp(x - max))) along dim (log: x - max - log(sum)); along the last dim
// the max, the sum and the result are one kernel.
ValuePtr LowerSoftmax(GraphContext* graph, bool log, ScalarType dtype, std::vector<int64_t> shape, const ValuePtr& x,
                      int64_t dim);

}  // namespace kiln::inductor::lowering
