// codegen/kernel_ir.h: the loop-level kernel IR that CPU code generation consumes.
//
// A Kernel is what one generated function computes (formed by Inductor's scheduler from the
// lowerings' values, inductor/scheduler and inductor/lowering, or built by eager's CUDA kernels):
//
//   for i_0 in [begin, end)            # the first outer dim, split across the thread pool
//     for i_1 ... i_{k-1} in [0, n_j)  # the other outer dims, fully
//       accumulators = identities
//       for loop in loops:             # in order
//         for r in [0, loop.extent): loop.stmts
//
// An Index is an affine element offset `offset + sum_k outer_strides[k] * i_k + inner_stride * r`.
// Expressions compute in a "compute dtype" (f32 for f32/bf16, f64, i64 for integers, i1 for
// bool); loads convert from the buffer dtype and stores convert back. ("acc", id) reads a
// finished accumulator, i.e. one reduced in an earlier loop of the same outer iteration.
//
// Invariants (checked by Validate): buffer ids and acc reads are in range, every Index has one
// stride per outer dim, operators have their arity, an accumulator is read only in a loop after
// the one that reduces it. The IR is a tree (expressions are shared_ptr<const Expr>, so a
// lowering may share subtrees; codegen emits each node once per use).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::codegen {

// Element types of buffers. Compute types: F32/BF16/F16 -> f32, F64 -> f64, the integers -> i64,
// Bool -> i1. F16 and the 8/16-bit integers come from eager's CUDA kernels (Inductor's CPU lowering
// does not produce them).
enum class DType : uint8_t { F32, F64, I64, I32, Bool, BF16, F16, I16, I8, U8 };
const char* DTypeName(DType t);          // "f32", "f64", "i64", "i32", "bool", "bf16", "f16", "i16", "i8", "u8"
bool ParseDType(const std::string& s, DType* out);
int64_t DTypeSize(DType t);              // bytes in memory (bool is 1, bf16 is 2)
DType ComputeDType(DType t);             // F32, F64, I64 or Bool
inline bool IsFloatDType(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16; }

struct Index {
  int64_t offset = 0;
  std::vector<int64_t> outer_strides;  // one per outer dim (0 = broadcast)
  int64_t inner_stride = 0;            // stride of the inner loop variable r
};

// Operators of Op expressions. Names (OpName/ParseOp) are the IR's strings.
enum class OpCode : uint8_t {
  // unary
  kNeg, kAbs, kExp, kLog, kLog1p, kExpm1, kSqrt, kRsqrt, kSin, kCos, kTanh, kSigmoid, kErf, kGelu, kNormalCdf,
  kFloor, kCeil, kRound, kTrunc, kReciprocal, kRelu, kLogicalNot, kSign,
  kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kErfc, kLgamma, kExp2, kLog2, kLog10,
  kSignbit, kBitNot,
  // binary (kMod is Python's remainder, with the divisor's sign; kFmod C's, with the dividend's)
  kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kMax, kMin, kEq, kNe, kLt, kLe, kGt, kGe,
  kLogicalAnd, kLogicalOr, kAtan2, kFmod, kHypot, kCopysign, kBitAnd, kBitOr, kBitXor, kShl, kShr,
  kGeluBackward,  // (grad, x): f32 only, eager's float32 kernel (Note [One float math])
  // ternary
  kWhere,
};
const char* OpName(OpCode op);
bool ParseOp(const std::string& s, OpCode* out);
int OpArity(OpCode op);
// What evaluating the op once costs, in units of one add: 4 for a transcendental function (a libm
// call or a polynomial) and for a division (tens of cycles), 1 for the rest. Inductor's
// realize-or-recompute score (inductor/scheduler/fusion.h) sums it over an expression.
int OpCost(OpCode op);

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind : uint8_t { kLoad, kConst, kAcc, kIndex, kOp, kCast };
  Kind kind = Kind::kConst;
  // kLoad
  int buffer = 0;
  Index index;
  // kConst: value (ints keep their exact value in int_value), dtype; kCast: target dtype
  double value = 0;
  int64_t int_value = 0;
  DType dtype = DType::F32;
  // kAcc
  int acc_id = 0;
  // kIndex: outer dim k >= 0, or -1 for the inner r
  int dim = -1;
  // kOp
  OpCode op = OpCode::kAdd;
  std::vector<ExprPtr> args;  // kOp operands; kCast: one operand

  static ExprPtr Load(int buffer, Index index);
  static ExprPtr Const(double v, DType dtype);  // int dtypes: value truncated into int_value
  static ExprPtr ConstInt(int64_t v, DType dtype);
  static ExprPtr Acc(int acc_id);
  static ExprPtr LoopIndex(int dim);
  static ExprPtr Op(OpCode op, std::vector<ExprPtr> args);
  static ExprPtr Cast(ExprPtr e, DType dtype);
};

