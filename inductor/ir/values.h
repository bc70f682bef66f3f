// inductor/ir/values.h: the values a lowered graph computes -- buffers in memory, and lazy values
// whose bodies are computed only where a kernel needs them (Note [Values]).
//
// Note [Values]: lowering an aten graph (python/kiln/_inductor/lowering) gives each node a value:
//  - Buffer: memory the wrapper owns or receives (a graph input, a kernel's or an extern op's
//    result), with a strided layout; a view of another buffer (`base`) shares its memory;
//  - Pointwise: a dtype, a shape and a traced body (Note [Bodies]): one element's expression at
//    symbolic indices. It is computed (realized) only when something needs it in memory; until
//    then every reader may compute it inline. `space`: it is a value of a reduction loop (a
//    variance from its partial sums), computed by that loop's kernel; `squeeze_of`: the same
//    elements as another value with size-1 dimensions added or removed (a reduction without
//    keepdim), realized as a view of that value's buffer;
//  - Reduction: `reduce` (sum, max, ..., welford) over the trailing axis of a traced source read
//    at (kept dims, r), its result of the keepdim shape; `finish` maps the accumulator to the
//    value (a mean divides).
// A body names the values it reads by handle (an int64 each value gets when made); the value whose
// body it is keeps them alive (`inputs`, and `inlined`: the values whose bodies were put into it).
// ValueOf(handle) finds a live value. Values computed by one kernel together (a variance with its
// mean, max pool's values with their indices) share a group, held weakly.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_ir.h"
#include "inductor/ir/body.h"
#include "tensor/scalar_type.h"

namespace kiln::inductor::ir {

// A reduction's loop nest: outer loops over the kept dimensions, the inner loop over `extent`
// elements of the reduced axis (`axis` of the keepdim shape; unset until the lowering says).
// Equal spaces are one loop nest.
struct LoopSpace {
  std::vector<int64_t> kept;
  int64_t extent = 1;
  std::optional<int> axis;
  bool operator==(const LoopSpace& o) const { return kept == o.kept && extent == o.extent && axis == o.axis; }
  uint64_t Hash() const;
  std::string ToString() const;  // "LoopSpace(kept=[4, 8], extent=16, axis=1)"
};

// A graph node whose code a value computes: its position among the lowered nodes and its
// stack trace (the user's line, named in the kernels it is fused into).
struct Origin {
  int64_t position = 0;
  std::string stack_trace;
  auto operator<=>(const Origin&) const = default;
};

// What a traced function gave: its body, the values it reads, and those whose bodies it inlined.
class Value;
struct Traced {
  std::shared_ptr<const Body> body;
  std::vector<std::shared_ptr<Value>> inputs;
  std::vector<std::shared_ptr<Value>> inlined;
};

class Value : public std::enable_shared_from_this<Value> {
 public:
  enum class Kind : uint8_t { kBuffer, kPointwise, kReduction };
  virtual ~Value();
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  Kind kind() const { return kind_; }
  int64_t handle() const { return handle_; }
  ScalarType dtype() const { return dtype_; }
  // The shape the graph sees (a reduction's: the keepdim shape).
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const;

  // The aten op names its code folds in (kernel names), and the graph nodes it computes.
  std::set<std::string> ops;
  std::set<Origin> origins;

  // The values one kernel computes together with it (itself among them); empty when none.
  std::vector<std::shared_ptr<Value>> Group() const;
  // Makes `values` one group (each one's Group() is then all of them that are alive).
  static void MakeGroup(const std::vector<std::shared_ptr<Value>>& values);

  // Its origins and those of every value inlined into it, recursively.
  std::set<Origin> AllOrigins() const;
  // The values it reads and inlines (empty for a buffer).
  virtual const Traced* traced() const { return nullptr; }
  // One line: "Pointwise float32 [4, 8] ops=['add', 'relu']" (a graph's values before fusion).
  virtual std::string ToString() const = 0;

 protected:
  Value(Kind kind, ScalarType dtype, std::vector<int64_t> shape);

