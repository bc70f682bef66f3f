// tensor/cuda/multi_tensor.cc: filling and launching the multi-tensor optimizer kernels (Adam, SGD)
// (multi_tensor.h): tensors and their chunks are packed into a launch's parameter block until either
// table is full; a tensor whose chunks do not all fit goes on in the next launch.
#include "tensor/cuda/multi_tensor.h"

#include <algorithm>
#include <cstring>

#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"
#include "tensor/cuda/embedded_kernels.h"
#include "tensor/empty.h"
#include "tensor/cuda/kernels/optim_args.h"
#include "tensor/ops/common.h"

namespace kiln::cuda {
namespace {

// Every tensor of `ts`: CUDA, contiguous, of one real floating dtype, on one device.
void CheckList(const std::vector<Tensor>& ts, const char* op) {
  KILN_CHECK_VALUE(!ts.empty(), op, ": no tensors");
  const Tensor& first = ts[0];
  for (size_t i = 0; i < ts.size(); ++i) {
    KILN_CHECK_VALUE(ts[i].defined() && ts[i].device().is_cuda() && ts[i].device() == first.device() &&
                         ts[i].dtype() == first.dtype() && IsFloating(first.dtype()) && !IsComplex(first.dtype()) &&
                         ts[i].is_contiguous(),
                     op, ": tensor ", i, " must be a contiguous real floating-point tensor of ",
                     ScalarTypeName(first.dtype()), " on ", first.device().str());
  }
}

void CheckTensor(const Tensor& t, const Tensor& like, const char* what, size_t i, const char* op = "multi-tensor Adam") {
  KILN_CHECK_VALUE(t.defined() && t.device() == like.device() && t.dtype() == like.dtype() && t.is_contiguous() &&
                       t.numel() == like.numel(),
                   op, ": ", what, "[", i, "] must be a contiguous ", ScalarTypeName(like.dtype()),
                   " tensor of ", like.numel(), " elements on ", like.device().str());
}

// Launches `fn` over every chunk of `ts`, packing `l` (AdamLaunch or ListLaunch): tensor i takes a
// slot, fill_slot(slot, i), when it starts and again when it continues in a new launch; a launch goes
// when either table is full, then launched(chunks) runs.
template <typename L, typename FillSlot, typename Launched>
void LaunchChunks(const std::vector<Tensor>& ts, int max_tensors, CUfunction fn, L& l, const FillSlot& fill_slot,
                  const Launched& launched) {
  const int device = ts[0].device().index;
  int tensors = 0, chunks = 0;
  auto launch = [&] {
    if (chunks == 0) return;
    std::vector<void*> args = {&l};
    Launch(fn, static_cast<unsigned>(chunks), kAdamThreads, 0, CurrentStream(device), args);
    launched(chunks);
    tensors = chunks = 0;
  };
  for (size_t i = 0; i < ts.size(); ++i) {
    const int64_t pieces = (ts[i].numel() + kAdamChunk - 1) / kAdamChunk;
    for (int64_t c = 0; c < pieces; ++c) {
      if (c == 0 || chunks == 0) {
        if (tensors == max_tensors) launch();
        fill_slot(tensors++, i);
      }
      l.chunk_tensor[chunks] = static_cast<uint8_t>(tensors - 1);
      l.chunk_index[chunks] = static_cast<int32_t>(c);
      if (++chunks == kAdamChunks) launch();
    }
  }
  launch();
}

CUfunction OptimKernel(const char* kernel, const Tensor& like, const char* op) {
  return EmbeddedKernel(OptimKernels(), like.device().index, StrCat(kernel, KernelSuffix(like.dtype())).c_str(), op);
}

int64_t ChunksOf(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += (t.numel() + kAdamChunk - 1) / kAdamChunk;
  return n;
}

ScalarType AccOf(ScalarType t) { return t == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32; }

// clip_grad_norm_'s passes: `kernel` over every chunk of `grads`; `l`'s other fields are the caller's.
void LaunchOverGrads(const std::vector<Tensor>& grads, const char* kernel, ListLaunch& l) {
  LaunchChunks(
      grads, kListTensors, OptimKernel(kernel, grads[0], "clip_grad_norm_"), l,
      [&](int slot, size_t i) {
        l.data[slot] = grads[i].raw_data();
        l.numel[slot] = grads[i].numel();
      },
      [&](int chunks) { l.first_partial += chunks; });
}

}  // namespace

void MultiTensorAdam(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                     const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<double>& step_sizes,
                     const std::vector<double>& bias_correction2_sqrts, const AdamHyper& h) {
  const size_t n = params.size();
  const bool amsgrad = !max_exp_avg_sqs.empty();
  KILN_CHECK_VALUE(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n &&
                       (!amsgrad || max_exp_avg_sqs.size() == n) && step_sizes.size() == n &&
                       bias_correction2_sqrts.size() == n,
                   "multi-tensor Adam: the lists must have one entry per parameter");
  if (n == 0) return;
  CheckList(params, "multi-tensor Adam");
  for (size_t i = 0; i < n; ++i) {
    CheckTensor(grads[i], params[i], "grads", i);
    CheckTensor(exp_avgs[i], params[i], "exp_avgs", i);
    CheckTensor(exp_avg_sqs[i], params[i], "exp_avg_sqs", i);
    if (amsgrad) CheckTensor(max_exp_avg_sqs[i], params[i], "max_exp_avg_sqs", i);
  }
  AdamLaunch l;
  std::memset(&l, 0, sizeof(l));
  l.lr = h.lr;
  l.beta1 = h.beta1;
  l.beta2 = h.beta2;
  l.eps = h.eps;
  l.weight_decay = h.weight_decay;
  l.decoupled = h.decoupled;
  l.maximize = h.maximize;
  LaunchChunks(
      params, kAdamTensors, OptimKernel("kiln_adam_", params[0], "Adam.step"), l,
      [&](int t, size_t i) {
        l.param[t] = params[i].raw_data();
        l.grad[t] = grads[i].raw_data();
        l.exp_avg[t] = exp_avgs[i].raw_data();
        l.exp_avg_sq[t] = exp_avg_sqs[i].raw_data();
        l.max_exp_avg_sq[t] = amsgrad ? max_exp_avg_sqs[i].raw_data() : nullptr;
        l.numel[t] = params[i].numel();
        l.step_size[t] = step_sizes[i];
        l.bias_correction2_sqrt[t] = bias_correction2_sqrts[i];
      },
      [](int) {});
}

void MultiTensorSgd(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                    const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first, const SgdHyper& h) {
  const char* op = "multi-tensor SGD";
  const size_t n = params.size();
  const bool momentum = !momentum_buffers.empty();
  KILN_CHECK_VALUE(grads.size() == n && (!momentum || (momentum_buffers.size() == n && first.size() == n)),
                   op, ": the lists must have one entry per parameter");
  if (n == 0) return;
  CheckList(params, op);
  for (size_t i = 0; i < n; ++i) {
    CheckTensor(grads[i], params[i], "grads", i, op);
    if (momentum) CheckTensor(momentum_buffers[i], params[i], "momentum_buffers", i, op);
  }
  SgdLaunch l;
  std::memset(&l, 0, sizeof(l));
  l.lr = h.lr;
  l.momentum = h.momentum;
  l.dampening = h.dampening;
  l.weight_decay = h.weight_decay;
  l.nesterov = h.nesterov;
  l.maximize = h.maximize;
  LaunchChunks(
      params, kAdamTensors, OptimKernel("kiln_sgd_", params[0], "SGD.step"), l,
      [&](int t, size_t i) {
        l.param[t] = params[i].raw_data();
        l.grad[t] = grads[i].raw_data();
        l.momentum_buffer[t] = momentum ? momentum_buffers[i].raw_data() : nullptr;
        l.first[t] = momentum && first[i];
        l.numel[t] = params[i].numel();
      },
      [](int) {});
}

Tensor GradNorm(const std::vector<Tensor>& grads) {
  CheckList(grads, "clip_grad_norm_");
  const ScalarType acc = AccOf(grads[0].dtype());
  const int64_t chunks = ChunksOf(grads);
  Tensor partials = EmptyTensor(DimVector{std::max<int64_t>(chunks, 1)}, acc, grads[0].device());
  if (chunks == 0) ops::fill_(partials, Scalar(0.0));  // else every chunk writes its own
  ListLaunch l;
  std::memset(&l, 0, sizeof(l));
  l.partials = partials.raw_data();
  LaunchOverGrads(grads, "kiln_sum_squares_", l);
  return CallOp<Tensor>(KILN_OP("aten::sqrt"), ops::sum(partials, std::nullopt));
}

void ClipGradsByNorm(const std::vector<Tensor>& grads, const Tensor& total_norm, double max_norm) {
  CheckList(grads, "clip_grad_norm_");
  KILN_CHECK_VALUE(total_norm.device() == grads[0].device() && total_norm.dtype() == AccOf(grads[0].dtype()) &&
                       total_norm.numel() == 1,
                   "clip_grad_norm_: the total norm must be GradNorm's");
  ListLaunch l;
  std::memset(&l, 0, sizeof(l));
  l.total_norm = total_norm.raw_data();
  l.max_norm = max_norm;
  LaunchOverGrads(grads, "kiln_clip_scale_", l);
}

}  // namespace kiln::cuda
