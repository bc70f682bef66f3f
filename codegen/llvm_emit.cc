// codegen/llvm_emit.cc: kernel IR -> one LLVM function, optimised at O3 for the host.
//
// Note [Reductions and NaN]: sums are emitted with reassoc so the loop vectoriser can split them
// into vector partial sums (products are not: Note [Lanes for max and min]). max/min/argmax/argmin follow PyTorch: NaN propagates
// (the first NaN wins for arg*), ties keep the first index; their select chains stay scalar in
// LLVM 14: its vectoriser has no NaN-propagating FP min/max recurrence, and its FMax/FMin
// recurrence (tried: an `nnan` maxnum over NaN-free inputs plus a NaN flag) is only accepted
// under the function-wide "no-nans-fp-math" attribute, which would let the backend fold away
// the NaN checks this code relies on.
//
// Note [Lanes for max and min]: so a loop of floating-point max/min reductions is written in
// lanes by hand: kLanes accumulators per reduction, each taking every kLanes-th element with the
// same NaN-propagating step, then combined in lane order, then the tail. So is a loop of float
// products (with max/min or alone): a product is never reassociable, since InstCombine sinks a
// division out of a reassociable multiply, acc * (x / y) -> (acc * x) / y, and prod(x / x) came
// out 0.99999988 instead of 1 (fuzz seed 1701, program 3186); its lanes multiply as written. The lanes are
// independent chains (the scalar loop waited on each compare-and-select) and isomorphic, so the
// SLP vectoriser turns them into vector compares and blends. The value is the scalar loop's: a
// max is the same whichever order finds it, and NaN still wins; only which of +0 and -0 a row
// holding both returns may differ (as between PyTorch's vectorised and scalar kernels). A layer
// norm over 1024x256 (whose max and min then detected constant rows; Note [Shifted means] since) took 1095 us
// compiled against eager's 86 us, two thirds of it in these two loops.
//
// Note [Alias scopes]: every load and store of buffer i carries alias scope i and `noalias` for
// every other buffer's scope (LLVM's scoped-noalias metadata), which the kernel IR promises (Note
// [Buffers do not alias] in kernel_ir.h). Without it the loop vectoriser guarded each inner loop
// with a run-time overlap test of every input against every output, redone for each row: the
// digits CNN's batch-norm + SiLU kernel (rows of 64, five inputs) spent a fifth of its time there
// (152 -> 139 us; SiLU alone over the same loop nest 132 -> 110 us).
#include <cmath>

#include "codegen/llvm_emit.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/llvm_expr.h"
#include "codegen/llvm_optimize.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/error.h"

namespace kiln::codegen {
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
constexpr int64_t kLanes = 16;  // Note [Lanes for max and min]
constexpr int64_t kInterleaveMinExtent = 1024;
constexpr int64_t kVectorizedMinExtent = 16;  // Note [Which loops unroll] in llvm_optimize.cc

enum class Unroll { kAllowed, kNever, kLate };  // Note [Which loops unroll] in llvm_optimize.cc

class Emitter : public ExprEmitter {
 public:
  Emitter(llvm::LLVMContext& ctx, llvm::Module& m, const Kernel& k, const std::string& symbol, bool inline_exp)
      : ExprEmitter(ctx, m, k, inline_exp), symbol_(symbol) {}

  llvm::Function* Emit(const std::string& cpu, const std::string& features, int prefer_vector_width) {
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
    DeclareAliasScopes();
    DeclareAccumulators();

    std::vector<int64_t> outer = k_.outer;
    if (outer.empty()) outer.push_back(1);
    outer_vars_.assign(outer.size(), nullptr);
    EmitOuter(0, outer, begin, end);
    b_.CreateRetVoid();
    return fn_;
  }

 private:

  // Loops: rotated, guarded, with the induction variable a phi (what the vectoriser wants).
  // `interleave` > 1 asks for that many vector iterations at once; `unroll` says when LLVM may
  // unroll it (Note [Which loops unroll]).
  template <typename Body>
  void EmitLoop(llvm::Value* lo, llvm::Value* hi, const char* name, Body body, int interleave = 1,
                Unroll unroll = Unroll::kAllowed) {
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
    std::vector<llvm::Metadata*> hints;
    if (interleave > 1) {  // Note [Vector width and interleaving]
      hints.push_back(Hint("llvm.loop.interleave.count", interleave));
    }
    if (unroll == Unroll::kNever) hints.push_back(Hint("llvm.loop.unroll.disable"));
    if (unroll == Unroll::kLate) hints.push_back(Hint(kUnrollLateHint));
    if (!hints.empty()) {
      llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, llvm::None);
      hints.insert(hints.begin(), self.get());
      llvm::MDNode* loop_id = llvm::MDNode::getDistinct(ctx_, hints);
      loop_id->replaceOperandWith(0, loop_id);
      latch->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
    }
    b_.SetInsertPoint(exit);
  }

  llvm::MDNode* Hint(const char* name) { return llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name)}); }
  llvm::MDNode* Hint(const char* name, int value) {
    llvm::Metadata* ops[] = {llvm::MDString::get(ctx_, name), llvm::ConstantAsMetadata::get(b_.getInt32(value))};
    return llvm::MDNode::get(ctx_, ops);
  }

  // An inner loop long enough to vectorise unrolls only once vectorised.
  static Unroll InnerUnroll(int64_t extent) { return extent >= kVectorizedMinExtent ? Unroll::kLate : Unroll::kAllowed; }

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
      EmitLoop(lo, b_.CreateAdd(lo, b_.getInt64(kPrefetchChunk), "", true, true), "r", body, interleave,
               InnerUnroll(kPrefetchChunk));
    });
    EmitLoop(b_.getInt64(chunks * kPrefetchChunk), b_.getInt64(extent), "r", body, interleave,
             InnerUnroll(extent - chunks * kPrefetchChunk));
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
        if (SplitsIntoLanes(loop)) {
          EmitLanedLoop(loop);
          continue;
        }
        int interleave = loop.extent >= kInterleaveMinExtent ? kInterleave : 1;
        std::vector<const Expr*> ahead = NextRowReads(l);
        if (ahead.empty()) {
          EmitLoop(b_.getInt64(0), b_.getInt64(loop.extent), "r", body, interleave, InnerUnroll(loop.extent));
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
    }, 1, d == 0 ? Unroll::kAllowed : Unroll::kNever);  // the first runs over [begin, end): never unrolled
  }

  // --- max and min in lanes (Note [Lanes for max and min]) ---

  static bool IsMaxMin(ReduceKind r) {
    return r == ReduceKind::kMax || r == ReduceKind::kMin || r == ReduceKind::kMaxLast || r == ReduceKind::kMinLast;
  }

  // A loop of floating-point max/min and product reductions only, long enough for two rounds of
  // lanes.
  bool SplitsIntoLanes(const Loop& loop) {
    if (loop.extent < 2 * kLanes || loop.stmts.empty()) return false;
    for (const Stmt& s : loop.stmts)
      if (s.kind != Stmt::Kind::kReduce || !(IsMaxMin(s.reduce) || s.reduce == ReduceKind::kProd) ||
          (accs_[s.acc_id].t != DType::F32 && accs_[s.acc_id].t != DType::F64))
        return false;
    return true;
  }

  void EmitLanedLoop(const Loop& loop) {
    llvm::IRBuilder<> at_entry(entry_, entry_->begin());
    std::vector<std::vector<llvm::Value*>> lanes(loop.stmts.size());
    for (size_t i = 0; i < loop.stmts.size(); ++i) {
      const Stmt& s = loop.stmts[i];
      const Acc& a = accs_[s.acc_id];
      for (int64_t u = 0; u < kLanes; ++u) {
        lanes[i].push_back(at_entry.CreateAlloca(CType(a.t)));
        b_.CreateStore(Identity(s.reduce, a.t), lanes[i].back());
      }
    }
    const int64_t rounds = loop.extent / kLanes;
    EmitLoop(b_.getInt64(0), b_.getInt64(rounds), "lane", [&](llvm::Value* round) {
      llvm::Value* base = b_.CreateMul(round, b_.getInt64(kLanes), "", true, true);
      for (int64_t u = 0; u < kLanes; ++u) {
        r_ = b_.CreateAdd(base, b_.getInt64(u), "", true, true);
        for (size_t i = 0; i < loop.stmts.size(); ++i) {
          const Stmt& s = loop.stmts[i];
          const Acc& a = accs_[s.acc_id];
          llvm::Value* x = Convert(EmitExpr(*s.expr), a.t).v;
          llvm::Value* acc = b_.CreateLoad(CType(a.t), lanes[i][u]);
          b_.CreateStore(LaneStep(s.reduce, a.t, acc, x), lanes[i][u]);
        }
      }
    }, 1, Unroll::kLate);
    for (size_t i = 0; i < loop.stmts.size(); ++i) {  // the lanes in order, into the accumulator
      const Stmt& s = loop.stmts[i];
      const Acc& a = accs_[s.acc_id];
      llvm::Value* acc = b_.CreateLoad(CType(a.t), a.slot);
      for (llvm::Value* lane : lanes[i]) acc = LaneStep(s.reduce, a.t, acc, b_.CreateLoad(CType(a.t), lane));
      b_.CreateStore(acc, a.slot);
    }
    EmitLoop(b_.getInt64(rounds * kLanes), b_.getInt64(loop.extent), "r", [&](llvm::Value* r) {
      r_ = r;
      for (const Stmt& s : loop.stmts) EmitStmt(s);
    });
  }

  // One step of a laned reduction: a float product, or a max/min.
  llvm::Value* LaneStep(ReduceKind r, DType t, llvm::Value* acc, llvm::Value* x) {
    return r == ReduceKind::kProd ? b_.CreateFMul(acc, x) : MaxMinStep(r, t, acc, x);
  }

  // One step of a max/min reduction: a NaN accumulator stays; a tie keeps the earlier value, or
  // for the *Last kinds takes x (PyTorch's max_impl(acc, x): (isnan(acc) || acc > x) ? acc : x).
  llvm::Value* MaxMinStep(ReduceKind r, DType t, llvm::Value* acc, llvm::Value* x) {
    const bool mx = r == ReduceKind::kMax || r == ReduceKind::kMaxLast;
    const bool last = r == ReduceKind::kMaxLast || r == ReduceKind::kMinLast;
    using P = llvm::CmpInst::Predicate;
    llvm::Value* take;
    if (t == DType::I64) {
      take = b_.CreateICmp(mx ? (last ? P::ICMP_SGE : P::ICMP_SGT) : (last ? P::ICMP_SLE : P::ICMP_SLT), x, acc);
    } else {
      take = b_.CreateFCmp(mx ? (last ? P::FCMP_UGE : P::FCMP_UGT) : (last ? P::FCMP_ULE : P::FCMP_ULT), x, acc);
      take = b_.CreateAnd(take, b_.CreateFCmpORD(acc, acc));
    }
    return b_.CreateSelect(take, x, acc);
  }

  // --- accumulators ---

  DType AccType(const Stmt& s) {
    DType t = TypeOf(*s.expr);
    if (s.kind == Stmt::Kind::kWelford) return t == DType::F64 ? DType::F64 : DType::F32;
    return t == DType::Bool ? DType::I64 : t;
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

  // Reassociation lets the loop vectorizer split a float sum into lanes. No-signed-zeros is
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
      InScope(b_.CreateAlignedStore(ToMemory(v.v, bt), addr, llvm::Align(DTypeSize(bt))), s.buffer);
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
      // never reassociable (Note [Lanes for max and min]): a long loop of products runs in lanes
      case ReduceKind::kProd: out = is_float ? b_.CreateFMul(acc, x) : b_.CreateMul(acc, x); break;
      case ReduceKind::kMax: case ReduceKind::kMin: case ReduceKind::kMaxLast: case ReduceKind::kMinLast:
        out = MaxMinStep(s.reduce, a.t, acc, x);
        break;
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

  V Load(const Expr& e) override {
    DType bt = k_.buffers[e.buffer].dtype;
    llvm::Value* addr = b_.CreateInBoundsGEP(MemType(bt), bufs_[e.buffer], Offset(e.index));
    return FromMemory(InScope(b_.CreateAlignedLoad(MemType(bt), addr, llvm::Align(DTypeSize(bt))), e.buffer), bt);
  }

  // Note [Alias scopes]: scope i for buffer i; noalias: all the others.
  void DeclareAliasScopes() {
    llvm::MDBuilder md(ctx_);
    llvm::MDNode* domain = md.createAnonymousAliasScopeDomain(symbol_);
    std::vector<llvm::Metadata*> scopes;
    for (const Buffer& b : k_.buffers) scopes.push_back(md.createAnonymousAliasScope(domain, b.name));
    for (size_t i = 0; i < scopes.size(); ++i) {
      std::vector<llvm::Metadata*> others;
      for (size_t j = 0; j < scopes.size(); ++j)
        if (j != i) others.push_back(scopes[j]);
      scope_.push_back(llvm::MDNode::get(ctx_, {scopes[i]}));
      noalias_.push_back(llvm::MDNode::get(ctx_, others));
    }
  }

  template <typename Access>
  Access* InScope(Access* access, int buffer) {
    access->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_[buffer]);
    access->setMetadata(llvm::LLVMContext::MD_noalias, noalias_[buffer]);
    return access;
  }
  llvm::Value* LoopVar(int dim) override { return dim < 0 ? r_ : outer_vars_[dim]; }

  std::string symbol_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  std::vector<llvm::Value*> bufs_;
  std::vector<llvm::MDNode*> scope_, noalias_;  // per buffer (Note [Alias scopes])
  std::vector<llvm::Value*> outer_vars_;
  llvm::Value* r_ = nullptr;
};

}  // namespace