// Calls fn on e and then on each operand, depth first.
template <typename Fn>
void ForEachExpr(const Expr& e, Fn&& fn) {
  fn(e);
  for (const ExprPtr& a : e.args) ForEachExpr(*a, fn);
}

// kMaxLast/kMinLast keep the later of equal values (PyTorch's max()/min() over all elements:
// [0., -0.].max() is -0.); kMax/kMin keep the earlier (amax, max(dim)).
enum class ReduceKind : uint8_t { kSum, kMax, kMin, kProd, kArgmax, kArgmin, kMaxLast, kMinLast };
const char* ReduceName(ReduceKind k);
bool ParseReduce(const std::string& s, ReduceKind* out);

struct Stmt {
  enum class Kind : uint8_t { kStore, kReduce, kWelford };
  Kind kind = Kind::kStore;
  int buffer = 0;  // kStore
  Index index;     // kStore
  ExprPtr expr;
  int acc_id = 0;  // kReduce, kWelford (acc_id: mean, +1: m2, +2: count)
  ReduceKind reduce = ReduceKind::kSum;
};

struct Loop {
  int64_t extent = 0;
  std::vector<Stmt> stmts;
};

struct Buffer {
  std::string name;
  DType dtype = DType::F32;
};

struct Kernel {
  std::string name;
  std::vector<Buffer> buffers;
  std::vector<int64_t> outer;  // empty means one iteration (begin=0, end=1)
  std::vector<Loop> loops;
};

// Throws kiln::ValueError naming the kernel and the offending part when an invariant is broken.
void Validate(const Kernel& k);

// A canonical text of the whole kernel (exact constants, hex floats): equal text = equal kernel.
// ParseKernelText reads it back (golden-text tests, debug dumps that run alone), throwing
// kiln::ValueError with the line and column of the first thing it cannot read.
std::string Serialize(const Kernel& k);
std::string SerializeExpr(const Expr& e);
Kernel ParseKernelText(const std::string& text);
ExprPtr ParseExprText(const std::string& text);

// Structural equality of expressions, and a hash that agrees with it.
bool ExprEqual(const Expr& a, const Expr& b);
uint64_t ExprHash(const Expr& e);
// What evaluating e once costs: OpCost summed over its ops (loads, constants, casts are free).
// Inductor's realize-or-recompute score (Note [Recompute or realize] in inductor/scheduler/fusion.h).
int ExprCost(const Expr& e);
// e with every load replaced by fn(load) (an ExprPtr), sharing the subtrees fn leaves unchanged.
template <typename Fn>
ExprPtr MapLoads(const ExprPtr& e, const Fn& fn) {
  if (e->kind == Expr::Kind::kLoad) return fn(e);
  if (e->args.empty()) return e;
  std::vector<ExprPtr> operands;
  operands.reserve(e->args.size());
  bool same = true;
  for (const ExprPtr& a : e->args) {
    operands.push_back(MapLoads(a, fn));
    same = same && operands.back() == a;
  }
  if (same) return e;
  if (e->kind == Expr::Kind::kCast) return Expr::Cast(std::move(operands[0]), e->dtype);
  return Expr::Op(e->op, std::move(operands));
}
// e with every load of buffer i replaced by args[i]: an element function (Note [Pointwise ops as
// kernel IR], tensor/ops/pointwise_ir.h) applied to its operands' expressions. Throws
// kiln::ValueError when e loads a buffer past args.
ExprPtr SubstituteLoads(const ExprPtr& e, const std::vector<ExprPtr>& args);
// 128-bit FNV-1a of Serialize(k), as 32 hex digits; stable across processes and builds.
std::string HashKernel(const Kernel& k);
std::string HashString(const std::string& s);

// The C-like listing shown to users (output_code, debug dumps).
std::string PrintKernel(const Kernel& k);

// [min, max] element offsets the kernel can touch in each buffer (over all loads and stores);
// {0, -1} for a buffer it never touches; `written`: whether the kernel stores into it.
//
// Note [Buffers do not alias]: a buffer a kernel stores into shares no memory with any other of
// its buffers (a kernel writing over its own input has one buffer for both: Note [Memory plan] in
// inductor/memory_plan). The LLVM emitter tells the optimizer so (each buffer its own alias
// scope), and callers check it before each run (python/csrc/python_inductor.cc raises where a
// written buffer's touched range meets another's in the same storage).
struct Extent {
  int64_t min = 0, max = -1;
  bool written = false;
};
std::vector<Extent> BufferExtents(const Kernel& k);

}  // namespace kiln::codegen
