// codegen/nvptx_emit.cc: a PointwiseKernel (nvptx_codegen.h) -> one NVPTX kernel function, and
// NvptxEmitter's thread indices and vector accesses (nvptx_emit.h).
//
// Note [Pointwise kernel shape]: one thread per `vector` elements. A contiguous kernel (layout
// ndim 0) reads each tensor operand with one vector load per thread (16 bytes for float x 4 or
// bfloat16 x 8: the widest access, which a memory-bound kernel needs to reach the device's copy
// bandwidth), computes the expression once per lane, and writes one vector store; the last
// thread, past the final whole vector, finishes the tail element by element. A strided kernel
// gives each thread one element and splits its linear index into coordinates, innermost first,
// with the dims unrolled (the layout's ndim is part of the kernel), in 32-bit arithmetic where
// everything fits. Expressions come from ExprEmitter (llvm_expr.h), as on the CPU.
#include "codegen/nvptx_emit.h"

#include "codegen/nvptx_module.h"
#include "runtime/error.h"

namespace kiln::codegen {
namespace {

class PointwiseEmitter : public NvptxEmitter {
 public:
  PointwiseEmitter(llvm::LLVMContext& ctx, llvm::Module& m, const Kernel& operands, const PointwiseKernel& k,
                   const PointwiseLayout& layout)
      : NvptxEmitter(ctx, m, operands), pk_(k), layout_(layout) {}

  llvm::Function* Emit(const std::string& symbol) {
    const size_t nops = pk_.operands.size();
    std::vector<llvm::Type*> params;
    for (size_t b = 0; b < nops; ++b)
      params.push_back(pk_.scalar[b] ? ScalarParamType(pk_.operands[b].dtype)
                                     : MemType(pk_.operands[b].dtype)->getPointerTo());
    params.push_back(b_.getInt64Ty());  // n
    if (layout_.ndim > 0) {
      params.insert(params.end(), layout_.ndim * (layout_.index32 ? 3 : 1), b_.getInt64Ty());
      for (size_t b = 0; b < nops; ++b)
        if (!pk_.scalar[b]) params.insert(params.end(), layout_.ndim, b_.getInt64Ty());
    }
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), params, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    auto arg = fn_->arg_begin();
    for (size_t b = 0; b < nops; ++b, ++arg) {
      arg->setName(pk_.operands[b].name);
      args_.push_back(&*arg);
    }
    n_ = &*arg++;
    n_->setName("n");
    for (int d = 0; d < layout_.ndim; ++d, ++arg) sizes_.push_back(&*arg);
    if (layout_.ndim > 0 && layout_.index32) {
      for (int d = 0; d < layout_.ndim; ++d, ++arg) magics_.push_back(&*arg);
      for (int d = 0; d < layout_.ndim; ++d, ++arg) shifts_.push_back(&*arg);
    }
    strides_.resize(nops);
    for (size_t b = 0; b < nops; ++b)
      if (!pk_.scalar[b])
        for (int d = 0; d < layout_.ndim; ++d, ++arg) strides_[b].push_back(&*arg);

    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    llvm::Value* thread = ThreadIndex();
    if (layout_.ndim == 0) {
      EmitContiguous(thread);
    } else {
      EmitStrided(thread);
    }
    return fn_;
  }

 private:
  // Scalar operands' values (their compute dtype); tensor operands are loaded per element.
  void LoadScalars() { current_ = ScalarValues(pk_.operands, pk_.scalar, args_); }

  // The output's memory value for the element whose operands are in current_.
  llvm::Value* Compute() {
    DType out = pk_.operands[0].dtype;
    return ToMemory(Convert(EmitExpr(*pk_.expr), ComputeDType(out)).v, out);
  }

  llvm::Value* ElementAddress(size_t b, llvm::Value* offset) {
    return b_.CreateInBoundsGEP(MemType(pk_.operands[b].dtype), args_[b], offset);
  }
  llvm::Align ElementAlign(size_t b) { return llvm::Align(DTypeSize(pk_.operands[b].dtype)); }

  // One element at per-operand offsets (offsets[b] for tensor operands).
  void EmitElement(const std::vector<llvm::Value*>& offsets) {
    std::vector<V> values = LoadOperands(offsets);
    for (size_t b = 1; b < pk_.operands.size(); ++b)
      if (!pk_.scalar[b]) current_[b] = values[b];
    b_.CreateAlignedStore(Compute(), ElementAddress(0, offsets[0]), ElementAlign(0));
  }

