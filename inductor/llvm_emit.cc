// inductor/llvm_emit.cc: kernel IR -> one LLVM function, optimised at O3 for the host.
//
// Note [Reductions and NaN]: sum/prod are emitted with reassoc+nsz so the loop vectoriser can
// split them into vector partial sums. max/min/argmax/argmin follow PyTorch: NaN propagates
// (the first NaN wins for arg*), ties keep the first index; their select chains stay scalar in
// LLVM 14: its vectoriser has no NaN-propagating FP min/max recurrence, and its FMax/FMin
// recurrence (tried: an `nnan` maxnum over NaN-free inputs plus a NaN flag) is only accepted
// under the function-wide "no-nans-fp-math" attribute, which would let the backend fold away
// the NaN checks this code relies on.
#include <cmath>

#include "inductor/llvm_emit.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "inductor/llvm_math.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/error.h"

namespace kiln::inductor {
namespace {

// Note [Vector width and interleaving]: LLVM's x86 cost model prefers 256-bit vectors even on
// AVX-512 hosts, and interleaves a loop's vector iterations only when it thinks that hides a
// reduction's latency. For arithmetic-heavy bodies (SiLU: an inline exp and a reciprocal, a chain
// of ~20 dependent instructions) one iteration's chain then fills the scheduler before the next
// iteration's independent work is seen, and the loop ran at a third of its issue rate. So
// kernels use 512-bit vectors where the host has AVX-512F, and inner loops of at least
// kInterleaveMinExtent iterations interleave kInterleave vector iterations (shorter loops would
// fall into the scalar remainder). Measured on the 2048x4096 RMSNorm+SiLU kernel (2 threads):
// 4.6 ms at 512 bits without interleaving, 2.7-3.2 ms with it; 3.8-5.0 ms at 256 bits with
// libmvec's exp.
constexpr int kInterleave = 4;
constexpr int64_t kInterleaveMinExtent = 1024;

// A value and its compute dtype (F32, F64, I64 or Bool).
struct V {
  llvm::Value* v;
  DType t;
};

int Rank(DType t) { return t == DType::Bool ? 0 : t == DType::I64 ? 1 : t == DType::F32 ? 2 : 3; }

class Emitter {
 public:
  Emitter(llvm::LLVMContext& ctx, llvm::Module& m, const Kernel& k, const std::string& symbol)
      : ctx_(ctx), m_(m), b_(ctx), k_(k), symbol_(symbol) {}

  llvm::Function* Emit(const std::string& cpu, const std::string& features, int prefer_vector_width,
                       bool inline_exp) {
    inline_exp_ = inline_exp;
    auto* i64 = b_.getInt64Ty();
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {b_.getInt8PtrTy()->getPointerTo(), i64, i64}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol_, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addFnAttr("target-cpu", cpu);
    fn_->addFnAttr("target-features", features);
    fn_->addFnAttr("no-trapping-math", "true");
    if (prefer_vector_width > 0) fn_->addFnAttr("prefer-vector-width", std::to_string(prefer_vector_width));
    auto args = fn_->arg_begin();
    llvm::Value* ptrs = &*args++;
    llvm::Value* begin = &*args++;
    llvm::Value* end = &*args++;
    ptrs->setName("ptrs");
    begin->setName("outer_begin");
    end->setName("outer_end");
    fn_->addParamAttr(0, llvm::Attribute::NoAlias);
    fn_->addParamAttr(0, llvm::Attribute::ReadOnly);

    entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry_);
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt8PtrTy(), ptrs, i);
      llvm::Value* p = b_.CreateLoad(b_.getInt8PtrTy(), slot, k_.buffers[i].name + ".raw");
      bufs_.push_back(b_.CreateBitCast(p, MemType(k_.buffers[i].dtype)->getPointerTo(), k_.buffers[i].name));
    }
    DeclareAccumulators();

