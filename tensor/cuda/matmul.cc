// tensor/cuda/matmul.cc: mm and bmm on CUDA through cuBLAS (runtime/cuda/cublas.h), the GEMM
// addmm and baddbmm share with them (GemmInto, cuda_ops.h), and addmm's GEMM with the bias and
// activation in its epilogue through cuBLASLt (GemmEpilogueInto).
//
// Note [Row-major GEMM through cuBLAS]: cuBLAS is column-major. A row-major m x n result C is the
// column-major n x m matrix C^T = B^T A^T, so the call computes (n, m, k) with the operands
// swapped. An operand stored row-major (last stride 1) is, read column-major, its own transpose,
// so it enters untransposed with ld = its row stride; one stored column-major (a .t() view,
// stride[-2] == 1) enters transposed with ld = its column stride. Any other layout is copied
// contiguous first. A batch stride of 0 (an expanded operand) is passed as is.
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/stream.h"
#include "tensor/cuda/cuda_ops.h"
#include "tensor/ops/common.h"

namespace kiln::cuda {
namespace {

BlasDataType BlasType(ScalarType t, const char* kernel) {
  switch (t) {
    case ScalarType::Float32: return BlasDataType::kF32;
    case ScalarType::Float64: return BlasDataType::kF64;
    case ScalarType::Float16: return BlasDataType::kF16;
    case ScalarType::BFloat16: return BlasDataType::kBF16;
    default:
      throw NotImplementedError(StrCat("\"", kernel, "\" not implemented for '", ScalarTypeDisplayName(t), "'"));
  }
}

// How a matrix (the last two dims of t: rows r, cols c) enters cuBLAS, per the Note.
struct Operand {
  Tensor t;  // t itself, or a contiguous copy
  bool transposed = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

Operand Prepare(const Tensor& t) {
  int64_t nd = t.dim();
  int64_t r = t.size(nd - 2), c = t.size(nd - 1);
  int64_t sr = t.stride(nd - 2), sc = t.stride(nd - 1);
  int64_t batch_stride = nd == 3 ? (t.size(0) == 1 ? 0 : t.stride(0)) : 0;
  if ((sc == 1 || c == 1) && sr >= std::max<int64_t>(c, 1)) return Operand{t, false, sr, batch_stride};
  if ((sr == 1 || r == 1) && sc >= std::max<int64_t>(r, 1)) return Operand{t, true, sc, batch_stride};
  Tensor contiguous = ops::contiguous(t);
  return Operand{contiguous, false, std::max<int64_t>(c, 1), nd == 3 ? r * c : 0};
}

// The cuBLAS arguments of out = a @ b per the Note (alpha, beta and the flags left for the caller),
// with the operands they point into (copies when a layout needed one) kept alive alongside.
struct GemmCall {
  Operand a, b;
  GemmArgs args;
};

GemmCall PlanGemm(const Tensor& out, const Tensor& a, const Tensor& b, const char* kernel) {
  KILN_INTERNAL_ASSERT(a.size(-1) > 0, "an empty contraction reaches ", kernel);
  GemmCall call{Prepare(a), Prepare(b), GemmArgs{}};
  const Operand &pa = call.a, &pb = call.b;
  int64_t m = out.size(-2), n = out.size(-1);
  GemmArgs& g = call.args;
  g.trans_a = pb.transposed;  // the swap of the Note: cuBLAS's A is our b
  g.trans_b = pa.transposed;
  g.m = n;
  g.n = m;
  g.k = a.size(-1);
  g.a = pb.t->data();
  g.lda = pb.ld;
  g.stride_a = pb.batch_stride;
  g.b = pa.t->data();
  g.ldb = pa.ld;
  g.stride_b = pa.batch_stride;
  g.c = out->data();
  g.ldc = n;
  g.stride_c = m * n;
  g.batch = out.dim() == 3 ? out.size(0) : 1;
  g.dtype = BlasType(out.dtype(), kernel);
  return call;
}

}  // namespace

// out (batch x m x n, contiguous) = alpha * (a @ b) + beta * out.
void GemmInto(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha,
              const char* kernel, bool convolution) {
  if (out.numel() == 0) return;
  GemmCall call = PlanGemm(out, a, b, kernel);
  call.args.alpha = alpha.to_double();
  call.args.beta = beta.to_double();
  call.args.convolution = convolution;
  Gemm(CurrentStream(out.device().index), call.args);
}

bool GemmEpilogueInto(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor* bias, const Scalar& alpha,
                      LtActivation activation, const char* kernel) {
  KILN_INTERNAL_ASSERT(out.dim() == 2 && out.is_contiguous() && out.numel() > 0, "GemmEpilogueInto's out");
  KILN_INTERNAL_ASSERT(!bias || (bias->dim() == 1 && bias->is_contiguous() && bias->size(0) == out.size(1) &&
                                 bias->dtype() == out.dtype()), "GemmEpilogueInto's bias");
  GemmCall call = PlanGemm(out, a, b, kernel);
  call.args.alpha = alpha.to_double();
  // out's columns are cuBLAS's rows (the Note's swap): the bias runs along them
  return LtGemm(CurrentStream(out.device().index), call.args, bias ? (*bias)->data() : nullptr, activation);
}

namespace {

// mm/bmm: an empty contraction is zeros.
void ProductInto(Tensor out, const Tensor& a, const Tensor& b, const char* kernel) {
  if (out.numel() == 0) return;
  if (a.size(-1) == 0) {
    ops::fill_(out, Scalar(int64_t(0)));
    return;
  }
  GemmInto(out, a, b, Scalar(int64_t(0)), Scalar(int64_t(1)), kernel);
}

Tensor MmCUDA(const Tensor& self, const Tensor& mat2) {
  Tensor out = EmptyFromMeta(MmMeta(self, mat2));
  ProductInto(out, self, mat2, "addmm_cuda");
  return out;
}

Tensor BmmCUDA(const Tensor& self, const Tensor& mat2) {
  Tensor out = EmptyFromMeta(BmmMeta(self, mat2));
  ProductInto(out, self, mat2, "bmm_cuda");
  return out;
}

}  // namespace

void RegisterMatmulKernels(Registry& r) {
  SetCUDAKernel(r, "aten::mm", boxing::WrapKernel<&MmCUDA>());
  SetCUDAKernel(r, "aten::bmm", boxing::WrapKernel<&BmmCUDA>());
}

}  // namespace kiln::cuda