  void EmitContiguous(llvm::Value* thread) {
    LoadScalars();
    const int vec = layout_.vector;
    llvm::Value* first = b_.CreateMul(thread, b_.getInt64(vec), "first", true, true);
    llvm::Value* last = b_.CreateAdd(first, b_.getInt64(vec), "last", true, true);
    auto* whole = llvm::BasicBlock::Create(ctx_, "vector", fn_);
    auto* tail = llvm::BasicBlock::Create(ctx_, "tail", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLE(last, n_), whole, tail);

    b_.SetInsertPoint(whole);
    std::vector<std::vector<V>> lanes(pk_.operands.size());
    for (size_t b = 1; b < pk_.operands.size(); ++b)
      if (!pk_.scalar[b]) lanes[b] = LoadVector(args_[b], first, pk_.operands[b].dtype, vec);
    std::vector<llvm::Value*> out(vec);
    for (int lane = 0; lane < vec; ++lane) {
      for (size_t b = 1; b < pk_.operands.size(); ++b)
        if (!pk_.scalar[b]) current_[b] = lanes[b][lane];
      out[lane] = Compute();
    }
    DType ot = pk_.operands[0].dtype;
    llvm::Type* out_at = AccessType(ot, vec);
    llvm::Value* po = b_.CreateBitCast(ElementAddress(0, first), out_at->getPointerTo());
    b_.CreateAlignedStore(Pack(out, ot, vec), po, llvm::Align(DTypeSize(ot) * vec));
    b_.CreateBr(done);

    // The tail: elements [first, n) of the one thread whose vector runs past n.
    b_.SetInsertPoint(tail);
    auto* body = llvm::BasicBlock::Create(ctx_, "tail.body", fn_);
    // at most vec - 1 elements: bounded by `last` too, so LLVM sees the short trip count
    llvm::Value* end = b_.CreateSelect(b_.CreateICmpSLT(n_, last), n_, last, "end");
    b_.CreateCondBr(b_.CreateICmpSLT(first, end), body, done);
    b_.SetInsertPoint(body);
    llvm::PHINode* j = b_.CreatePHI(b_.getInt64Ty(), 2, "j");
    j->addIncoming(first, tail);
    EmitElement(std::vector<llvm::Value*>(pk_.operands.size(), j));
    llvm::Value* next = b_.CreateAdd(j, b_.getInt64(1), "", true, true);
    j->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpSLT(next, end), body, done);

    b_.SetInsertPoint(done);
    b_.CreateRetVoid();
  }

  // Note [Strided kernel shape]: kStridedElements elements per thread, a block's worth of
  // threads apart (so each of the thread's accesses is coalesced with its neighbours' where the
  // operand allows). A block wholly inside [0, n) computes every element's offsets and issues every
  // load before the first store, in straight-line code, so a thread keeps all its loads in flight
  // (what a transposed operand, whose loads do not coalesce, needs); the last block guards each
  // element. A linear index splits into coordinates by the fast division of the launch's
  // FastDivisors (a multiply-high and a shift) when index math is 32-bit.
  llvm::Value* Divide(llvm::Value* x, int d) {
    if (!layout_.index32) return b_.CreateUDiv(x, sizes_[d]);
    llvm::Value* magic = b_.CreateTrunc(magics_[d], b_.getInt32Ty());
    llvm::Value* hi = b_.CreateIntrinsic(llvm::Intrinsic::nvvm_mulhi_ui, {}, {x, magic});  // mul.hi.u32
    return b_.CreateLShr(b_.CreateAdd(hi, x), b_.CreateTrunc(shifts_[d], b_.getInt32Ty()));
  }

  // Per-operand element offsets (int64) of linear index `i` (in the index type).
  std::vector<llvm::Value*> Offsets(llvm::Value* i) {
    llvm::Type* ity = i->getType();
    auto narrow = [&](llvm::Value* v) { return layout_.index32 ? b_.CreateTrunc(v, ity) : v; };
    std::vector<llvm::Value*> offsets(pk_.operands.size(), llvm::ConstantInt::get(ity, 0));
    llvm::Value* rest = i;
    for (int d = layout_.ndim - 1; d >= 0; --d) {
      llvm::Value* coord = rest;
      if (d > 0) {  // the outermost coordinate is what is left
        llvm::Value* q = Divide(rest, d);
        coord = b_.CreateSub(rest, b_.CreateMul(q, narrow(sizes_[d])));
        rest = q;
      }
      for (size_t b = 0; b < pk_.operands.size(); ++b)
        if (!pk_.scalar[b]) offsets[b] = b_.CreateAdd(offsets[b], b_.CreateMul(coord, narrow(strides_[b][d])));
    }
    if (layout_.index32)
      for (llvm::Value*& o : offsets) o = b_.CreateSExt(o, b_.getInt64Ty());
    return offsets;
  }