    std::vector<int64_t> outer = k_.outer;
    if (outer.empty()) outer.push_back(1);
    outer_vars_.assign(outer.size(), nullptr);
    EmitOuter(0, outer, begin, end);
    b_.CreateRetVoid();
    return fn_;
  }

 private:
  struct Acc {
    llvm::AllocaInst* slot = nullptr;   // the value read by ("acc", id)
    llvm::AllocaInst* value = nullptr;  // argmax/argmin: the running best value
    DType t = DType::F32;
  };

  llvm::Type* MemType(DType t) {
    switch (t) {
      case DType::F32: return b_.getFloatTy();
      case DType::F64: return b_.getDoubleTy();
      case DType::I64: return b_.getInt64Ty();
      case DType::I32: return b_.getInt32Ty();
      case DType::Bool: return b_.getInt8Ty();
      case DType::BF16: return b_.getInt16Ty();
    }
    return nullptr;
  }
  llvm::Type* CType(DType t) {
    switch (ComputeDType(t)) {
      case DType::F32: return b_.getFloatTy();
      case DType::F64: return b_.getDoubleTy();
      case DType::Bool: return b_.getInt1Ty();
      default: return b_.getInt64Ty();
    }
  }

  // Loops: rotated, guarded, with the induction variable a phi (what the vectoriser wants).
  template <typename Body>
  void EmitLoop(llvm::Value* lo, llvm::Value* hi, const char* name, Body body, int interleave = 1) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, std::string(name) + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, std::string(name) + ".exit", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), header, exit);
    b_.SetInsertPoint(header);
    llvm::PHINode* iv = b_.CreatePHI(b_.getInt64Ty(), 2, name);
    iv->addIncoming(lo, pre);
    body(iv);
    llvm::Value* next = b_.CreateAdd(iv, b_.getInt64(1), std::string(name) + ".next", true, true);
    iv->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* latch = b_.CreateCondBr(b_.CreateICmpSLT(next, hi), header, exit);
    if (interleave > 1) {  // Note [Vector width and interleaving]
      llvm::Metadata* count[] = {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                                 llvm::ConstantAsMetadata::get(b_.getInt32(interleave))};
      llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, llvm::None);
      llvm::Metadata* ops[] = {self.get(), llvm::MDNode::get(ctx_, count)};
      llvm::MDNode* loop_id = llvm::MDNode::getDistinct(ctx_, ops);
      loop_id->replaceOperandWith(0, loop_id);
      latch->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
    }
    b_.SetInsertPoint(exit);
  }

  // Note [Prefetching the next row]: a kernel of several inner loops per row (a reduction, then
  // the pointwise loop that uses it: RMSNorm, softmax) streams the row from memory in its first
  // loop and computes in its last, so alone on a core it waits for memory, then computes, never
  // both. Its last loop therefore prefetches the first loop's rows for the next outer iteration
  // as it goes: it runs in chunks of kPrefetchChunk iterations, and before each chunk a short
  // loop issues that chunk's share of the next row's cache lines. The chunk's own loop keeps a
  // constant trip count, so it vectorises as before (the vectoriser leaves any loop holding a
  // prefetch scalar), and the tail past the last whole chunk runs without prefetches. A
  // prefetch cannot fault, so the row after a thread's last one (or after the buffer) is safe.
  // On the 2048x4096 RMSNorm+SiLU kernel (2 threads, with the other changes of that session):
  // 0.29-0.31 ns per element without, 0.18-0.24 with. Chunks of 64 and 128 iterations did best,
  // 256 and 512 worse; prefetching into L2 instead of L1, or the output's lines as well, did
  // not help.
  static constexpr int64_t kPrefetchChunk = 64;
  static constexpr int64_t kPrefetchMinExtent = 1024;
  static constexpr int64_t kCacheLine = 64;

  // The first loop's contiguous loads that move with the innermost outer loop, when loop `l` is
  // the last of several and only stores (a reduction there would be split by the chunks).
  std::vector<const Expr*> NextRowReads(size_t l) {
    std::vector<const Expr*> reads;
    if (k_.outer.empty() || l == 0 || l + 1 != k_.loops.size()) return reads;
    const Loop& last = k_.loops[l];
    if (last.extent < kPrefetchMinExtent) return reads;
    for (const Stmt& s : last.stmts)
      if (s.kind != Stmt::Kind::kStore) return reads;
    size_t row_dim = k_.outer.size() - 1;
    for (const Stmt& s : k_.loops[0].stmts)
      ForEachExpr(*s.expr, [&](const Expr& e) {
        if (e.kind != Expr::Kind::kLoad || e.index.inner_stride != 1 || e.index.outer_strides[row_dim] == 0) return;
        for (const Expr* r : reads)
          if (r->buffer == e.buffer && r->index.offset == e.index.offset &&
              r->index.outer_strides == e.index.outer_strides)
            return;
        reads.push_back(&e);
      });
    return reads;
  }

  template <typename Body>
  void EmitPrefetchingLoop(int64_t extent, const std::vector<const Expr*>& reads, Body body, int interleave) {
    int64_t chunks = extent / kPrefetchChunk;
    int64_t row_extent = k_.loops[0].extent;
    size_t row_dim = k_.outer.size() - 1;
    llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::prefetch, {b_.getInt8PtrTy()});
    EmitLoop(b_.getInt64(0), b_.getInt64(chunks), "chunk", [&](llvm::Value* chunk) {
      for (const Expr* e : reads) {
        int64_t bytes = row_extent * DTypeSize(k_.buffers[e->buffer].dtype);
        int64_t lines = (bytes + kCacheLine - 1) / kCacheLine;
        // this chunk's share of the next row's lines: [chunk * lines / chunks, (chunk + 1) * lines / chunks)
        llvm::Value* first = b_.CreateSDiv(b_.CreateMul(chunk, b_.getInt64(lines)), b_.getInt64(chunks));
        llvm::Value* stop = b_.CreateSDiv(b_.CreateMul(b_.CreateAdd(chunk, b_.getInt64(1)), b_.getInt64(lines)),
                                          b_.getInt64(chunks));
        llvm::Value* saved = outer_vars_[row_dim];
        outer_vars_[row_dim] = b_.CreateAdd(saved, b_.getInt64(1));
        r_ = b_.getInt64(0);
        llvm::Value* row = b_.CreateGEP(MemType(k_.buffers[e->buffer].dtype), bufs_[e->buffer], Offset(e->index));
        outer_vars_[row_dim] = saved;
        row = b_.CreateBitCast(row, b_.getInt8PtrTy());
        EmitLoop(first, stop, "line", [&](llvm::Value* line) {
          llvm::Value* at = b_.CreateGEP(b_.getInt8Ty(), row, b_.CreateMul(line, b_.getInt64(kCacheLine)));
          b_.CreateCall(prefetch, {at, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
        });
      }
      llvm::Value* lo = b_.CreateMul(chunk, b_.getInt64(kPrefetchChunk), "", true, true);
      EmitLoop(lo, b_.CreateAdd(lo, b_.getInt64(kPrefetchChunk), "", true, true), "r", body, interleave);
    });
    EmitLoop(b_.getInt64(chunks * kPrefetchChunk), b_.getInt64(extent), "r", body, interleave);
  }

  void EmitOuter(size_t d, const std::vector<int64_t>& outer, llvm::Value* begin, llvm::Value* end) {
    if (d == outer.size()) {
      InitAccumulators();
      for (size_t l = 0; l < k_.loops.size(); ++l) {
        const Loop& loop = k_.loops[l];
        if (loop.extent == 0) continue;
        auto body = [&](llvm::Value* r) {
          r_ = r;
          for (const Stmt& s : loop.stmts) EmitStmt(s);
        };
        int interleave = loop.extent >= kInterleaveMinExtent ? kInterleave : 1;
        std::vector<const Expr*> ahead = NextRowReads(l);
        if (ahead.empty()) {
          EmitLoop(b_.getInt64(0), b_.getInt64(loop.extent), "r", body, interleave);
        } else {
          EmitPrefetchingLoop(loop.extent, ahead, body, interleave);
        }
      }
      return;
    }
    llvm::Value* lo = d == 0 ? begin : b_.getInt64(0);
    llvm::Value* hi = d == 0 ? end : b_.getInt64(outer[d]);
    std::string name = "i" + std::to_string(d);
    EmitLoop(lo, hi, name.c_str(), [&](llvm::Value* iv) {
      outer_vars_[d] = iv;
      EmitOuter(d + 1, outer, begin, end);
    });
  }

  // --- accumulators ---

  DType AccType(const Stmt& s) {
    DType t = TypeOf(*s.expr);
    if (s.kind == Stmt::Kind::kWelford) return t == DType::F64 ? DType::F64 : DType::F32;
    return t == DType::Bool ? DType::I64 : t;
  }

  // The compute dtype an expression produces (mirrors EmitExpr's promotion rules).
  DType TypeOf(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLoad: return ComputeDType(k_.buffers[e.buffer].dtype);
      case Expr::Kind::kConst: case Expr::Kind::kCast: return ComputeDType(e.dtype);
      case Expr::Kind::kAcc: return accs_.at(e.acc_id).t;
      case Expr::Kind::kIndex: return DType::I64;
      case Expr::Kind::kOp: break;
    }
    auto promote = [&](int from) {
      DType t = TypeOf(*e.args[from]);
      for (size_t i = from + 1; i < e.args.size(); ++i) {
        DType u = TypeOf(*e.args[i]);
        if (Rank(u) > Rank(t)) t = u;
      }
      return t;
    };
    switch (e.op) {
      case OpCode::kEq: case OpCode::kNe: case OpCode::kLt: case OpCode::kLe: case OpCode::kGt: case OpCode::kGe:
      case OpCode::kLogicalAnd: case OpCode::kLogicalOr: case OpCode::kLogicalNot:
        return DType::Bool;
      case OpCode::kExp: case OpCode::kLog: case OpCode::kLog1p: case OpCode::kExpm1: case OpCode::kSqrt:
      case OpCode::kRsqrt: case OpCode::kSin: case OpCode::kCos: case OpCode::kTanh: case OpCode::kSigmoid:
      case OpCode::kErf: case OpCode::kGelu: case OpCode::kNormalCdf: case OpCode::kReciprocal: case OpCode::kAtan2: {
        DType t = promote(0);
        return IsFloatDType(t) ? t : DType::F32;
      }
      case OpCode::kPow: return promote(0);
      case OpCode::kWhere: return promote(1);
      case OpCode::kNeg: case OpCode::kAbs: case OpCode::kSign: case OpCode::kAdd: case OpCode::kSub:
      case OpCode::kMul: case OpCode::kDiv: case OpCode::kFloorDiv: case OpCode::kMod: {
        DType t = promote(0);
        return t == DType::Bool ? DType::I64 : t;
      }
      default: return promote(0);
    }
  }

  void DeclareAccumulators() {
    for (const Loop& loop : k_.loops)
      for (const Stmt& s : loop.stmts) {
        if (s.kind == Stmt::Kind::kStore) continue;
        DType t = AccType(s);
        if (s.kind == Stmt::Kind::kWelford) {
          for (int j = 0; j < 3; ++j) accs_[s.acc_id + j] = Acc{b_.CreateAlloca(CType(t)), nullptr, t};
        } else if (s.reduce == ReduceKind::kArgmax || s.reduce == ReduceKind::kArgmin) {
          accs_[s.acc_id] = Acc{b_.CreateAlloca(b_.getInt64Ty()), b_.CreateAlloca(CType(t)), DType::I64};
          arg_types_[s.acc_id] = t;
        } else {
          accs_[s.acc_id] = Acc{b_.CreateAlloca(CType(t)), nullptr, t};
        }
      }
  }

  llvm::Value* Identity(ReduceKind r, DType t) {
    bool is_float = t == DType::F32 || t == DType::F64;
    llvm::Type* ty = CType(t);
    auto inf = [&](bool neg) { return llvm::ConstantFP::getInfinity(ty, neg); };
    switch (r) {
      case ReduceKind::kSum: return is_float ? llvm::ConstantFP::get(ty, 0.0) : b_.getInt64(0);
      case ReduceKind::kProd: return is_float ? llvm::ConstantFP::get(ty, 1.0) : b_.getInt64(1);
      case ReduceKind::kMax: case ReduceKind::kArgmax: case ReduceKind::kMaxLast:
        return is_float ? inf(true) : b_.getInt64(std::numeric_limits<int64_t>::min());
      case ReduceKind::kMin: case ReduceKind::kArgmin: case ReduceKind::kMinLast:
        return is_float ? inf(false) : b_.getInt64(std::numeric_limits<int64_t>::max());
    }
    return nullptr;
  }

  void InitAccumulators() {
    for (const Loop& loop : k_.loops)
      for (const Stmt& s : loop.stmts) {
        if (s.kind == Stmt::Kind::kStore) continue;
        if (s.kind == Stmt::Kind::kWelford) {
          for (int j = 0; j < 3; ++j) {
            const Acc& a = accs_[s.acc_id + j];
            b_.CreateStore(llvm::ConstantFP::get(CType(a.t), 0.0), a.slot);
          }
        } else if (s.reduce == ReduceKind::kArgmax || s.reduce == ReduceKind::kArgmin) {
          const Acc& a = accs_[s.acc_id];
          b_.CreateStore(b_.getInt64(0), a.slot);
          b_.CreateStore(Identity(s.reduce, arg_types_[s.acc_id]), a.value);
        } else {
          const Acc& a = accs_[s.acc_id];
          b_.CreateStore(Identity(s.reduce, a.t), a.slot);
        }
      }
  }

  // Reassociation lets the loop vectorizer split a float reduction into lanes. No-signed-zeros is
  // left off: with both, InstCombine factors a fully unrolled sum of quotients, sum(x_i / c), into
  // sum(x_i) / c, and [0, 1] / 0 summed to inf instead of nan (fuzz seed 71, program 3458).
  llvm::Value* Reassoc(llvm::Value* v) {
    if (auto* inst = llvm::dyn_cast<llvm::Instruction>(v)) inst->setHasAllowReassoc(true);
    return v;
  }

  // A sum of products (sum(x * x) in RMSNorm, a dot product) accumulates with fused
  // multiply-adds: one rounding per term instead of two, and one instruction (the sum of
  // squares is a tenth of an RMSNorm kernel's work). Only a product the sum alone uses is
  // contracted; other multiplies round as eager's do. Nor a product by a constant: the fused
  // multiply-add inherits the sum's reassociation flag, and LLVM 14's DAGCombiner then folds
  // fma(x, 0, acc) to acc, so sum(0 * x) was 0 where x holds NaN or inf (fuzz seed 221, program
  // 7082: the zero gradient of trunc times pow's NaN log term).
  llvm::Value* ContractProduct(llvm::Value* term, llvm::Value* sum) {
    auto* mul = llvm::dyn_cast<llvm::Instruction>(term);
    if (!mul || mul->getOpcode() != llvm::Instruction::FMul || !mul->hasOneUse()) return sum;
    if (llvm::isa<llvm::Constant>(mul->getOperand(0)) || llvm::isa<llvm::Constant>(mul->getOperand(1))) return sum;
    mul->setHasAllowContract(true);
    llvm::cast<llvm::Instruction>(sum)->setHasAllowContract(true);
    return sum;
  }

  void EmitStmt(const Stmt& s) {
    if (s.kind == Stmt::Kind::kStore) {
      DType bt = k_.buffers[s.buffer].dtype;
      V v = Convert(EmitExpr(*s.expr), ComputeDType(bt));
      llvm::Value* addr = b_.CreateInBoundsGEP(MemType(bt), bufs_[s.buffer], Offset(s.index));
      b_.CreateAlignedStore(ToMemory(v.v, bt), addr, llvm::Align(DTypeSize(bt)));
      return;
    }
    if (s.kind == Stmt::Kind::kWelford) {
      const Acc& mean = accs_[s.acc_id];
      const Acc& m2 = accs_[s.acc_id + 1];
      const Acc& count = accs_[s.acc_id + 2];
      llvm::Type* ty = CType(mean.t);
      llvm::Value* x = Convert(EmitExpr(*s.expr), mean.t).v;
      llvm::Value* n = b_.CreateFAdd(b_.CreateLoad(ty, count.slot), llvm::ConstantFP::get(ty, 1.0));
      llvm::Value* mu = b_.CreateLoad(ty, mean.slot);
      llvm::Value* delta = b_.CreateFSub(x, mu);
      llvm::Value* mu2 = b_.CreateFAdd(mu, b_.CreateFDiv(delta, n));
      llvm::Value* m = b_.CreateFAdd(b_.CreateLoad(ty, m2.slot), b_.CreateFMul(delta, b_.CreateFSub(x, mu2)));
      b_.CreateStore(n, count.slot);
      b_.CreateStore(mu2, mean.slot);
      b_.CreateStore(m, m2.slot);
      return;
    }
    const Acc& a = accs_[s.acc_id];
    if (s.reduce == ReduceKind::kArgmax || s.reduce == ReduceKind::kArgmin) {
      DType t = arg_types_[s.acc_id];
      llvm::Value* x = Convert(EmitExpr(*s.expr), t).v;
      llvm::Value* best = b_.CreateLoad(CType(t), a.value);
      bool mx = s.reduce == ReduceKind::kArgmax;
      llvm::Value* take;
      if (t == DType::I64) {
        take = mx ? b_.CreateICmpSGT(x, best) : b_.CreateICmpSLT(x, best);
      } else {  // strictly better, or the first NaN (never replaced once best is NaN)
        take = b_.CreateAnd(mx ? b_.CreateFCmpUGT(x, best) : b_.CreateFCmpULT(x, best), b_.CreateFCmpORD(best, best));
      }
      b_.CreateStore(b_.CreateSelect(take, x, best), a.value);
      b_.CreateStore(b_.CreateSelect(take, r_, b_.CreateLoad(b_.getInt64Ty(), a.slot)), a.slot);
      return;
    }
    llvm::Type* ty = CType(a.t);
    llvm::Value* x = Convert(EmitExpr(*s.expr), a.t).v;
    llvm::Value* acc = b_.CreateLoad(ty, a.slot);
    bool is_float = a.t != DType::I64;
    llvm::Value* out = nullptr;
    switch (s.reduce) {
      case ReduceKind::kSum: out = is_float ? ContractProduct(x, Reassoc(b_.CreateFAdd(acc, x))) : b_.CreateAdd(acc, x); break;
      case ReduceKind::kProd: out = is_float ? Reassoc(b_.CreateFMul(acc, x)) : b_.CreateMul(acc, x); break;
      case ReduceKind::kMax: case ReduceKind::kMin: case ReduceKind::kMaxLast: case ReduceKind::kMinLast: {
        // a NaN accumulator stays; a tie keeps the earlier value, or for the *Last kinds takes x
        // (PyTorch's max_impl(acc, x): (isnan(acc) || acc > x) ? acc : x)
        const bool mx = s.reduce == ReduceKind::kMax || s.reduce == ReduceKind::kMaxLast;
        const bool last = s.reduce == ReduceKind::kMaxLast || s.reduce == ReduceKind::kMinLast;
        using P = llvm::CmpInst::Predicate;
        llvm::Value* take;
        if (!is_float) {
          take = b_.CreateICmp(mx ? (last ? P::ICMP_SGE : P::ICMP_SGT) : (last ? P::ICMP_SLE : P::ICMP_SLT), x, acc);
        } else {
          take = b_.CreateFCmp(mx ? (last ? P::FCMP_UGE : P::FCMP_UGT) : (last ? P::FCMP_ULE : P::FCMP_ULT), x, acc);
          take = b_.CreateAnd(take, b_.CreateFCmpORD(acc, acc));
        }
        out = b_.CreateSelect(take, x, acc);
        break;
      }
      default: KILN_INTERNAL_ASSERT(false, "unhandled reduction");
    }
    b_.CreateStore(out, a.slot);
  }

  // --- expressions ---

  llvm::Value* Offset(const Index& ix) {
    llvm::Value* off = b_.getInt64(ix.offset);
    auto add = [&](int64_t stride, llvm::Value* var) {
      if (stride == 0) return;
      llvm::Value* t = stride == 1 ? var : b_.CreateMul(var, b_.getInt64(stride), "", false, true);
      off = b_.CreateAdd(off, t, "", false, true);
    };
    for (size_t d = 0; d < ix.outer_strides.size(); ++d) add(ix.outer_strides[d], outer_vars_[d]);
    add(ix.inner_stride, r_);
    return off;
  }

  llvm::Value* BF16ToF32(llvm::Value* raw) {
    llvm::Value* w = b_.CreateShl(b_.CreateZExt(raw, b_.getInt32Ty()), 16);
    return b_.CreateBitCast(w, b_.getFloatTy());
  }
  // Round to nearest even; NaN stays a (quiet) NaN.
  llvm::Value* F32ToBF16(llvm::Value* f) {
    llvm::Value* u = b_.CreateBitCast(f, b_.getInt32Ty());
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(u, 16), 1);
    llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(u, b_.CreateAdd(lsb, b_.getInt32(0x7fff))), 16);
    llvm::Value* isnan = b_.CreateFCmpUNO(f, f);
    llvm::Value* r = b_.CreateSelect(isnan, b_.getInt32(0x7fc0), rounded);
    return b_.CreateTrunc(r, b_.getInt16Ty());
  }

  V FromMemory(llvm::Value* raw, DType t) {
    switch (t) {
      case DType::F32: case DType::F64: case DType::I64: return {raw, t};
      case DType::I32: return {b_.CreateSExt(raw, b_.getInt64Ty()), DType::I64};
      case DType::Bool: return {b_.CreateICmpNE(raw, b_.getInt8(0)), DType::Bool};
      case DType::BF16: return {BF16ToF32(raw), DType::F32};
    }
    return {raw, t};
  }
  llvm::Value* ToMemory(llvm::Value* v, DType t) {  // v is in ComputeDType(t)
    switch (t) {
      case DType::I32: return b_.CreateTrunc(v, b_.getInt32Ty());
      case DType::Bool: return b_.CreateZExt(v, b_.getInt8Ty());
      case DType::BF16: return F32ToBF16(v);
      default: return v;
    }
  }

  // Between compute dtypes (F32, F64, I64, Bool), C++ semantics (float -> bool is x != 0).
  V Convert(V x, DType to) {
    if (x.t == to) return x;
    llvm::Type* ty = CType(to);
    bool from_f = x.t == DType::F32 || x.t == DType::F64;
    bool to_f = to == DType::F32 || to == DType::F64;
    if (to == DType::Bool)
      return {from_f ? b_.CreateFCmpUNE(x.v, llvm::ConstantFP::get(x.v->getType(), 0.0))
                     : b_.CreateICmpNE(x.v, llvm::ConstantInt::get(x.v->getType(), 0)),
              to};
    if (x.t == DType::Bool) return {to_f ? b_.CreateUIToFP(x.v, ty) : b_.CreateZExt(x.v, ty), to};
    if (from_f && to_f) return {to == DType::F64 ? b_.CreateFPExt(x.v, ty) : b_.CreateFPTrunc(x.v, ty), to};
    if (from_f) return {FloatToInt(x.v, ty), to};
    return {b_.CreateSIToFP(x.v, ty), to};
  }

  // float -> signed integer as x86's cvtt instructions do it, and so eager kiln's C++ casts (and
  // PyTorch's) on x86: NaN and values out of range give the type's minimum. LLVM's fptosi leaves
  // them poison, and compiled `nan_tensor.int()` gave 0 where eager gives -2147483648.
  llvm::Value* FloatToInt(llvm::Value* x, llvm::Type* ty) {
    unsigned bits = ty->getScalarSizeInBits();
    llvm::Type* fty = x->getType();
    double limit = std::ldexp(1.0, static_cast<int>(bits) - 1);
    llvm::Value* in_range = b_.CreateAnd(b_.CreateFCmpOGE(x, llvm::ConstantFP::get(fty, -limit)),
                                         b_.CreateFCmpOLT(x, llvm::ConstantFP::get(fty, limit)));
    llvm::Value* safe = b_.CreateSelect(in_range, x, llvm::ConstantFP::get(fty, 0.0));
    return b_.CreateSelect(in_range, b_.CreateFPToSI(safe, ty),
                           llvm::ConstantInt::get(ty, llvm::APInt::getSignedMinValue(bits)));
  }

  V Cast(V x, DType d) {
    if (d == DType::I32 && (x.t == DType::F32 || x.t == DType::F64))  // int32's range, not int64's
      return {b_.CreateSExt(FloatToInt(x.v, b_.getInt32Ty()), b_.getInt64Ty()), DType::I64};
    V v = Convert(x, ComputeDType(d));
    if (d == DType::BF16) v.v = BF16ToF32(F32ToBF16(v.v));
    if (d == DType::I32) v.v = b_.CreateSExt(b_.CreateTrunc(v.v, b_.getInt32Ty()), b_.getInt64Ty());
    return v;
  }

  llvm::Value* FConst(DType t, double v) { return llvm::ConstantFP::get(CType(t), v); }
  VectorMath Math() { return VectorMath(b_, inline_exp_); }

  llvm::Value* Intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
  }
  // Note [sqrt of -0]: sqrt(-0.0) is -0.0, so 1 / sqrt(-0.0) is -inf, as eager's rsqrt gives. LLVM
  // 14's value tracking reads sqrt's result as never below zero and a quotient of two such as
  // never below zero either, forgetting the -0.0 divisor: it folded `rsqrt(x) < -3` to false and
  // the clamps inside tanh and exp away, so `rsqrt(x).tanh()` of -0.0 gave NaN for eager's -1 (fuzz
  // seed 341, program 8800). copysign(sqrt(x), x) is the same value for every x (a NaN keeps its
  // sign), and its sign comes from x, which value tracking cannot bound.
  llvm::Value* SignedSqrt(llvm::Value* v) {
    return Intrinsic(llvm::Intrinsic::copysign, {Intrinsic(llvm::Intrinsic::sqrt, {v}), v});
  }
  llvm::Value* LibmCall(const char* f32_name, const char* f64_name, V x, llvm::Value* y = nullptr) {
    const char* name = x.t == DType::F32 ? f32_name : f64_name;
    llvm::Type* ty = CType(x.t);
    std::vector<llvm::Type*> params(y ? 2 : 1, ty);
    auto callee = m_.getOrInsertFunction(name, llvm::FunctionType::get(ty, params, false));
    llvm::CallInst* call = y ? b_.CreateCall(callee, {x.v, y}) : b_.CreateCall(callee, {x.v});
    call->setDoesNotThrow();
    call->setOnlyReadsMemory();  // -fno-math-errno semantics: no errno writes we care about
    return call;
  }

  V EmitUnary(OpCode op, V x) {
    DType out = TypeOf_Unary(op, x.t);
    if (op == OpCode::kLogicalNot) return {b_.CreateNot(Convert(x, DType::Bool).v), DType::Bool};
    x = Convert(x, out);
    llvm::Value* v = x.v;
    bool f = out == DType::F32 || out == DType::F64;
    auto I = [&](llvm::Intrinsic::ID id) { return V{Intrinsic(id, {v}), out}; };
    switch (op) {
      case OpCode::kNeg: return {f ? b_.CreateFNeg(v) : b_.CreateNeg(v), out};
      case OpCode::kAbs:
        if (f) return I(llvm::Intrinsic::fabs);
        return {b_.CreateSelect(b_.CreateICmpSLT(v, b_.getInt64(0)), b_.CreateNeg(v), v), out};
      case OpCode::kExp: return {Math().Exp(v), out};
      case OpCode::kLog: return I(llvm::Intrinsic::log);
      case OpCode::kSqrt: return {SignedSqrt(v), out};
      case OpCode::kSin: return I(llvm::Intrinsic::sin);
      case OpCode::kCos: return I(llvm::Intrinsic::cos);
      case OpCode::kFloor: return f ? I(llvm::Intrinsic::floor) : x;
      case OpCode::kCeil: return f ? I(llvm::Intrinsic::ceil) : x;
      case OpCode::kRound: return f ? I(llvm::Intrinsic::roundeven) : x;  // half to even, as PyTorch
      case OpCode::kTrunc: return f ? I(llvm::Intrinsic::trunc) : x;
      case OpCode::kRsqrt: return {b_.CreateFDiv(FConst(out, 1.0), SignedSqrt(v)), out};
      case OpCode::kReciprocal: return {b_.CreateFDiv(FConst(out, 1.0), v), out};
      case OpCode::kSigmoid: return {Math().Sigmoid(v), out};
      case OpCode::kTanh:
        if (out == DType::F32) return {Math().TanhF32(v), out};
        return {LibmCall("tanhf", "tanh", x), out};
      case OpCode::kErf:
        if (out == DType::F32) return {Math().ErfF32(v), out};
        return {LibmCall("erff", "erf", x), out};
      // As eager's kernels (tensor/ops/activation.cc): f32 through Abramowitz and Stegun's erf
      // (Note [Gelu's erf]), f64 x * 0.5 * (1 + erf(x / sqrt 2)) with libm's erf.
      case OpCode::kGelu:
        if (out == DType::F32) return {Math().GeluF32(v), out};
        return {b_.CreateFMul(v, NormalCdfF64(v)), out};
      case OpCode::kNormalCdf:
        if (out == DType::F32) return {Math().NormalCdfF32(v), out};
        return {NormalCdfF64(v), out};
      case OpCode::kLog1p: {  // Kahan: u = 1 + x; u == 1 ? x : log(u) * x / (u - 1)
        llvm::Value* one = FConst(out, 1.0);
        llvm::Value* u = b_.CreateFAdd(one, v);
        llvm::Value* r = b_.CreateFDiv(b_.CreateFMul(Intrinsic(llvm::Intrinsic::log, {u}), v), b_.CreateFSub(u, one));
        r = b_.CreateSelect(b_.CreateFCmpOEQ(u, llvm::ConstantFP::getInfinity(CType(out))), u, r);
        return {b_.CreateSelect(b_.CreateFCmpOEQ(u, one), v, r), out};
      }
      case OpCode::kExpm1: {  // Kahan: u = exp(x); u == 1 ? x : u - 1 == -1 ? -1 : (u - 1) * x / log(u)
        llvm::Value* one = FConst(out, 1.0);
        llvm::Value* u = Math().Exp(v);
        llvm::Value* um1 = b_.CreateFSub(u, one);
        llvm::Value* r = b_.CreateFDiv(b_.CreateFMul(um1, v), Intrinsic(llvm::Intrinsic::log, {u}));
        r = b_.CreateSelect(b_.CreateFCmpOEQ(u, llvm::ConstantFP::getInfinity(CType(out))), u, r);
        r = b_.CreateSelect(b_.CreateFCmpOEQ(um1, FConst(out, -1.0)), FConst(out, -1.0), r);
        return {b_.CreateSelect(b_.CreateFCmpOEQ(u, one), v, r), out};
      }
      case OpCode::kRelu:
        if (f) return {b_.CreateSelect(b_.CreateFCmpOLT(v, FConst(out, 0.0)), FConst(out, 0.0), v), out};
        if (out == DType::Bool) return x;
        return {b_.CreateSelect(b_.CreateICmpSLT(v, b_.getInt64(0)), b_.getInt64(0), v), out};
      case OpCode::kSign:
        if (f) {
          llvm::Value* pos = b_.CreateUIToFP(b_.CreateFCmpOGT(v, FConst(out, 0.0)), CType(out));
          llvm::Value* neg = b_.CreateUIToFP(b_.CreateFCmpOLT(v, FConst(out, 0.0)), CType(out));
          return {b_.CreateFSub(pos, neg), out};
        } else {
          llvm::Value* pos = b_.CreateZExt(b_.CreateICmpSGT(v, b_.getInt64(0)), b_.getInt64Ty());
          llvm::Value* neg = b_.CreateZExt(b_.CreateICmpSLT(v, b_.getInt64(0)), b_.getInt64Ty());
          return {b_.CreateSub(pos, neg), out};
        }
      default: break;
    }
    KILN_INTERNAL_ASSERT(false, "unhandled unary op ", OpName(op));
    return x;
  }

  // 0.5 * (1 + erf(x / sqrt 2)) in f64, the order eager's NormalCdf rounds in.
  llvm::Value* NormalCdfF64(llvm::Value* x) {
    V scaled{b_.CreateFMul(x, FConst(DType::F64, M_SQRT1_2)), DType::F64};
    llvm::Value* erf = LibmCall("erff", "erf", scaled);
    return b_.CreateFMul(FConst(DType::F64, 0.5), b_.CreateFAdd(FConst(DType::F64, 1.0), erf));
  }

  DType TypeOf_Unary(OpCode op, DType t) {
    Expr e;
    e.kind = Expr::Kind::kOp;
    e.op = op;
    auto c = std::make_shared<Expr>();
    c->kind = Expr::Kind::kConst;
    c->dtype = t;
    e.args = {c};
    return TypeOf(e);
  }

  // Integer division and remainder never trap: x/0 gives 0 (PyTorch raises; a kernel cannot),
  // INT64_MIN / -1 wraps.
  llvm::Value* SafeIntDiv(llvm::Value* a, llvm::Value* d, bool rem) {
    llvm::Value* zero = b_.CreateICmpEQ(d, b_.getInt64(0));
    llvm::Value* m1 = b_.CreateICmpEQ(d, b_.getInt64(-1));
    llvm::Value* dd = b_.CreateSelect(b_.CreateOr(zero, m1), b_.getInt64(1), d);
    llvm::Value* q = rem ? b_.CreateSRem(a, dd) : b_.CreateSDiv(a, dd);
    q = b_.CreateSelect(m1, rem ? b_.getInt64(0) : b_.CreateNeg(a), q);
    return b_.CreateSelect(zero, b_.getInt64(0), q);
  }

  V EmitBinary(OpCode op, V a, V c) {
    DType t = Rank(a.t) >= Rank(c.t) ? a.t : c.t;
    if (op == OpCode::kLogicalAnd || op == OpCode::kLogicalOr) {
      llvm::Value* x = Convert(a, DType::Bool).v;
      llvm::Value* y = Convert(c, DType::Bool).v;
      return {op == OpCode::kLogicalAnd ? b_.CreateAnd(x, y) : b_.CreateOr(x, y), DType::Bool};
    }
    bool cmp = op == OpCode::kEq || op == OpCode::kNe || op == OpCode::kLt || op == OpCode::kLe || op == OpCode::kGt ||
               op == OpCode::kGe;
    if (t == DType::Bool && !(cmp && (op == OpCode::kEq || op == OpCode::kNe)) && op != OpCode::kMax &&
        op != OpCode::kMin)
      t = DType::I64;
    if (op == OpCode::kAtan2 && !IsFloatDType(t)) t = DType::F32;
    llvm::Value* x = Convert(a, t).v;
    llvm::Value* y = Convert(c, t).v;
    bool f = t == DType::F32 || t == DType::F64;
    if (cmp) {
      using P = llvm::CmpInst::Predicate;
      P p;
      switch (op) {
        case OpCode::kEq: p = f ? P::FCMP_OEQ : P::ICMP_EQ; break;
        case OpCode::kNe: p = f ? P::FCMP_UNE : P::ICMP_NE; break;
        case OpCode::kLt: p = f ? P::FCMP_OLT : P::ICMP_SLT; break;
        case OpCode::kLe: p = f ? P::FCMP_OLE : P::ICMP_SLE; break;
        case OpCode::kGt: p = f ? P::FCMP_OGT : P::ICMP_SGT; break;
        default: p = f ? P::FCMP_OGE : P::ICMP_SGE; break;
      }
      return {f ? b_.CreateFCmp(p, x, y) : b_.CreateICmp(p, x, y), DType::Bool};
    }
    switch (op) {
      case OpCode::kAdd: return {f ? b_.CreateFAdd(x, y) : b_.CreateAdd(x, y), t};
      case OpCode::kSub: return {f ? b_.CreateFSub(x, y) : b_.CreateSub(x, y), t};
      case OpCode::kMul: return {f ? b_.CreateFMul(x, y) : b_.CreateMul(x, y), t};
      case OpCode::kDiv: return {f ? b_.CreateFDiv(x, y) : SafeIntDiv(x, y, false), t};
      case OpCode::kFloorDiv:
        if (f) return {Intrinsic(llvm::Intrinsic::floor, {b_.CreateFDiv(x, y)}), t};
        else {
          llvm::Value* q = SafeIntDiv(x, y, false);
          llvm::Value* r = SafeIntDiv(x, y, true);
          llvm::Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, b_.getInt64(0)),
                                             b_.CreateICmpNE(b_.CreateICmpSLT(r, b_.getInt64(0)),
                                                             b_.CreateICmpSLT(y, b_.getInt64(0))));
          return {b_.CreateSub(q, b_.CreateZExt(adjust, b_.getInt64Ty())), t};
        }
      case OpCode::kMod: {  // Python's remainder: the sign of the divisor
        llvm::Value* r = f ? b_.CreateFRem(x, y) : SafeIntDiv(x, y, true);
        llvm::Value* zero = f ? FConst(t, 0.0) : b_.getInt64(0);
        llvm::Value* rneg = f ? b_.CreateFCmpOLT(r, zero) : b_.CreateICmpSLT(r, zero);
        llvm::Value* yneg = f ? b_.CreateFCmpOLT(y, zero) : b_.CreateICmpSLT(y, zero);
        llvm::Value* nz = f ? b_.CreateFCmpONE(r, zero) : b_.CreateICmpNE(r, zero);
        llvm::Value* adjust = b_.CreateAnd(nz, b_.CreateICmpNE(rneg, yneg));
        return {b_.CreateSelect(adjust, f ? b_.CreateFAdd(r, y) : b_.CreateAdd(r, y), r), t};
      }
      case OpCode::kPow:
        if (f) {  // x^2 is x * x, exactly (and then a multiply that a sum can contract)
          auto* c = llvm::dyn_cast<llvm::ConstantFP>(y);
          if (c && c->isExactlyValue(2.0)) return {b_.CreateFMul(x, x), t};
          // eager's pow by 0.5 / -0.5 / 3 / -1 / -2 is sqrt, 1 / sqrt, x * x * x, 1 / x, 1 / (x * x):
          // libm's pow(-inf, 0.5) is +inf where sqrt gives eager's nan (fuzz seed 91, 1048)
          llvm::Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
          if (c && c->isExactlyValue(0.5)) return {Intrinsic(llvm::Intrinsic::sqrt, {x}), t};
          if (c && c->isExactlyValue(-0.5)) return {b_.CreateFDiv(one, Intrinsic(llvm::Intrinsic::sqrt, {x})), t};
          if (c && c->isExactlyValue(3.0)) return {b_.CreateFMul(b_.CreateFMul(x, x), x), t};
          if (c && c->isExactlyValue(-1.0)) return {b_.CreateFDiv(one, x), t};
          if (c && c->isExactlyValue(-2.0)) return {b_.CreateFDiv(one, b_.CreateFMul(x, x)), t};
          return {Intrinsic(llvm::Intrinsic::pow, {x, y}), t};
        }
        else {  // integers through double (exact below 2^53)
          llvm::Value* d = Intrinsic(llvm::Intrinsic::pow, {b_.CreateSIToFP(x, b_.getDoubleTy()),
                                                            b_.CreateSIToFP(y, b_.getDoubleTy())});
          llvm::Value* p = b_.CreateFPToSI(Intrinsic(llvm::Intrinsic::roundeven, {d}), b_.getInt64Ty());
          // A negative exponent, as eager's integer pow: 1 for a base of 1, +-1 for -1 (by the
          // exponent's parity), else 0; through double, 0 ** -1 was inf, cast to INT64_MIN
          llvm::Value* one = b_.getInt64(1);
          llvm::Value* odd = b_.CreateICmpNE(b_.CreateAnd(y, one), b_.getInt64(0));
          llvm::Value* of_minus_one = b_.CreateSelect(odd, b_.getInt64(-1), one);
          llvm::Value* tiny = b_.CreateSelect(b_.CreateICmpEQ(x, one), one,
                                              b_.CreateSelect(b_.CreateICmpEQ(x, b_.getInt64(-1)), of_minus_one,
                                                              b_.getInt64(0)));
          return {b_.CreateSelect(b_.CreateICmpSLT(y, b_.getInt64(0)), tiny, p), t};
        }
      case OpCode::kMax: case OpCode::kMin: {
        bool mx = op == OpCode::kMax;
        if (f) {
          // eager's `x < y ? y : x` (max) and `x > y ? y : x` (min): x on ties, so max(-0., 0.) is
          // -0. as eager's clamp_min and maximum give it (maxnum may return either zero, and
          // 1 // clamp_min(-0., 0) came out inf, eager -inf: fuzz seed 321, program 15804). NaN
          // propagates (x + y is NaN when either is).
          llvm::Value* m = b_.CreateSelect(mx ? b_.CreateFCmpOLT(x, y) : b_.CreateFCmpOGT(x, y), y, x);
          return {b_.CreateSelect(b_.CreateFCmpUNO(x, y), b_.CreateFAdd(x, y), m), t};
        }
        if (t == DType::Bool) return {mx ? b_.CreateOr(x, y) : b_.CreateAnd(x, y), t};
        llvm::Value* take = mx ? b_.CreateICmpSGT(x, y) : b_.CreateICmpSLT(x, y);
        return {b_.CreateSelect(take, x, y), t};
      }
      case OpCode::kAtan2: return {LibmCall("atan2f", "atan2", {x, t}, y), t};
      default: break;
    }
    KILN_INTERNAL_ASSERT(false, "unhandled binary op ", OpName(op));
    return a;
  }

  V EmitExpr(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLoad: {
        DType bt = k_.buffers[e.buffer].dtype;
        llvm::Value* addr = b_.CreateInBoundsGEP(MemType(bt), bufs_[e.buffer], Offset(e.index));
        return FromMemory(b_.CreateAlignedLoad(MemType(bt), addr, llvm::Align(DTypeSize(bt))), bt);
      }
      case Expr::Kind::kConst: {
        DType ct = ComputeDType(e.dtype);
        if (ct == DType::Bool) return {b_.getInt1(e.int_value != 0 || e.value != 0), ct};
        if (ct == DType::I64) {
          int64_t v = e.dtype == DType::I32 ? static_cast<int64_t>(static_cast<int32_t>(e.int_value)) : e.int_value;
          return {b_.getInt64(v), ct};
        }
        V c{FConst(ct, e.value), ct};
        if (e.dtype == DType::BF16) c.v = BF16ToF32(F32ToBF16(c.v));
        return c;
      }
      case Expr::Kind::kAcc: {
        const Acc& a = accs_.at(e.acc_id);
        return {b_.CreateLoad(CType(a.t), a.slot), a.t};
      }
      case Expr::Kind::kIndex: return {e.dim < 0 ? r_ : outer_vars_[e.dim], DType::I64};
      case Expr::Kind::kCast: return Cast(EmitExpr(*e.args[0]), e.dtype);
      case Expr::Kind::kOp: break;
    }
    int n = OpArity(e.op);
    if (n == 1) return EmitUnary(e.op, EmitExpr(*e.args[0]));
    if (n == 2) return EmitBinary(e.op, EmitExpr(*e.args[0]), EmitExpr(*e.args[1]));
    V cond = Convert(EmitExpr(*e.args[0]), DType::Bool);
    V x = EmitExpr(*e.args[1]);
    V y = EmitExpr(*e.args[2]);
    DType t = Rank(x.t) >= Rank(y.t) ? x.t : y.t;
    return {b_.CreateSelect(cond.v, Convert(x, t).v, Convert(y, t).v), t};
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  const Kernel& k_;
  std::string symbol_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::vector<llvm::Value*> bufs_;
  std::vector<llvm::Value*> outer_vars_;
  llvm::Value* r_ = nullptr;
  bool inline_exp_ = true;
  std::unordered_map<int, Acc> accs_;
  std::unordered_map<int, DType> arg_types_;
};

}  // namespace

std::unique_ptr<llvm::Module> BuildModule(llvm::LLVMContext& ctx, const Kernel& kernel, const std::string& symbol,
                                          llvm::TargetMachine& tm, const CodegenOptions& options,
                                          const HostTarget& s) {
  auto m = std::make_unique<llvm::Module>(kernel.name, ctx);
  m->setDataLayout(tm.createDataLayout());
  m->setTargetTriple(tm.getTargetTriple().str());
  std::string features;
  for (const auto& f : s.features) features += (features.empty() ? "" : ",") + f;
  const bool avx512 = std::find(s.features.begin(), s.features.end(), "+avx512f") != s.features.end();
  const int width = options.prefer_vector_width ? options.prefer_vector_width : (avx512 ? 512 : 0);
  Emitter(ctx, *m, kernel, symbol).Emit(s.cpu, features, width, options.inline_exp);
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(*m, &es))
    throw Error("[inductor] generated invalid LLVM IR for '" + kernel.name + "' (a bug in kiln): " + es.str());

  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopInterleaving = true;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(&tm, pto);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::TargetLibraryInfoImpl tlii(tm.getTargetTriple());
  if (options.vector_library && s.have_libmvec) tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86);
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(*m, mam);
  return m;
}

}  // namespace kiln::inductor
