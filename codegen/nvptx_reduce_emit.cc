// codegen/nvptx_reduce_emit.cc: a ReduceKernel (nvptx_reduce.h) -> one NVPTX kernel function.
//
// Note [Reduction kernel shape]: a block of bx * by threads; thread t is (x, y) = (t % bx, t / bx).
// A row layout gives output o = block * by + y to the bx threads of row y, which read the
// reduction at r = lane * vector, lane * vector + bx * vector, ... (neighbouring threads read
// neighbouring vectors: coalesced where the reduction is innermost in memory). A column layout
// gives output o = block * bx + x to each thread of a row, so a warp reads 32 neighbouring outputs'
// elements at once (coalesced where the outputs are innermost), and the by rows split the
// reduction (r = y, y + by, ...). Each thread folds its elements into one accumulator, four loads
// in flight at a time, then the threads of an output combine theirs through shared memory in
// log2(lanes) steps, and lane 0 writes post(acc). Few outputs over a long reduction also split
// the reduction across blocks (`chunk`): each split writes its own partial result, and the
// launcher reduces those in a second kernel. Lanes past the end of the reduction, and threads
// past the last output, hold the combine's identity, so every thread reaches every barrier.
// Offsets split a linear index into coordinates over the layout's dims (unrolled), in 32-bit
// division where everything fits; one dim needs no division.
#include "codegen/nvptx_emit.h"
#include "codegen/nvptx_module.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