  void EmitStrided(llvm::Value*) {
    llvm::Type* ity = layout_.index32 ? b_.getInt32Ty() : b_.getInt64Ty();
    llvm::Value* block = b_.CreateZExtOrTrunc(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, {}, {}), ity);
    llvm::Value* tid = b_.CreateZExtOrTrunc(b_.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}), ity);
    const int64_t per_block = int64_t(kPointwiseThreads) * kStridedElements;
    llvm::Value* start = b_.CreateMul(block, llvm::ConstantInt::get(ity, per_block));
    llvm::Value* first = b_.CreateAdd(start, tid);
    llvm::Value* n = layout_.index32 ? b_.CreateTrunc(n_, ity) : n_;
    auto index = [&](int j) { return b_.CreateAdd(first, llvm::ConstantInt::get(ity, int64_t(j) * kPointwiseThreads)); };
    auto* whole = llvm::BasicBlock::Create(ctx_, "whole", fn_);
    auto* last = llvm::BasicBlock::Create(ctx_, "last", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "done", fn_);
    b_.CreateCondBr(b_.CreateICmpSLE(b_.CreateAdd(start, llvm::ConstantInt::get(ity, per_block)), n), whole, last);

    b_.SetInsertPoint(whole);
    LoadScalars();
    std::vector<std::vector<llvm::Value*>> offsets(kStridedElements);
    std::vector<std::vector<V>> loaded(kStridedElements);
    for (int j = 0; j < kStridedElements; ++j) {
      offsets[j] = Offsets(index(j));
      loaded[j] = LoadOperands(offsets[j]);
    }
    for (int j = 0; j < kStridedElements; ++j) {
      for (size_t b = 1; b < pk_.operands.size(); ++b)
        if (!pk_.scalar[b]) current_[b] = loaded[j][b];
      b_.CreateAlignedStore(Compute(), ElementAddress(0, offsets[j][0]), ElementAlign(0));
    }
    b_.CreateBr(done);

    b_.SetInsertPoint(last);
    LoadScalars();
    for (int j = 0; j < kStridedElements; ++j) {
      llvm::Value* i = index(j);
      auto* body = llvm::BasicBlock::Create(ctx_, "element", fn_);
      auto* next = llvm::BasicBlock::Create(ctx_, "next", fn_);
      b_.CreateCondBr(b_.CreateICmpSLT(i, n), body, next);
      b_.SetInsertPoint(body);
      EmitElement(Offsets(i));
      b_.CreateBr(next);
      b_.SetInsertPoint(next);
    }
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    b_.CreateRetVoid();
  }

  // The tensor operands' values at per-operand offsets (scalars' slots left empty).
  std::vector<V> LoadOperands(const std::vector<llvm::Value*>& offsets) {
    std::vector<V> values(pk_.operands.size(), V{nullptr, DType::F32});
    for (size_t b = 1; b < pk_.operands.size(); ++b) {
      if (pk_.scalar[b]) continue;
      DType t = pk_.operands[b].dtype;
      values[b] = FromMemory(b_.CreateAlignedLoad(MemType(t), ElementAddress(b, offsets[b]), ElementAlign(b)), t);
    }
    return values;
  }

  V Load(const Expr& e) override { return current_.at(e.buffer); }
  llvm::Value* LoopVar(int) override {
    KILN_INTERNAL_ASSERT(false, "a pointwise kernel has no loop index");
    return nullptr;
  }

  const PointwiseKernel& pk_;
  PointwiseLayout layout_;
  llvm::Function* fn_ = nullptr;
  std::vector<llvm::Value*> args_, sizes_, magics_, shifts_;
  std::vector<std::vector<llvm::Value*>> strides_;
  llvm::Value* n_ = nullptr;
  std::vector<V> current_;
};

}  // namespace

// --- NvptxEmitter ---

Kernel OperandsAsKernel(const std::string& name, const std::vector<Buffer>& operands) {
  Kernel kernel;
  kernel.name = name;
  kernel.buffers = operands;
  return kernel;
}

llvm::Type* NvptxEmitter::ScalarParamType(DType t) {
  DType c = ComputeDType(t);
  return c == DType::F32 ? b_.getFloatTy() : c == DType::F64 ? b_.getDoubleTy() : b_.getInt64Ty();
}

