// inductor/memory_plan/memory_plan.h: the wrapper's memory plan, decided over typed steps before
// any kernel is compiled: which dead buffer each allocation reuses, which kernel writes over an
// input in place, which buffers live across calls (reduce-overhead), and where each name dies.
//
// Input: a lowered graph's steps in program order (Inductor's wrapper records), buffers by name:
//   Declare(b, bytes, dtype)      a buffer the wrapper owns: allocated, or an extern's fresh result
//   Alloc(b)                      the wrapper allocates b (a kernel's output)
//   Kernel(buffers, access)       a kernel call, its buffers in argument order
//   View(v, base)                 v is a view of base's memory (no copy)
//   Extern(inputs, results, fresh) a fallback op; `fresh` when its results are new memory
//   Return(outputs)               the graph's outputs
// Output (MemoryPlan), per step: an allocation's source (Note [Memory plan]) and the names that
// die after the step (the wrapper's `del`). The wrapper (python/kiln/_inductor/wrapper.py) turns
// the plan into Python source and has ReadThroughStore rewrite the in-place kernels' IR before they
// are compiled.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::inductor {

// What a kernel reads where it stores: the buffer a kernel of one loop and one store writes, and
// the buffers every load of which reads the stored element (so the store may overwrite them).
struct StoreAccess {
  int store = -1;                  // position of the stored buffer; -1: more than one statement
  std::vector<int> read_at_store;  // positions, ascending
};
StoreAccess AnalyzeStoreAccess(const codegen::Kernel& k);

// k reading its input at position `victim` through the buffer it stores at position `store`, as
// an in-place plan decided (AllocPlan::kInPlace): loads of victim become loads of store, and the
// victim leaves the argument list (positions after it move down by one). With two pointers to
// one array LLVM's vectoriser guards the vector loop with an overlap check that then always fails
// (the scalar loop ran 4x slower); one pointer read and written at the same element is the plain
// in-place loop it vectorises. Throws kiln::ValueError for positions out of range or equal.
codegen::Kernel ReadThroughStore(const codegen::Kernel& k, int victim, int store);

// The bytes a strided layout spans: more than numel's for a layout with gaps ([2, 2] with strides
// (4, 1) spans 6 elements); 0 for an empty tensor.
int64_t SpanBytes(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t itemsize);

struct AllocPlan {
  enum class Kind : uint8_t { kFresh, kReuse, kInPlace, kStatic };
  Kind kind = Kind::kFresh;
  std::string source;    // kReuse: the dead buffer reused; kInPlace: the input overwritten (both die here)
  int kernel_step = -1;  // kInPlace: the step of the kernel that writes in place,
  int victim = -1;       //   the overwritten input's position among its buffers,
  int store = -1;        //   and the output's
};
const char* AllocKindName(AllocPlan::Kind k);  // "fresh", "reuse", "in place", "static"

struct StepPlan {
  AllocPlan alloc;                // Alloc steps only
  std::vector<std::string> dies;  // names deleted after the step, in the order the step names them
};

struct MemoryPlan {
  std::vector<StepPlan> steps;              // one per step
  std::vector<std::string> static_buffers;  // reduce-overhead: allocated by the first call, in order
  std::string ToString() const;             // the golden text of memory_plan_test
};

class MemoryPlanner {
 public:
  // static_memory: reduce-overhead's buffers that no output can see are allocated once and kept.
  explicit MemoryPlanner(bool static_memory = false) : static_memory_(static_memory) {}

  void Declare(const std::string& name, int64_t nbytes, const std::string& dtype);
  void Alloc(const std::string& name);
  void Kernel(const std::vector<std::string>& buffers, StoreAccess access);
  void View(const std::string& view, const std::string& base);
  void Extern(const std::vector<std::string>& inputs, const std::vector<std::string>& results, bool fresh);
  void Return(const std::vector<std::string>& outputs);

  MemoryPlan Plan() const;
  std::string StepsToString() const;  // the steps as the test's input text

 private:
  enum class Kind : uint8_t { kAlloc, kKernel, kView, kExtern, kReturn };
  struct Step {
    Kind kind;
    std::vector<int> names;  // every buffer the step names, in order (Extern: inputs, then results)
    int results = 0;         // Extern: how many of `names` are its results (the last ones)
    bool fresh = false;      // Extern
    StoreAccess access;      // Kernel
  };
  struct Owned {
    int64_t nbytes = -1;
    std::string dtype;
  };

  int Id(const std::string& name);
  const Owned* OwnedBy(int id) const;
  int InPlaceVictim(int alloc_step, int buffer, const std::vector<int>& last_use, const std::vector<bool>& overwritable,
                    const std::vector<int>& view_last, AllocPlan* plan) const;

  bool static_memory_;
  std::vector<Step> steps_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<int, Owned> owned_;  // declared buffers
};

}  // namespace kiln::inductor