std::unique_ptr<llvm::Module> BuildModule(llvm::LLVMContext& ctx, const Kernel& kernel, const std::string& symbol,
                                          llvm::TargetMachine& tm, const CodegenOptions& options,
                                          const HostTarget& s) {
  return BuildModule(ctx, std::vector<KernelSymbol>{{&kernel, symbol}}, tm, options, s);
}

std::unique_ptr<llvm::Module> BuildModule(llvm::LLVMContext& ctx, const std::vector<KernelSymbol>& kernels,
                                          llvm::TargetMachine& tm, const CodegenOptions& options,
                                          const HostTarget& s) {
  KILN_CHECK_VALUE(!kernels.empty(), "[inductor] a module of no kernels");
  std::string names;
  for (const KernelSymbol& k : kernels) names += (names.empty() ? "" : ", ") + k.kernel->name;
  auto m = std::make_unique<llvm::Module>(kernels[0].kernel->name, ctx);
  m->setDataLayout(tm.createDataLayout());
  m->setTargetTriple(tm.getTargetTriple().str());
  std::string features;
  for (const auto& f : s.features) features += (features.empty() ? "" : ",") + f;
  const bool avx512 = std::find(s.features.begin(), s.features.end(), "+avx512f") != s.features.end();
  const int width = options.prefer_vector_width ? options.prefer_vector_width : (avx512 ? 512 : 0);
  for (const KernelSymbol& k : kernels) Emitter(ctx, *m, *k.kernel, k.symbol, options.inline_exp).Emit(s.cpu, features, width);
  std::string err;
  llvm::raw_string_ostream es(err);
  if (llvm::verifyModule(*m, &es))
    throw Error("[inductor] generated invalid LLVM IR for '" + names + "' (a bug in kiln): " + es.str());

  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopInterleaving = true;
  // Note [One value, one set of bits]: a kernel recomputes a value in each loop that reads it
  // (softmax's expm1(x) in its max, its sum and its store), and a reader kernel recomputes a
  // cheap value that another kernel reduced (Note [Recompute or realize]). libmvec's vector log,
  // sin, cos, pow and f64 exp round otherwise than libm's scalar functions, which the vectoriser's
  // remainder iterations call: expm1(x) - max(expm1(x)) came out 1 ulp above 0 (9.5e-7 at 10),
  // exp of it above 1, and softmax's backward, which cancels, gave a gradient 0.2% off (fuzz seed
  // 881, program 2998). So no vector library: those functions are libm's in every iteration
  // (eager's bits too, as eager's loops call libm), and the loops holding them stay scalar;
  // f32 exp, sigmoid, tanh, erf and gelu are inline arithmetic (llvm_math.cc) and vectorise.
  llvm::TargetLibraryInfoImpl tlii(tm.getTargetTriple());
  if (options.vector_library && s.have_libmvec) tlii.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86);
  OptimizeO3(*m, tm, pto, &tlii, Unrolling::kFullOnly);  // Note [Full unrolling only] in llvm_optimize.cc
  return m;
}

}  // namespace kiln::codegen