std::vector<V> NvptxEmitter::ScalarValues(const std::vector<Buffer>& operands, const std::vector<bool>& scalar,
                                          const std::vector<llvm::Value*>& args) {
  std::vector<V> values(operands.size(), V{nullptr, DType::F32});
  for (size_t b = 0; b < operands.size(); ++b) {
    if (!scalar[b]) continue;
    DType c = ComputeDType(operands[b].dtype);
    llvm::Value* v = args[b];
    if (c == DType::Bool) v = b_.CreateICmpNE(v, b_.getInt64(0));
    values[b] = V{v, c};
  }
  return values;
}

llvm::Value* NvptxEmitter::Sreg(llvm::Intrinsic::ID id) {
  return b_.CreateZExt(b_.CreateIntrinsic(id, {}, {}), b_.getInt64Ty());
}

llvm::Value* NvptxEmitter::ThreadIndex() {
  llvm::Value* block = Sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
  llvm::Value* threads = Sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
  llvm::Value* thread = Sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
  return b_.CreateAdd(b_.CreateMul(block, threads, "", true, true), thread, "i", true, true);
}

bool NvptxEmitter::InWords(DType t, int vec) { return DTypeSize(t) < 4 && (DTypeSize(t) * vec) % 4 == 0; }

llvm::Type* NvptxEmitter::AccessType(DType t, int vec) {
  if (!InWords(t, vec)) return llvm::FixedVectorType::get(MemType(t), vec);
  return llvm::FixedVectorType::get(b_.getInt32Ty(), DTypeSize(t) * vec / 4);
}

std::vector<llvm::Value*> NvptxEmitter::Unpack(llvm::Value* access, DType t, int vec) {
  std::vector<llvm::Value*> lanes(vec);
  const int64_t per_word = 4 / DTypeSize(t);
  for (int lane = 0; lane < vec; ++lane) {
    if (!InWords(t, vec)) {
      lanes[lane] = b_.CreateExtractElement(access, uint64_t(lane));
      continue;
    }
    llvm::Value* word = b_.CreateExtractElement(access, uint64_t(lane / per_word));
    llvm::Value* shifted = b_.CreateLShr(word, uint64_t((lane % per_word) * DTypeSize(t) * 8));
    lanes[lane] = b_.CreateBitCast(b_.CreateTrunc(shifted, b_.getIntNTy(DTypeSize(t) * 8)), MemType(t));
  }
  return lanes;
}

llvm::Value* NvptxEmitter::Pack(const std::vector<llvm::Value*>& lanes, DType t, int vec) {
  llvm::Value* access = llvm::UndefValue::get(AccessType(t, vec));
  if (!InWords(t, vec)) {
    for (int lane = 0; lane < vec; ++lane) access = b_.CreateInsertElement(access, lanes[lane], uint64_t(lane));
    return access;
  }
  const int64_t per_word = 4 / DTypeSize(t);
  for (int w = 0; w < vec / per_word; ++w) {
    llvm::Value* word = b_.getInt32(0);
    for (int j = 0; j < per_word; ++j) {
      llvm::Value* bits = b_.CreateBitCast(lanes[w * per_word + j], b_.getIntNTy(DTypeSize(t) * 8));
      word = b_.CreateOr(word, b_.CreateShl(b_.CreateZExt(bits, b_.getInt32Ty()), uint64_t(j * DTypeSize(t) * 8)));
    }
    access = b_.CreateInsertElement(access, word, uint64_t(w));
  }
  return access;
}

std::vector<V> NvptxEmitter::LoadVector(llvm::Value* base, llvm::Value* first, DType t, int vec) {
  llvm::Type* at = AccessType(t, vec);
  llvm::Value* p = b_.CreateBitCast(b_.CreateInBoundsGEP(MemType(t), base, first), at->getPointerTo());
  std::vector<V> values;
  for (llvm::Value* lane : Unpack(b_.CreateAlignedLoad(at, p, llvm::Align(DTypeSize(t) * vec)), t, vec))
    values.push_back(FromMemory(lane, t));
  return values;
}

llvm::Function* EmitPointwise(llvm::Module& m, const PointwiseKernel& k, const PointwiseLayout& layout,
                              const std::string& symbol) {
  Kernel operands = OperandsAsKernel(k.name, k.operands);
  llvm::Function* fn = PointwiseEmitter(m.getContext(), m, operands, k, layout).Emit(symbol);
  AnnotateKernel(fn, kPointwiseThreads, k.name);
  return fn;
}

}  // namespace kiln::codegen
