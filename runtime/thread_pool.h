// runtime/thread_pool.h: a fixed pool of worker threads and parallel_for over an index range.
//
// Kernels call ParallelFor(begin, end, grain, fn); ranges smaller than `grain` (or any range when
// already inside a parallel region) run inline on the caller, so small tensors pay nothing.
#pragma once

#include <cstdint>

#include "runtime/function_ref.h"

namespace kiln {

// Runs fn(chunk_begin, chunk_end) over disjoint chunks covering [begin, end), returning when all
// have run. `fn` is referenced, not copied (a lambda's captures never go to the heap).
void ParallelFor(int64_t begin, int64_t end, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

int GetNumThreads();
void SetNumThreads(int n);  // n >= 1; takes effect for the next parallel region
bool InParallelRegion();

}  // namespace kiln