 private:
  Kind kind_;
  int64_t handle_;
  ScalarType dtype_;
  std::vector<int64_t> shape_;
  std::shared_ptr<std::vector<std::weak_ptr<Value>>> group_;
};

// The live value with this handle; nullptr once it is gone.
std::shared_ptr<Value> ValueOf(int64_t handle);

class Buffer : public Value {
 public:
  // Where its memory comes from: a graph input, a kernel or extern op that writes it, or
  // another buffer it views (`base`).
  enum class Source : uint8_t { kInput, kKernel, kView };
  Buffer(std::optional<std::string> name, ScalarType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride,
         int64_t offset, Source source);
  Buffer(std::optional<std::string> name, ScalarType dtype, std::vector<int64_t> shape, std::vector<int64_t> stride,
         int64_t offset, std::shared_ptr<Buffer> base);

  // Its name in the wrapper; a view gets one when the wrapper defines it.
  std::optional<std::string> name;
  const std::vector<int64_t>& stride() const { return stride_; }
  // The storage offset (elements) the wrapper gives a view. Loads ignore it: a kernel indexes
  // from the data pointer it receives, which includes it.
  int64_t offset() const { return offset_; }
  Source source() const { return source_; }
  const std::shared_ptr<Buffer>& base() const { return base_; }
  // The buffer whose memory this one is, through every view (itself when it views none).
  const Buffer& Root() const;
  bool IsContiguous() const;
  std::string ToString() const override;

 private:
  std::vector<int64_t> stride_;
  int64_t offset_;
  Source source_;
  std::shared_ptr<Buffer> base_;
};

class Pointwise : public Value {
 public:
  Pointwise(ScalarType dtype, std::vector<int64_t> shape, std::shared_ptr<const Traced> traced);
  const Body& body() const { return *traced_->body; }
  const Traced* traced() const override { return traced_.get(); }
  // The same traced body (a value's first rows along expanded dims share their elements' code).
  const std::shared_ptr<const Traced>& shared_trace() const { return traced_; }

  std::optional<LoopSpace> space;     // computed by the kernel of this reduction loop
  std::shared_ptr<Value> squeeze_of;  // realized as a view of this value's buffer
  std::string ToString() const override;

 private:
  std::shared_ptr<const Traced> traced_;
};

class Reduction : public Value {
 public:
  // `source` traced over (kept dims, r); `keepdim_shape` the graph's shape of it; `finish` (or
  // nullptr) an expression of Load(0), the accumulator.
  Reduction(ScalarType dtype, std::vector<int64_t> kept, int64_t extent, std::string reduce,
            std::shared_ptr<const Traced> source, std::vector<int64_t> keepdim_shape, codegen::ExprPtr finish);
  const std::vector<int64_t>& kept() const { return kept_; }
  int64_t extent() const { return extent_; }
  const std::string& reduce() const { return reduce_; }
  const Body& source() const { return *source_->body; }
  const Traced* traced() const override { return source_.get(); }
  const codegen::ExprPtr& finish() const { return finish_; }
  // The value read from the accumulator expression `acc`.
  codegen::ExprPtr Finished(codegen::ExprPtr acc) const;
  LoopSpace Space() const { return {kept_, extent_, axis}; }

  std::optional<int> axis;  // the reduced dimension of the keepdim shape (set by its lowering)
  std::string ToString() const override;

 private:
  std::vector<int64_t> kept_;
  int64_t extent_;
  std::string reduce_;
  std::shared_ptr<const Traced> source_;
  codegen::ExprPtr finish_;
};

// The kernel IR type of a value's elements (f32, f64, i64, i32, bool, bf16); NotImplementedError
// for a dtype kernels cannot hold (float16, complex, ...: such a value's op runs its eager kernel).
codegen::DType KernelDType(ScalarType t);
// The dtype of a kernel IR type's elements (its inverse, total: every kernel type is a dtype).
ScalarType ScalarTypeOfKernel(codegen::DType t);

// Row-major strides of `shape` (size-0 dimensions count as 1).
std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);

}  // namespace kiln::inductor::ir