int Log2(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

class ReduceEmitter : public NvptxEmitter {
 public:
  ReduceEmitter(llvm::LLVMContext& ctx, llvm::Module& m, const Kernel& operands, const ReduceKernel& k,
                const ReduceLayout& layout)
      : NvptxEmitter(ctx, m, operands), rk_(k), layout_(layout), first_(FirstReduceInput(k)),
        arg_(k.reduce == ReduceKind::kArgmax || k.reduce == ReduceKind::kArgmin) {}

  llvm::Function* Emit(const std::string& symbol) {
    const int nops = static_cast<int>(rk_.operands.size());
    auto* i64 = b_.getInt64Ty();
    std::vector<llvm::Type*> params;
    for (int b = 0; b < nops; ++b)
      params.push_back(rk_.scalar[b] ? ScalarParamType(rk_.operands[b].dtype)
                                     : MemType(rk_.operands[b].dtype)->getPointerTo());
    params.insert(params.end(), 4 + layout_.out_ndim + layout_.red_ndim, i64);
    for (int b = first_; b < nops; ++b)
      if (!rk_.scalar[b]) params.insert(params.end(), layout_.out_ndim + layout_.red_ndim, i64);
    fn_ = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false),
                                 llvm::Function::ExternalLinkage, symbol, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    auto arg = fn_->arg_begin();
    for (int b = 0; b < nops; ++b, ++arg) {
      arg->setName(rk_.operands[b].name);
      args_.push_back(&*arg);
    }
    for (llvm::Value** v : {&num_outputs_, &reduce_size_, &chunk_, &blocks_}) *v = &*arg++;
    for (int d = 0; d < layout_.out_ndim; ++d) out_sizes_.push_back(&*arg++);
    for (int d = 0; d < layout_.red_ndim; ++d) red_sizes_.push_back(&*arg++);
    out_strides_.resize(nops);
    red_strides_.resize(nops);
    for (int b = first_; b < nops; ++b) {
      if (rk_.scalar[b]) continue;
      for (int d = 0; d < layout_.out_ndim; ++d) out_strides_[b].push_back(&*arg++);
      for (int d = 0; d < layout_.red_ndim; ++d) red_strides_[b].push_back(&*arg++);
    }

    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    acc_slot_ = b_.CreateAlloca(CType(rk_.acc), nullptr, "acc");
    index_slot_ = b_.CreateAlloca(i64, nullptr, "index");
    current_ = ScalarValues(rk_.operands, rk_.scalar, args_);

    // (x, y), the split and the block within it, this thread's output and lane.
    llvm::Value* tid = Sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
    llvm::Value* x = b_.CreateAnd(tid, b_.getInt64(layout_.bx - 1), "x");
    llvm::Value* y = b_.CreateLShr(tid, b_.getInt64(Log2(layout_.bx)), "y");
    llvm::Value* block = Sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
    llvm::Value* split = b_.CreateUDiv(block, blocks_, "split");
    llvm::Value* in_split = b_.CreateSub(block, b_.CreateMul(split, blocks_));
    const int outputs_per_block = layout_.row ? layout_.by : layout_.bx;
    llvm::Value* o = b_.CreateAdd(b_.CreateMul(in_split, b_.getInt64(outputs_per_block)), layout_.row ? y : x, "o");
    lane_ = layout_.row ? x : y;
    lanes_ = layout_.row ? layout_.bx : layout_.by;
    llvm::Value* r0 = b_.CreateMul(split, chunk_, "r0");
    llvm::Value* r_end = b_.CreateAdd(r0, chunk_);
    r1_ = b_.CreateSelect(b_.CreateICmpULT(r_end, reduce_size_), r_end, reduce_size_, "r1");
    b_.CreateStore(Identity(Kind(), rk_.acc), acc_slot_);
    b_.CreateStore(b_.getInt64(INT64_MAX), index_slot_);

    llvm::Value* valid = b_.CreateICmpULT(o, num_outputs_, "valid");
    auto* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* combine = llvm::BasicBlock::Create(ctx_, "combine", fn_);
    b_.CreateCondBr(valid, body, combine);
    b_.SetInsertPoint(body);
    bases_ = OutOffsets(o);
    EmitLoops(r0);
    b_.CreateBr(combine);

    b_.SetInsertPoint(combine);
    CombineLanes(tid);
    auto* store = llvm::BasicBlock::Create(ctx_, "store", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "done", fn_);
    b_.CreateCondBr(b_.CreateAnd(valid, b_.CreateICmpEQ(lane_, b_.getInt64(0))), store, done);
    b_.SetInsertPoint(store);
    llvm::Value* at = b_.CreateAdd(b_.CreateMul(split, num_outputs_), o, "at");
    accs_[0] = Acc{acc_slot_, nullptr, rk_.acc};
    DType out = rk_.operands[0].dtype;
    llvm::Value* result = ToMemory(Convert(EmitExpr(*rk_.post), ComputeDType(out)).v, out);
    b_.CreateAlignedStore(result, b_.CreateInBoundsGEP(MemType(out), args_[0], at), llvm::Align(DTypeSize(out)));
    if (arg_)
      b_.CreateAlignedStore(b_.CreateLoad(i64, index_slot_), b_.CreateInBoundsGEP(i64, args_[1], at), llvm::Align(8));
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    b_.CreateRetVoid();
    return fn_;
  }

 private:
  ReduceKind Kind() const {
    if (rk_.reduce == ReduceKind::kMaxLast) return ReduceKind::kMax;  // ties between lanes have no order
    if (rk_.reduce == ReduceKind::kMinLast) return ReduceKind::kMin;
    return rk_.reduce;
  }

  bool Tensor(int b) const { return !rk_.scalar[b]; }

  // x / d and x % d for a linear index x in [0, 2^31) when index math is 32-bit.
  std::pair<llvm::Value*, llvm::Value*> DivMod(llvm::Value* x, llvm::Value* d) {
    if (!layout_.index32) {
      llvm::Value* q = b_.CreateUDiv(x, d);
      return {q, b_.CreateSub(x, b_.CreateMul(q, d))};
    }
    llvm::Value* x32 = b_.CreateTrunc(x, b_.getInt32Ty());
    llvm::Value* d32 = b_.CreateTrunc(d, b_.getInt32Ty());
    llvm::Value* q = b_.CreateUDiv(x32, d32);
    return {b_.CreateZExt(q, b_.getInt64Ty()), b_.CreateZExt(b_.CreateSub(x32, b_.CreateMul(q, d32)), b_.getInt64Ty())};
  }

  // Per-input offsets of linear index i over dims (sizes, per-input strides), innermost dim last.
  std::vector<llvm::Value*> Offsets(llvm::Value* i, const std::vector<llvm::Value*>& sizes,
                                    const std::vector<std::vector<llvm::Value*>>& strides) {
    const int nops = static_cast<int>(rk_.operands.size());
    std::vector<llvm::Value*> offsets(nops, b_.getInt64(0));
    llvm::Value* rest = i;
    for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
      llvm::Value* coord = rest;
      if (d > 0) {  // the outermost coordinate is what is left
        auto [quotient, remainder] = DivMod(rest, sizes[d]);
        rest = quotient;
        coord = remainder;
      }
      for (int b = first_; b < nops; ++b)
        if (Tensor(b)) offsets[b] = b_.CreateAdd(offsets[b], b_.CreateMul(coord, strides[b][d], "", true, true));
    }
    return offsets;
  }
  std::vector<llvm::Value*> OutOffsets(llvm::Value* o) { return Offsets(o, out_sizes_, out_strides_); }

  // The inputs' values at reduction index r (the scalar inputs' slots keep their values).
  std::vector<V> LoadAt(llvm::Value* r) {
    std::vector<llvm::Value*> red = Offsets(r, red_sizes_, red_strides_);
    std::vector<V> values(rk_.operands.size(), V{nullptr, DType::F32});
    for (int b = first_; b < static_cast<int>(rk_.operands.size()); ++b) {
      if (!Tensor(b)) continue;
      DType t = rk_.operands[b].dtype;
      llvm::Value* p = b_.CreateInBoundsGEP(MemType(t), args_[b], b_.CreateAdd(bases_[b], red[b]));
      values[b] = FromMemory(b_.CreateAlignedLoad(MemType(t), p, llvm::Align(DTypeSize(t))), t);
    }
    return values;
  }

  // `vector` elements from r on of every tensor input (stride 1), lane by lane.
  std::vector<std::vector<V>> LoadVectorAt(llvm::Value* r) {
    const int vec = layout_.vector;
    std::vector<std::vector<V>> lanes(vec, std::vector<V>(rk_.operands.size(), V{nullptr, DType::F32}));
    for (int b = first_; b < static_cast<int>(rk_.operands.size()); ++b) {
      if (!Tensor(b)) continue;
      std::vector<V> v = LoadVector(args_[b], b_.CreateAdd(bases_[b], r), rk_.operands[b].dtype, vec);
      for (int j = 0; j < vec; ++j) lanes[j][b] = v[j];
    }
    return lanes;
  }

  // Folds one element (the inputs' values, its reduction index r) into the accumulator.
  void Fold(const std::vector<V>& values, llvm::Value* r) {
    for (int b = first_; b < static_cast<int>(rk_.operands.size()); ++b)
      if (Tensor(b)) current_[b] = values[b];
    V x = Convert(EmitExpr(*rk_.pre), rk_.acc);
    llvm::Value* index = r;
    if (rk_.index_input >= 0) index = values[rk_.index_input].v;
    Combine(x.v, index, /*in_order=*/true);
  }

  // acc = combine(acc, (x, index)); argmax/argmin keep the first index among equal values (and
  // among NaNs, which win), so the order lanes combine in does not matter. `in_order`: x comes after
  // every element folded so far (a thread's own elements, in increasing r), so a tie or a second NaN
  // never takes it and no index comparison is needed.
  void Combine(llvm::Value* x, llvm::Value* index, bool in_order) {
    llvm::Type* ty = CType(rk_.acc);
    llvm::Value* acc = b_.CreateLoad(ty, acc_slot_);
    const bool is_float = rk_.acc != DType::I64;
    const ReduceKind kind = Kind();
    if (kind == ReduceKind::kSum) {
      b_.CreateStore(is_float ? b_.CreateFAdd(acc, x) : b_.CreateAdd(acc, x), acc_slot_);
      return;
    }
    if (kind == ReduceKind::kProd) {
      b_.CreateStore(is_float ? b_.CreateFMul(acc, x) : b_.CreateMul(acc, x), acc_slot_);
      return;
    }
    const bool mx = kind == ReduceKind::kMax || kind == ReduceKind::kArgmax;
    llvm::Value* better = is_float ? (mx ? b_.CreateFCmpOGT(x, acc) : b_.CreateFCmpOLT(x, acc))
                                   : (mx ? b_.CreateICmpSGT(x, acc) : b_.CreateICmpSLT(x, acc));
    llvm::Value* take;
    if (!arg_ || in_order) {
      // PyTorch's max_impl: a NaN accumulator stays, a NaN element replaces it
      take = is_float ? b_.CreateAnd(b_.CreateFCmpORD(acc, acc), b_.CreateOr(better, b_.CreateFCmpUNO(x, x))) : better;
      if (arg_) {  // the thread's first element is taken whatever it is (the identity has no index)
        llvm::Value* best_index = b_.CreateLoad(b_.getInt64Ty(), index_slot_);
        take = b_.CreateOr(take, b_.CreateICmpEQ(best_index, b_.getInt64(INT64_MAX)));
        b_.CreateStore(b_.CreateSelect(take, index, best_index), index_slot_);
      }
      b_.CreateStore(b_.CreateSelect(take, x, acc), acc_slot_);
      return;
    }
    llvm::Value* best_index = b_.CreateLoad(b_.getInt64Ty(), index_slot_);
    llvm::Value* earlier = b_.CreateICmpSLT(index, best_index);
    if (is_float) {
      llvm::Value* acc_nan = b_.CreateFCmpUNO(acc, acc);
      llvm::Value* x_nan = b_.CreateFCmpUNO(x, x);
      llvm::Value* tie = b_.CreateAnd(b_.CreateFCmpOEQ(x, acc), earlier);
      // acc NaN: only an earlier NaN replaces it; else a NaN, a better value or an earlier equal one
      take = b_.CreateSelect(acc_nan, b_.CreateAnd(x_nan, earlier), b_.CreateOr(x_nan, b_.CreateOr(better, tie)));
    } else {
      take = b_.CreateOr(better, b_.CreateAnd(b_.CreateICmpEQ(x, acc), earlier));
    }
    b_.CreateStore(b_.CreateSelect(take, x, acc), acc_slot_);
    b_.CreateStore(b_.CreateSelect(take, index, best_index), index_slot_);
  }

  // for (r = r0 + lane * vec; r < r1; r += lanes * vec): kReduceLoadsInFlight steps' loads, then their folds;
  // then the remaining steps one at a time.
  void EmitLoops(llvm::Value* r0) {
    const int vec = layout_.vector;
    llvm::Value* step = b_.getInt64(int64_t(lanes_) * vec);
    llvm::Value* start = b_.CreateAdd(r0, b_.CreateMul(lane_, b_.getInt64(vec)), "start");
    auto element_loads = [&](llvm::Value* r) {
      if (vec == 1) return std::vector<std::vector<V>>{LoadAt(r)};
      return LoadVectorAt(r);
    };
    auto fold = [&](const std::vector<std::vector<V>>& elements, llvm::Value* r) {
      for (int j = 0; j < static_cast<int>(elements.size()); ++j) Fold(elements[j], b_.CreateAdd(r, b_.getInt64(j)));
    };

    // the unrolled loop, while the last of its kReduceLoadsInFlight steps is in range
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, "unrolled.head", fn_);
    auto* body = llvm::BasicBlock::Create(ctx_, "unrolled", fn_);
    auto* rest_head = llvm::BasicBlock::Create(ctx_, "rest.head", fn_);
    auto* rest = llvm::BasicBlock::Create(ctx_, "rest", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "loops.done", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* r = b_.CreatePHI(b_.getInt64Ty(), 2, "r");
    r->addIncoming(start, pre);
    llvm::Value* last = b_.CreateAdd(r, b_.CreateMul(step, b_.getInt64(kReduceLoadsInFlight - 1)));
    b_.CreateCondBr(b_.CreateICmpULT(last, r1_), body, rest_head);
    b_.SetInsertPoint(body);
    std::vector<std::vector<std::vector<V>>> loaded;
    std::vector<llvm::Value*> positions;
    for (int u = 0; u < kReduceLoadsInFlight; ++u) {
      positions.push_back(b_.CreateAdd(r, b_.CreateMul(step, b_.getInt64(u))));
      loaded.push_back(element_loads(positions.back()));
    }
    for (int u = 0; u < kReduceLoadsInFlight; ++u) fold(loaded[u], positions[u]);
    llvm::Value* next = b_.CreateAdd(r, b_.CreateMul(step, b_.getInt64(kReduceLoadsInFlight)));
    r->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(head);

    b_.SetInsertPoint(rest_head);
    llvm::PHINode* q = b_.CreatePHI(b_.getInt64Ty(), 2, "q");
    q->addIncoming(r, head);
    b_.CreateCondBr(b_.CreateICmpULT(q, r1_), rest, exit);
    b_.SetInsertPoint(rest);
    fold(element_loads(q), q);
    q->addIncoming(b_.CreateAdd(q, step), b_.GetInsertBlock());
    b_.CreateBr(rest_head);
    b_.SetInsertPoint(exit);
  }

  // The lanes of each output combine through shared memory: in step s, lane l < s takes lane
  // l + s's value; after log2(lanes) steps lane 0 holds the result.
  void CombineLanes(llvm::Value* tid) {
    if (lanes_ == 1) return;
    const int threads = layout_.bx * layout_.by;
    auto shared = [&](llvm::Type* ty, const char* name) {
      auto* at = llvm::ArrayType::get(ty, threads);
      return new llvm::GlobalVariable(m_, at, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(at),
                                      name, nullptr, llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/3);
    };
    llvm::Type* ty = CType(rk_.acc);
    llvm::GlobalVariable* values = shared(ty, "lane_values");
    llvm::GlobalVariable* indices = arg_ ? shared(b_.getInt64Ty(), "lane_indices") : nullptr;
    auto slot = [&](llvm::GlobalVariable* g, llvm::Value* i) {
      return b_.CreateInBoundsGEP(g->getValueType(), g, {b_.getInt64(0), i});
    };
    auto publish = [&](llvm::Value* i) {
      b_.CreateStore(b_.CreateLoad(ty, acc_slot_), slot(values, i));
      if (arg_) b_.CreateStore(b_.CreateLoad(b_.getInt64Ty(), index_slot_), slot(indices, i));
    };
    publish(tid);
    const int64_t lane_stride = layout_.row ? 1 : layout_.bx;
    for (int s = lanes_ / 2; s >= 1; s /= 2) {
      b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
      auto* take = llvm::BasicBlock::Create(ctx_, "lanes.take", fn_);
      auto* next = llvm::BasicBlock::Create(ctx_, "lanes.next", fn_);
      b_.CreateCondBr(b_.CreateICmpULT(lane_, b_.getInt64(s)), take, next);
      b_.SetInsertPoint(take);
      llvm::Value* other = b_.CreateAdd(tid, b_.getInt64(s * lane_stride));
      llvm::Value* x = b_.CreateLoad(ty, slot(values, other));
      llvm::Value* xi = arg_ ? b_.CreateLoad(b_.getInt64Ty(), slot(indices, other)) : nullptr;
      CombineValue(x, xi);
      if (s > 1) publish(tid);
      b_.CreateBr(next);
      b_.SetInsertPoint(next);
    }
  }

  // Combine with another lane's partial result (a sum adds, as an element would).
  void CombineValue(llvm::Value* x, llvm::Value* index) { Combine(x, index ? index : b_.getInt64(0), false); }

  V Load(const Expr& e) override { return current_.at(e.buffer); }
  llvm::Value* LoopVar(int) override {
    KILN_INTERNAL_ASSERT(false, "a reduction kernel has no loop index");
    return nullptr;
  }

  const ReduceKernel& rk_;
  ReduceLayout layout_;
  const int first_;
  const bool arg_;
  llvm::Function* fn_ = nullptr;
  std::vector<llvm::Value*> args_, out_sizes_, red_sizes_, bases_;
  std::vector<std::vector<llvm::Value*>> out_strides_, red_strides_;
  llvm::Value *num_outputs_ = nullptr, *reduce_size_ = nullptr, *chunk_ = nullptr, *blocks_ = nullptr;
  llvm::Value *lane_ = nullptr, *r1_ = nullptr;
  int lanes_ = 1;
  llvm::AllocaInst *acc_slot_ = nullptr, *index_slot_ = nullptr;
  std::vector<V> current_;
};

}  // namespace

llvm::Function* EmitReduce(llvm::Module& m, const ReduceKernel& k, const ReduceLayout& layout,
                           const std::string& symbol) {
  Kernel operands = OperandsAsKernel(k.name, k.operands);
  llvm::Function* fn = ReduceEmitter(m.getContext(), m, operands, k, layout).Emit(symbol);
  AnnotateKernel(fn, layout.bx * layout.by, k.name);
  return fn;
}

}  // namespace kiln::codegen
