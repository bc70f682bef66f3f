// inductor/lowering/lazy.h: lazy values built from C++ functions of their indices, traced once
// (Note [Bodies]) -- what TraceCtx is for the lowerings still written in Python.
//
// A lowering in C++ describes a value by the expression of one element: `fn(trace, indices)` for
// a Pointwise, `fn(trace, kept indices, r)` for a Reduction's source. Through the Trace, each read
// of another value becomes one of the body's reads (decided where the body is placed: a load of
// its buffer, or its body inlined), and Inline puts a lazy value's code here (never its buffer).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_ir.h"
#include "inductor/ir/affine.h"
#include "inductor/ir/body.h"
#include "inductor/ir/values.h"
#include "tensor/dispatcher.h"

namespace kiln::inductor::lowering {

using Indices = std::vector<ir::Affine>;

// One body being traced.
class Trace {
 public:
  Trace();
  // `value` read at `index`, cast to `as` where given and not its own kernel type; a value of a
  // dtype kernels cannot hold throws NotImplementedError (its reader's node runs eagerly).
  codegen::ExprPtr Read(const std::shared_ptr<ir::Value>& value, Indices index,
                        std::optional<codegen::DType> as = std::nullopt);
  // A lazy value's own code at `index` (its body inlined, never its buffer).
  codegen::ExprPtr Inline(const std::shared_ptr<ir::Pointwise>& value, Indices index);
  // A Pointwise's code inlined; a Buffer or a Reduction read (a reduction's value, accumulated
  // where the body is placed or loaded from its buffer).
  codegen::ExprPtr ValueAt(const std::shared_ptr<ir::Value>& value, Indices index);
  // The traced body of `expr`, with the values read and inlined.
  std::shared_ptr<const ir::Traced> Finish(codegen::ExprPtr expr);

 private:
  ir::Tracer tracer_;
  std::shared_ptr<ir::Traced> traced_;
};

// Kernel IR of one operator: an element function's building blocks.
inline codegen::ExprPtr Unary(codegen::OpCode op, codegen::ExprPtr a) { return codegen::Expr::Op(op, {std::move(a)}); }
inline codegen::ExprPtr Binary(codegen::OpCode op, codegen::ExprPtr a, codegen::ExprPtr b) {
  return codegen::Expr::Op(op, {std::move(a), std::move(b)});
}
inline codegen::ExprPtr Where(codegen::ExprPtr c, codegen::ExprPtr a, codegen::ExprPtr b) {
  return codegen::Expr::Op(codegen::OpCode::kWhere, {std::move(c), std::move(a), std::move(b)});
}

// The type a formula's own constants take for values of `t`: float32 for bfloat16 (kernels
// compute bfloat16 in float32, and a bfloat16 constant would be rounded to 8 significant bits).
inline codegen::DType Opmath(codegen::DType t) { return t == codegen::DType::BF16 ? codegen::DType::F32 : t; }
inline bool IsFloat(codegen::DType t) {
  return t == codegen::DType::F32 || t == codegen::DType::F64 || t == codegen::DType::BF16 || t == codegen::DType::F16;
}

// A dimension as aten gives it (negative ones count from the end) among `rank`: 0..rank-1 (0 for
// a 0-d value, which takes 0 and -1 only).
int64_t WrapDim(int64_t d, size_t rank);

// The registry's op of this full name ("aten::sum.dim_IntList").
const Op& AtenOp(const char* full_name);

// `ops` (a value's kernel-name ops) with `names` added.
inline std::set<std::string> With(std::set<std::string> ops, std::initializer_list<const char*> names) {
  for (const char* n : names) ops.insert(n);
  return ops;
}

using ElementFn = std::function<codegen::ExprPtr(Trace&, const Indices&)>;
using SourceFn = std::function<codegen::ExprPtr(Trace&, const Indices& kept, const ir::Affine& r)>;

// d0, d1, ..., d<n-1>: the indices a body of n dimensions is traced at.
Indices Variables(size_t n);

// Indices into an operand of shape `in` broadcast to shape `out` (a size-1 dimension stays at 0
// where out's is larger).
Indices BroadcastIndices(const Indices& idx, const std::vector<int64_t>& in, const std::vector<int64_t>& out);

// A Pointwise of `dtype` and `shape` whose element is fn(trace, indices).
std::shared_ptr<ir::Pointwise> LazyPointwise(ScalarType dtype, std::vector<int64_t> shape, std::set<std::string> ops,
                                             const ElementFn& fn);

// A Reduction `reduce` of fn(trace, kept, r) along `axis` of `shape` (the shape reduced: its kept
// dimensions are the others, the result's shape is `shape` with 1 at `axis`); `finish` (or
// nullptr) maps the accumulator, Load(0), to the value. It joins the reductions of the graph
// being lowered (Realization::Current(): Note [Sibling reductions]).
std::shared_ptr<ir::Reduction> LazyReduction(ScalarType dtype, const std::vector<int64_t>& shape, int axis,
                                             const std::string& reduce, std::set<std::string> ops, const SourceFn& fn,
                                             codegen::ExprPtr finish = nullptr);

}  // namespace kiln::inductor::lowering
