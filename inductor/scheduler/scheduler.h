// inductor/scheduler/scheduler.h: kernels formed from values as a graph is lowered (Note [Kernels
// formed at realization]).
//
// Note [Kernels formed at realization]: a lazy value becomes a kernel only when something needs
// it in memory -- a graph output, a value several nodes read that is not cheap to recompute
// (fusion.h), an extern op's argument. Realizing it forms one kernel holding everything lazy
// behind it (vertical fusion):
//  - a Pointwise is one loop nest over its shape (trailing dimensions merged into one loop where
//    every load walks them as one, MergeDims), or over a layout a graph output promises;
//  - a reduction is accumulated in the kernel that reads it when it reduces along that kernel's
//    inner loop over the same outer loops (RMSNorm + SiLU: one kernel), and its source's
//    pointwise code is placed in its loop;
//  - a value of a reduction loop (`space`: a variance from its partial sums, a matmul template's
//    bias and GELU) is stored by that loop's kernel (RealizeReductions), with the other members
//    of its group;
//  - a reduction several nodes read is deferred until its buffer is first used, and its sibling
//    reductions join its kernel then (horizontal fusion, Note [Sibling reductions]).
// Each kernel is named `cpp_fused_<its ops, sorted>_<n>` as Inductor names them, numbers its
// buffers in the order its code reads them (inputs in_ptr<i>, outputs out_ptr<k>), and names the
// user's lines it computes (its values' origins). The wrapper's steps -- an allocation for each
// output, the kernel call, a view the wrapper defines -- are kept in program order until the
// caller takes them (TakeSteps) into the wrapper's list, between its own extern calls.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_ir.h"
#include "inductor/ir/values.h"
#include "inductor/scheduler/realization.h"

namespace kiln::inductor::scheduler {

using ir::Pointwise;

// A kernel formed from values: its IR, the buffers it takes in order, the aten ops its code
// computes (its name's), the user's lines it computes (stack traces, in graph order).
struct FormedKernel {
  std::shared_ptr<codegen::Kernel> ir;
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::set<std::string> ops;
  std::vector<std::string> stack_traces;
};

// One of the wrapper's steps kernel formation makes.
struct Step {
  enum class Kind : uint8_t { kAlloc, kKernel, kView };
  Kind kind = Kind::kAlloc;
  std::shared_ptr<Buffer> buf;             // kAlloc: the output; kView: the view
  std::shared_ptr<Buffer> base;            // kView: the buffer it views
  std::shared_ptr<FormedKernel> kernel;    // kKernel
};

// A value seen with runs of adjacent dimensions merged into one (MergeDims).
struct Merged {
  std::shared_ptr<Value> value;
  // runs of the original dimensions, in order, and whether each run is among the merged `dims`
  std::vector<std::vector<int>> runs;
  std::vector<bool> reduced;
};

// `x` with each run of adjacent dimensions in `dims` merged into one where it is laid out as one
// axis (its stride for d-1 is shape[d] times d's: a Buffer's own strides, or every load a lazy
// value's body makes; NCHW's H and W for batch norm); nullopt when nothing merges, x is a
// Reduction, or a lazy x reads a reduction or its own loop index (no memory layout to follow). A
// Buffer merges into a strided view of itself; a Pointwise into one computing x as `state`
// realized it now (a snapshot: a value realized later is recomputed there, not loaded in another
// layout, Note [Realized as of]).
std::optional<Merged> MergeDims(const std::shared_ptr<Value>& x, const std::set<int>& dims, Realization* state);

class Scheduler {
 public:
  Realization state;

  // A buffer kernels will write, named buf<n>, contiguous unless `stride` says otherwise.
  std::shared_ptr<Buffer> NewBuffer(ScalarType dtype, std::vector<int64_t> shape,
                                    std::optional<std::vector<int64_t>> stride = std::nullopt, int64_t offset = 0);
  // Names the wrapper defines itself (inputs, extern results).
  void MarkDefined(const std::string& name) { defined_.insert(name); }
  bool IsDefined(const std::string& name) const { return defined_.count(name) != 0; }

  // Makes the wrapper define `buf`: a deferred reduction's kernel is formed now; a view of another
  // buffer is defined from its base (and named).
  std::shared_ptr<Buffer> Define(const std::shared_ptr<Buffer>& buf);
  // `value` in memory: a buffer defined, a lazy value's kernel formed (once).
  std::shared_ptr<Buffer> Realize(const std::shared_ptr<Value>& value);
  // One kernel computing a Pointwise (and the members of its group not computed yet) over its
  // shape; with `stride` (a dense or gapped layout: a graph output's), stored in that layout,
  // looping over its dimensions in memory order.
  std::shared_ptr<Buffer> KernelForPointwise(const std::shared_ptr<Pointwise>& value,
                                             const std::optional<std::vector<int64_t>>& stride = std::nullopt);
  // A buffer for a reduction several nodes read, its kernel formed when the buffer is first used.
  std::shared_ptr<Buffer> Defer(const std::shared_ptr<Reduction>& red);
  // One kernel over a reduction loop storing each of `values` (Reductions along its axis, or
  // values of them) into a buffer of its keepdim shape (a deferred one's buffer where it has one).
  std::vector<std::shared_ptr<Buffer>> RealizeReductions(const std::vector<std::shared_ptr<Value>>& values,
                                                         const ir::LoopSpace& space);
  // buf seen with a shape that differs only in size-1 dimensions (a view, no copy).
  std::shared_ptr<Buffer> SqueezedView(const std::shared_ptr<Buffer>& buf, const std::vector<int64_t>& shape);

  // The steps made since the last call, in program order.
  std::vector<Step> TakeSteps() { return std::exchange(steps_, {}); }

 private:
  friend class KernelBuilder;
  std::shared_ptr<Buffer> KernelInLayout(const std::shared_ptr<Pointwise>& value, const std::vector<int64_t>& stride);
  std::shared_ptr<Buffer> KernelForReduction(const std::shared_ptr<Reduction>& red);
  void Emit(class KernelBuilder& kb, std::set<std::string> ops, const std::vector<std::shared_ptr<Buffer>>& outs);

  std::set<std::string> defined_;
  std::map<std::string, std::shared_ptr<Reduction>> deferred_;  // buffer name -> its reduction
  std::vector<const Buffer*> building_;  // outputs of reduction kernels being formed
  std::vector<Step> steps_;
  int64_t next_name_ = 0;
  int64_t num_kernels_ = 0;
};

}  // namespace kiln::inductor::scheduler
