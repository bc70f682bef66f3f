// tensor/ops/linalg.cc: matrix products (mm, bmm, addmm, baddbmm, dot, mv, matmul, linear).
//
// Every product reduces to the row-major Gemm of gemm.h: float32/float64 call OpenBLAS, whose
// trans flags and leading dimensions absorb transposed and sliced operands without copies; the
// integer dtypes run a plain loop; float16/bfloat16 compute in float32 and round once at the end,
// as PyTorch's CPU kernels do. matmul, mv and linear are composites over mm/bmm/addmm/dot, so
// tracing and autograd see those ops, never a private kernel. Errors follow PyTorch's wording
// ("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)").
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <string_view>
#include <vector>

#include "runtime/onednn/onednn.h"
#include "runtime/thread_pool.h"
#include "tensor/cuda/cuda_ops.h"
#include "tensor/ops/gemm.h"

namespace kiln {

// --- Gemm ----------------------------------------------------------------------------------------

namespace {

template <typename T>
void GemmLoop(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, opmath_t<T> alpha, const T* a,
              int64_t lda, const T* b, int64_t ldb, opmath_t<T> beta, T* c, int64_t ldc) {
  using M = opmath_t<T>;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, n * std::max<int64_t>(k, 1)));
  ParallelFor(0, m, grain, [&](int64_t lo, int64_t hi) {
    std::vector<M> acc(n);
    for (int64_t i = lo; i < hi; ++i) {
      std::fill(acc.begin(), acc.end(), M(0));
      for (int64_t p = 0; p < k; ++p) {
        const M av = static_cast<M>(trans_a ? a[p * lda + i] : a[i * lda + p]);
        if (trans_b) {
          for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<M>(b[j * ldb + p]);
        } else {
          const T* brow = b + p * ldb;
          for (int64_t j = 0; j < n; ++j) acc[j] += av * static_cast<M>(brow[j]);
        }
      }
      T* crow = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) {
        M v = alpha * acc[j];
        if (beta != M(0)) v += beta * static_cast<M>(crow[j]);
        crow[j] = static_cast<T>(v);
      }
    }
  });
}

bool FitsBlasInt(std::initializer_list<int64_t> xs) {
  for (int64_t x : xs) if (x > INT_MAX) return false;
  return true;
}

}  // namespace

// Note [oneDNN's sgemm]: float products of 2^20 multiply-adds and up (128^3, or a 1x1024 row by
// 1024x1024) run oneDNN's sgemm, where it is loaded (runtime/onednn/) and the CPU has AVX-512: on
// an AVX-512 Xeon it is 5-10% faster than OpenBLAS's at one thread on every product of a GPT
// training step (1024x768x256: 104 -> 113 GFLOP/s) and 4x on a row times a matrix, but slower on
// small ones (setup: an 8^3 product took 6x OpenBLAS's time, 64^3 1.16x). On an AVX2-only AMD EPYC
// it is slower than OpenBLAS on the same products, most on the weight gradient g.t() @ x
// (1024x256 by 1024x1024: 20.2 ms against 7.8) and the 4-layer GPT step took 1.04x PyTorch's
// eager time with it, 0.87x without (tools/bench/gpt_bench.py, KILN_ONEDNN=0 against 1).
// float64 stays OpenBLAS's.
static bool UseOneDnnSgemm(int64_t m, int64_t n, int64_t k) {
  static const bool available = onednn::Get() != nullptr && __builtin_cpu_supports("avx512f");
  return available && static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= double(1 << 20);
}

// Note [One thread pool]: OpenBLAS is told to run single-threaded, and kiln's own pool splits a
// product into blocks of C's columns (or rows), one BLAS call per block. With OpenBLAS's pthreads
// as well, its threads and kiln's briefly spinning workers (Note [Spinning workers]) fought for the
// same cores between an im2col and its GEMM, and a small convolution ran several times slower.
template <typename T>
void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
              const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  static const bool single_threaded_blas = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded_blas;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  auto call = [&](int64_t mm, int64_t nn, const T* aa, const T* bb, T* cc) {
    if constexpr (std::is_same_v<T, float>) {
      if (UseOneDnnSgemm(mm, nn, k)) {
        const onednn::Api& api = *onednn::Get();
        onednn::SetThreads(api, 1);  // one block a kiln worker (Note [One thread pool])
        onednn::Check(api.dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', mm, nn, k, alpha, aa, lda, bb, ldb,
                                     beta, cc, ldc),
                      "dnnl_sgemm");
        return;
      }
      cblas_sgemm(CblasRowMajor, ta, tb, mm, nn, k, alpha, aa, lda, bb, ldb, beta, cc, ldc);
    } else {
      cblas_dgemm(CblasRowMajor, ta, tb, mm, nn, k, alpha, aa, lda, bb, ldb, beta, cc, ldc);
    }
  };
  // At least ~2 MFLOP per block: smaller blocks cost more to hand out than they save.
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int64_t threads = std::min<int64_t>(GetNumThreads(), static_cast<int64_t>(flops / 2e6));
  if (threads <= 1 || InParallelRegion()) {
    call(m, n, a, b, c);
    return;
  }
  if (n >= m) {  // blocks of columns, each a multiple of 16 wide
    const int64_t width = ((n + threads - 1) / threads + 15) / 16 * 16;
    const int64_t blocks = (n + width - 1) / width;
    ParallelFor(0, blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        const int64_t j0 = blk * width, nn = std::min(width, n - j0);
        call(m, nn, a, trans_b ? b + j0 * ldb : b + j0, c + j0);
      }
    });
  } else {  // blocks of rows
    const int64_t height = ((m + threads - 1) / threads + 7) / 8 * 8;
    const int64_t blocks = (m + height - 1) / height;
    ParallelFor(0, blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        const int64_t i0 = blk * height, mm = std::min(height, m - i0);
        call(mm, n, trans_a ? a + i0 : a + i0 * lda, b, c + i0 * ldc);
      }
    });
  }
}

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, opmath_t<T> alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, opmath_t<T> beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (k > 0 && FitsBlasInt({m, n, k, lda, ldb, ldc})) {
      BlasGemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
  }
  GemmLoop<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#define KILN_INSTANTIATE_GEMM(T)                                                                            \
  template void Gemm<T>(bool, bool, int64_t, int64_t, int64_t, opmath_t<T>, const T*, int64_t, const T*, \
                        int64_t, opmath_t<T>, T*, int64_t);
KILN_INSTANTIATE_GEMM(float)
KILN_INSTANTIATE_GEMM(double)
KILN_INSTANTIATE_GEMM(Half)
KILN_INSTANTIATE_GEMM(BFloat16)
KILN_INSTANTIATE_GEMM(uint8_t)
KILN_INSTANTIATE_GEMM(int8_t)
KILN_INSTANTIATE_GEMM(int16_t)
KILN_INSTANTIATE_GEMM(int32_t)
KILN_INSTANTIATE_GEMM(int64_t)
#undef KILN_INSTANTIATE_GEMM

MatrixLayout BlasLayout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (rows == 0 || cols == 0) return {true, false, std::max<int64_t>(cols, 1)};
  // Row-major: element (i, j) at i * ld + j.
  if (col_stride == 1 || cols == 1) {
    int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<int64_t>(cols, 1)) return {true, false, ld};
  }
  // Column-major (a transposed row-major matrix): element (i, j) at i + j * ld.
  if (row_stride == 1 || rows == 1) {
    int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<int64_t>(rows, 1)) return {true, true, ld};
  }
  return {};
}

namespace {

// One operand of a (batched) product, ready for Gemm.
struct GemmOperand {
  Tensor t;  // the view itself, or a contiguous copy when no trans flag/ld describes it
  MatrixLayout layout;
  int64_t batch_stride = 0;
};

GemmOperand PrepareOperand(const Tensor& t, int64_t rows, int64_t cols) {
  const int64_t nd = t.dim();
  MatrixLayout l = BlasLayout(rows, cols, t.stride(nd - 2), t.stride(nd - 1));
  if (l.ok) return {t, l, nd == 3 ? t.stride(0) : 0};
  Tensor c = ops::contiguous(t);
  return {c, BlasLayout(rows, cols, c.stride(nd - 2), c.stride(nd - 1)), nd == 3 ? c.stride(0) : 0};
}

// out (contiguous [B,m,n] or [m,n]) = beta * out + alpha * a @ b, a/b of out's dtype and rank.
void BatchedGemmInto(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha,
                     const char* op) {
  if (out.numel() == 0) return;
  if (IsReducedFloat(out.dtype())) {
    Tensor out32 = beta.to_double() != 0 ? CastTo(out, ScalarType::Float32) : EmptyLike(out, ScalarType::Float32);
    BatchedGemmInto(out32, CastTo(a, ScalarType::Float32), CastTo(b, ScalarType::Float32), beta, alpha, op);
    Tensor o = out;
    ops::copy_(o, out32);
    return;
  }
  const int64_t nd = a.dim();
  const int64_t batch = nd == 3 ? a.size(0) : 1, m = a.size(nd - 2), k = a.size(nd - 1), n = b.size(nd - 1);
  GemmOperand pa = PrepareOperand(a, m, k), pb = PrepareOperand(b, k, n);
  KILN_DISPATCH_NUMERIC(out.dtype(), op, [&] {
    using M = opmath_t<scalar_t>;
    const scalar_t* da = pa.t.data_ptr<scalar_t>();
    const scalar_t* db = pb.t.data_ptr<scalar_t>();
    scalar_t* dc = out.data_ptr<scalar_t>();
    const M al = alpha.to<M>(), be = beta.to<M>();
    for (int64_t i = 0; i < batch; ++i) {
      Gemm<scalar_t>(pa.layout.trans, pb.layout.trans, m, n, k, al, da + i * pa.batch_stride, pa.layout.ld,
                     db + i * pb.batch_stride, pb.layout.ld, be, dc + i * m * n, std::max<int64_t>(n, 1));
    }
  });
}

}  // namespace

// --- Checks and meta functions -------------------------------------------------------------------

const char* CppTypeName(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "bool";
    case ScalarType::UInt8: return "unsigned char";
    case ScalarType::Int8: return "signed char";
    case ScalarType::Int16: return "short int";
    case ScalarType::Int32: return "int";
    case ScalarType::Int64: return "long int";
    case ScalarType::Float16: return "c10::Half";
    case ScalarType::BFloat16: return "c10::BFloat16";
    case ScalarType::Float32: return "float";
    case ScalarType::Float64: return "double";
    default: return "?";
  }
}

namespace {

using OptTensor = std::optional<Tensor>;
using SymList = std::vector<SymInt>;

std::string MatStr(const Tensor& t) {
  return t->sym_sizes()[0].str() + "x" + t->sym_sizes()[1].str();
}

// mm compares its operands' dtypes in its kernel, after the shape checks, with this wording.
void CheckMatmulDtype(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), "expected m1 and m2 to have the same dtype, but got: ", CppTypeName(a.dtype()),
             " != ", CppTypeName(b.dtype()));
  CheckSameDevice(op, a, b);
}

void CheckMatrix(const char* name, const Tensor& t) {
  KILN_CHECK(t.dim() == 2, name, " must be a matrix, got ", t.dim(), "-D tensor");
}

// [m, n] of mat1 @ mat2, after the shape checks addmm and mm share.
SymDimVector MmSizes(const Tensor& mat1, const Tensor& mat2, const char* n1, const char* n2) {
  CheckMatrix(n1, mat1);
  CheckMatrix(n2, mat2);
  KILN_CHECK(mat1->sym_sizes()[1] == mat2->sym_sizes()[0], "mat1 and mat2 shapes cannot be multiplied (",
             MatStr(mat1), " and ", MatStr(mat2), ")");
  return {mat1->sym_sizes()[0], mat2->sym_sizes()[1]};
}

// Note [Product kernel order]: PyTorch's addmm/bmm/baddbmm kernels, once the shapes are known,
// return an empty result at once; with an empty contraction (k == 0) they zero the result (bmm,
// or beta == 0) or scale it in place by beta (result.mul_(beta), whose cast check is then the only
// dtype check: a Bool result with the default beta=1 fails it); otherwise their dtype dispatch
// refuses Bool, and bmm/baddbmm then read batch2 as batch1's type. The metas check the same, in the
// same order, so fake tensors and compiled code raise what eager raises. `like` has the result's
// dtype; `kernel` is the name PyTorch's dispatch reports.
void CheckProductKernel(const char* kernel, const SymDimVector& out_sizes, const SymInt& k, const Tensor& like,
                        const Scalar* beta, const Tensor& b1, const Tensor* b2) {
  for (const SymInt& s : out_sizes) if (s == 0) return;
  if (k == 0) {
    if (beta == nullptr || beta->to_double() == 0) return;
    const ScalarType scaled = ResultType(like, *beta);
    KILN_CHECK(CanCast(scaled, like.dtype()), "result type ", ScalarTypeDisplayName(scaled),
               " can't be cast to the desired output type ", ScalarTypeDisplayName(like.dtype()));
    return;
  }
  KILN_CHECK_NOT_IMPLEMENTED(b1.dtype() != ScalarType::Bool, "\"", kernel, "\" not implemented for 'Bool'");
  KILN_CHECK(b2 == nullptr || b1.dtype() == b2->dtype(), "expected scalar type ", ScalarTypeDisplayName(b1.dtype()),
             " but found ", ScalarTypeDisplayName(b2->dtype()));
}

SymDimVector BmmSizes(const Tensor& b1, const Tensor& b2, const char* op) {
  KILN_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  KILN_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  const SymDimVector& s1 = b1->sym_sizes();
  const SymDimVector& s2 = b2->sym_sizes();
  KILN_CHECK(s2[0] == s1[0] && s2[1] == s1[2], "Expected size for first two dimensions of batch2 tensor to be: [",
             s1[0].str(), ", ", s1[2].str(), "] but got: [", s2[0].str(), ", ", s2[1].str(), "].");
  CheckSameDevice(op, b1, b2);
  return {s1[0], s1[1], s2[2]};
}

// `self` of addmm/baddbmm must expand to the product's shape (expand's errors, as in PyTorch).
void CheckAddend(const Tensor& self, const SymDimVector& sizes) {
  ops::expand(self, SymList(sizes.begin(), sizes.end()));
}

}  // namespace

TensorMeta MmMeta(const Tensor& self, const Tensor& mat2) {
  SymDimVector sizes = MmSizes(self, mat2, "self", "mat2");
  CheckMatmulDtype("mm", self, mat2);
  CheckProductKernel("addmm_impl_cpu_", sizes, self->sym_sizes()[1], self, nullptr, self, nullptr);
  return TensorMeta{sizes, {}, self.dtype(), self.device()};
}
// bmm's result has batch2's dtype, as PyTorch's meta gives it; the dtypes are compared only when
// there is work (Note [Product kernel order]).
TensorMeta BmmMeta(const Tensor& self, const Tensor& mat2) {
  SymDimVector sizes = BmmSizes(self, mat2, "bmm");
  CheckProductKernel("bmm", sizes, self->sym_sizes()[2], mat2, nullptr, self, &mat2);
  return TensorMeta{sizes, {}, mat2.dtype(), self.device()};
}

namespace {

TensorMeta AddmmMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                     const Scalar& alpha) {
  KILN_CHECK(self.dtype() == mat2.dtype(), "self and mat2 must have the same dtype, but got ",
             ScalarTypeDisplayName(self.dtype()), " and ", ScalarTypeDisplayName(mat2.dtype()));
  KILN_CHECK(mat1.dtype() == mat2.dtype(), "mat1 and mat2 must have the same dtype, but got ",
             ScalarTypeDisplayName(mat1.dtype()), " and ", ScalarTypeDisplayName(mat2.dtype()));
  SymDimVector sizes = MmSizes(mat1, mat2, "mat1", "mat2");
  CheckSameDevice("addmm", mat1, mat2);
  CheckSameDevice("addmm", mat1, self);
  CheckAddend(self, sizes);
  CheckProductKernel("addmm_impl_cpu_", sizes, mat1->sym_sizes()[1], mat1, &beta, mat1, nullptr);
  (void)alpha;
  return TensorMeta{sizes, {}, mat1.dtype(), mat1.device()};
}
// Tensor.size(d)'s errors: PyTorch's baddbmm reads batch1.size(0), batch1.size(1) and batch2.size(2)
// (to expand self) before it checks that both are 3-d, so a 0-d or 1-d batch fails there first.
void CheckHasDim(const Tensor& t, int64_t d) {
  KILN_CHECK_INDEX(t.dim() > 0, "Dimension specified as 0 but tensor has no dimensions");
  WrapDim(d, t.dim());
}

TensorMeta BaddbmmMeta(const Tensor& self, const Tensor& b1, const Tensor& b2, const Scalar& beta,
                       const Scalar& alpha) {
  CheckHasDim(b1, 0);
  CheckHasDim(b1, 1);
  CheckHasDim(b2, 2);
  KILN_CHECK(self.dtype() == b1.dtype(), "Input dtypes must be the same, got: input ", CppTypeName(self.dtype()),
             ", batch1: ", CppTypeName(b1.dtype()), ", batch2: ", CppTypeName(b2.dtype()));
  SymDimVector sizes = BmmSizes(b1, b2, "baddbmm");
  CheckSameDevice("baddbmm", b1, self);
  CheckAddend(self, sizes);
  CheckProductKernel("baddbmm", sizes, b1->sym_sizes()[2], b2, &beta, b1, &b2);
  (void)alpha;
  return TensorMeta{sizes, {}, b2.dtype(), b1.device()};
}
TensorMeta DotMeta(const Tensor& self, const Tensor& other) {
  KILN_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
             other.dim(), "D tensors");
  KILN_CHECK(self.dtype() == other.dtype(), "dot : expected both vectors to have same dtype, but found ",
             ScalarTypeDisplayName(self.dtype()), " and ", ScalarTypeDisplayName(other.dtype()));
  KILN_CHECK(self->sym_sizes()[0] == other->sym_sizes()[0],
             "inconsistent tensor size, expected tensor [", self->sym_sizes()[0].str(), "] and src [",
             other->sym_sizes()[0].str(), "] to have the same number of elements, but got ",
             self->sym_sizes()[0].str(), " and ", other->sym_sizes()[0].str(), " elements respectively");
  KILN_CHECK_NOT_IMPLEMENTED(self.dtype() != ScalarType::Bool, "\"dot\" not implemented for 'Bool'");
  CheckSameDevice("dot", self, other);
  return TensorMeta{{}, {}, self.dtype(), self.device()};
}

// --- CPU kernels -----------------------------------------------------------------------------------

// The metas have made every check (Note [Product kernel order]): an empty result returns at once,
// an empty contraction gives zeros, or beta * self for addmm/baddbmm.
Tensor ProductCPU(const TensorMeta& m, const Tensor& a, const Tensor& b, const char* kernel) {
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  if (a.size(-1) == 0) return ops::zeros_like(out);
  BatchedGemmInto(out, a, b, 0, 1, kernel);
  return out;
}

Tensor MmCPU(const Tensor& self, const Tensor& mat2) {
  return ProductCPU(MmMeta(self, mat2), self, mat2, "addmm_impl_cpu_");
}

Tensor BmmCPU(const Tensor& self, const Tensor& mat2) { return ProductCPU(BmmMeta(self, mat2), self, mat2, "bmm"); }

// Whether addmm's out = self + alpha * (a @ b) can add self in cuBLASLt's bias epilogue (PyTorch's
// condition for it: a CUDA matrix result, beta 1, self a contiguous vector of out's columns in out's
// floating dtype, and no dimension of 1, which cuBLASLt's heuristics handle poorly).
bool BiasEpilogueFits(const Tensor& out, const Tensor& self, const Tensor& a, const Scalar& beta) {
  return out.device().is_cuda() && out.dim() == 2 && !beta.is_complex() && beta.to_double() == 1.0 &&
         self.dim() == 1 && self.is_contiguous() && self.size(0) == out.size(1) && self.dtype() == out.dtype() &&
         IsFloating(out.dtype()) && out.size(0) > 1 && out.size(1) > 1 && a.size(-1) > 1;
}

// out = beta * self + alpha * (product), self broadcast to the product's shape.
Tensor AddProduct(const TensorMeta& m, const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                  const Scalar& alpha, const char* op) {
  Tensor out = EmptyFromMeta(m);
  if (out.numel() == 0) return out;
  if (BiasEpilogueFits(out, self, a, beta) &&
      cuda::GemmEpilogueInto(out, a, b, &self, alpha, cuda::LtActivation::kNone, op)) {
    return out;
  }
  const bool use_self = beta.to_double() != 0;
  if (use_self) ops::copy_(out, self);  // copy_ broadcasts self into out
  if (a.size(-1) == 0) {
    if (!use_self) return ops::fill_(out, Scalar(int64_t(0)));
    return CallOp<Tensor>(KILN_OP("aten::mul_.Scalar"), out, beta);
  }
  if (out.device().is_cuda()) cuda::GemmInto(out, a, b, use_self ? beta : Scalar(int64_t(0)), alpha, op);
  else BatchedGemmInto(out, a, b, use_self ? beta : Scalar(int64_t(0)), alpha, op);
  return out;
}

// _addmm_activation: relu or GELU of addmm, PyTorch's fused linear + activation (no derivative, as
// PyTorch's). Its CPU kernel applies the exact GELU; its CUDA kernel the tanh approximation, which
// is what cuBLASLt's GELU epilogue computes.
TensorMeta AddmmActivationMeta(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                               const Scalar& alpha, bool) {
  return AddmmMeta(self, mat1, mat2, beta, alpha);
}
Tensor AddmmActivation(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                       const Scalar& alpha, bool use_gelu) {
  const TensorMeta m = AddmmMeta(self, mat1, mat2, beta, alpha);
  const bool cuda = m.device.is_cuda();
  if (cuda) {
    Tensor out = EmptyFromMeta(m);
    if (out.numel() > 0 && BiasEpilogueFits(out, self, mat1, beta) &&
        cuda::GemmEpilogueInto(out, mat1, mat2, &self, alpha,
                               use_gelu ? cuda::LtActivation::kGelu : cuda::LtActivation::kRelu, "addmm")) {
      return out;
    }
  }
  Tensor out = AddProduct(m, self, mat1, mat2, beta, alpha, "addmm");
  if (!use_gelu) return CallOp<Tensor>(KILN_OP("aten::relu_"), out);
  return CallOp<Tensor>(KILN_OP("aten::gelu_"), out, std::string(cuda ? "tanh" : "none"));
}

Tensor AddmmCPU(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                const Scalar& alpha) {
  return AddProduct(AddmmMeta(self, mat1, mat2, beta, alpha), self, mat1, mat2, beta, alpha, "addmm");
}

Tensor BaddbmmCPU(const Tensor& self, const Tensor& b1, const Tensor& b2, const Scalar& beta,
                  const Scalar& alpha) {
  return AddProduct(BaddbmmMeta(self, b1, b2, beta, alpha), self, b1, b2, beta, alpha, "baddbmm");
}

template <typename T>
T DotTyped(const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(0), sa = a.stride(0), sb = b.stride(0);
  const T* x = a.data_ptr<T>();
  const T* y = b.data_ptr<T>();
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (n > 0 && sa > 0 && sb > 0 && FitsBlasInt({n, sa, sb})) {
      if constexpr (std::is_same_v<T, float>) return cblas_sdot(n, x, sa, y, sb);
      else return cblas_ddot(n, x, sa, y, sb);
    }
  }
  using M = opmath_t<T>;
  M acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<M>(x[i * sa]) * static_cast<M>(y[i * sb]);
  return static_cast<T>(acc);
}

Tensor DotCPU(const Tensor& self, const Tensor& other) {
  Tensor out = EmptyFromMeta(DotMeta(self, other));
  if (out.device().is_cuda()) {  // a 1 x n by n x 1 GEMM through cuBLAS
    const int64_t n = self.numel();
    if (n == 0) return ops::fill_(out, Scalar(int64_t(0)));
    cuda::GemmInto(ops::view(out, {SymInt(1), SymInt(1)}), ops::view(self, {SymInt(1), SymInt(n)}),
                   ops::view(other, {SymInt(n), SymInt(1)}), Scalar(int64_t(0)), Scalar(int64_t(1)), "dot");
    return out;
  }
  KILN_DISPATCH_NUMERIC(self.dtype(), "dot", [&] { out.data_ptr<scalar_t>()[0] = DotTyped<scalar_t>(self, other); });
  return out;
}

// --- Composites ----------------------------------------------------------------------------------

Tensor Mm(const Tensor& a, const Tensor& b) { return CallOp<Tensor>(KILN_OP("aten::mm"), a, b); }
Tensor Bmm(const Tensor& a, const Tensor& b) { return CallOp<Tensor>(KILN_OP("aten::bmm"), a, b); }
Tensor Dot(const Tensor& a, const Tensor& b) { return CallOp<Tensor>(KILN_OP("aten::dot"), a, b); }

SymList ToList(const SymDimVector& v) { return SymList(v.begin(), v.end()); }

Tensor Mv(const Tensor& self, const Tensor& vec) {
  CheckHasDim(self, 0);  // PyTorch's addmv reads self.size(0) first: IndexError for a 0-d self
  KILN_CHECK(self.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got 1, ", self.dim(), ", ",
             vec.dim());
  KILN_CHECK(self->sym_sizes()[1] == vec->sym_sizes()[0], "size mismatch, got input (", self->sym_sizes()[0].str(),
             "), mat (", MatStr(self), "), vec (", vec->sym_sizes()[0].str(), ")");
  // PyTorch's mv is addmv into a result of vec's dtype: its kernel compares all three dtypes, and
  // refuses Bool only when the matrix is not empty
  KILN_CHECK(self.dtype() == vec.dtype(), "addmv input tensors must have the same dtype, but got ",
             ScalarTypeDisplayName(vec.dtype()), ", ", ScalarTypeDisplayName(self.dtype()), ", and ",
             ScalarTypeDisplayName(vec.dtype()));
  KILN_CHECK_NOT_IMPLEMENTED(self.dtype() != ScalarType::Bool || self->sym_numel() == 0,
                             "\"addmv_impl_cpu\" not implemented for 'Bool'");
  return ops::squeeze(Mm(self, ops::unsqueeze(vec, 1)), 1);
}

// torch.matmul: dot, mv, mm, or a batched product with broadcast batch dims (Note [matmul] below).
//
// Note [matmul]: a 1-D operand gets a size-1 dim (prepended on the left, appended on the right)
// that is dropped from the result. When one operand has >= 3 dims and the other <= 2, the larger
// one's batch dims may fold into rows, giving one mm (or mv) instead of a bmm over an expanded
// copy; PyTorch's rule for when (ShouldFold) is followed exactly, because which kernel runs is
// visible: mm compares the dtypes always, bmm only when there is work ([3, 5] float64 @
// [3, 5, 0] float32 is an empty float32 result unless the matrix requires grad). Otherwise the
// batch dims broadcast, both sides are expanded and flattened to 3-D, and one bmm runs.
bool ShouldFold(const Tensor& a, const Tensor& b) {
  const bool a_larger = a.dim() >= b.dim();
  const Tensor& smaller = a_larger ? b : a;
  if (!((a_larger ? a : b).dim() >= 3 && (smaller.dim() == 1 || smaller.dim() == 2))) return false;
  // folding copies the larger operand when it is not row-contiguous, but not folding would
  // materialise a batch of the smaller one's gradients in backward
  if (smaller->requires_grad()) return true;
  if (a.dim() == 2) return false;  // the folded result would need a transposing copy
  const Tensor t1 = a_larger ? a : ops::transpose(b, -2, -1);
  const SymDimVector& sizes = t1->sym_sizes();
  const SymDimVector& strides = t1->sym_strides();
  for (const SymInt& n : sizes) {
    if (n == 0) return true;
  }
  for (size_t i = 0; i + 2 < sizes.size(); ++i) {
    if (strides[i] != strides[i + 1] * sizes[i + 1]) return false;
  }
  return true;
}

Tensor Matmul(const Tensor& a, const Tensor& b) {
  const int64_t da = a.dim(), db = b.dim();
  KILN_CHECK(da > 0 && db > 0, "both arguments to matmul need to be at least 1D, but they are ", da, "D and ", db,
             "D");
  if (da == 1 && db == 1) return Dot(a, b);
  if (da == 2 && db == 1) return Mv(a, b);
  if (da == 1 && db == 2) return ops::squeeze(Mm(ops::unsqueeze(a, 0), b), 0);
  if (da == 2 && db == 2) return Mm(a, b);
  const SymDimVector& sa = a->sym_sizes();
  const SymDimVector& sb = b->sym_sizes();
  if (ShouldFold(a, b)) {
    // (b^T @ a^T)^T when b is the larger: its batch dims fold into the rows
    const bool transpose = db > da;
    const Tensor t1 = transpose ? ops::transpose(b, -2, -1) : a;
    const Tensor t2 = !transpose ? b : da == 2 ? ops::transpose(a, 0, 1) : a;
    const SymDimVector& s1 = t1->sym_sizes();
    SymList out_shape(s1.begin(), s1.end() - 1);
    // the folded row count spelled out: -1 is ambiguous when k is 0 ([3, 5, 0] @ [0])
    SymInt nrows = 1;
    for (const SymInt& s : out_shape) nrows = nrows * s;
    Tensor rows = ops::reshape(t1, {nrows, s1.back()});
    if (t2.dim() == 1) return ops::view(Mv(rows, t2), out_shape);
    out_shape.push_back(t2->sym_sizes()[1]);
    Tensor prod = ops::view(Mm(rows, t2), out_shape);
    return transpose ? ops::contiguous(ops::transpose(prod, -2, -1)) : prod;
  }
  // A 3-D operand with a batch of 1 that requires grad, against another batch size, drops that
  // batch dim and folds, as PyTorch's matmul does (its gradient is then one mm, not a bmm over a
  // broadcast copy and a sum; and mm checks dtypes even when the product is empty).
  if (da == 3 && db == 3 && sa[0] != sb[0]) {
    if (sa[0] == 1 && a->requires_grad()) return Matmul(ops::squeeze(a, 0), b);
    if (sb[0] == 1 && b->requires_grad()) return Matmul(a, ops::squeeze(b, 0));
  }
  const SymInt n = da >= 2 ? sa[da - 2] : SymInt(1), k = sa[da - 1];
  const SymInt k2 = db >= 2 ? sb[db - 2] : sb[0], p = db >= 2 ? sb[db - 1] : SymInt(1);
  SymDimVector batch_a(sa.begin(), sa.end() - std::min<int64_t>(da, 2));
  SymDimVector batch_b(sb.begin(), sb.end() - std::min<int64_t>(db, 2));
  SymDimVector batch = BroadcastShapes("matmul", batch_a, batch_b);
  SymInt nbatch = 1;
  for (const SymInt& s : batch) nbatch = nbatch * s;
  SymList ea = ToList(batch), eb = ToList(batch);
  ea.insert(ea.end(), {n, k});
  eb.insert(eb.end(), {k2, p});
  Tensor a3 = ops::reshape(ops::expand(da == 1 ? ops::unsqueeze(a, 0) : a, ea), {nbatch, n, k});
  Tensor b3 = ops::reshape(ops::expand(db == 1 ? ops::unsqueeze(b, 1) : b, eb), {nbatch, k2, p});
  Tensor prod = Bmm(a3, b3);
  SymList out_shape = ToList(batch);
  if (da >= 2) out_shape.push_back(n);
  if (db >= 2) out_shape.push_back(p);
  return ops::view(prod, out_shape);
}

// torch.nn.functional.linear: input @ weight.T + bias (one addmm for 2-D input with bias).
// PyTorch's linear: a matrix input with a bias is one addmm; so is any other contiguous input with a
// vector bias, flattened to a matrix and viewed back (its _flatten_nd_linear), which puts the bias
// in the GEMM's epilogue on CUDA; the rest is matmul, then the bias added.
Tensor Linear(const Tensor& input, const Tensor& weight, const OptTensor& bias) {
  Tensor wt = CallOp<Tensor>(KILN_OP("aten::t"), weight);
  const Scalar one(int64_t(1));
  if (input.dim() == 2 && bias && bias->defined()) {
    return CallOp<Tensor>(KILN_OP("aten::addmm"), *bias, input, wt, one, one);
  }
  if (bias && bias->defined() && bias->dim() == 1 && input.dim() >= 1 && input.is_contiguous()) {
    const SymDimVector& sizes = input->sym_sizes();
    SymInt rows(1);
    for (size_t d = 0; d + 1 < sizes.size(); ++d) rows = rows * sizes[d];
    const Tensor flat = ops::view(input, {rows, sizes.back()});
    const Tensor out = CallOp<Tensor>(KILN_OP("aten::addmm"), *bias, flat, wt, one, one);
    std::vector<SymInt> out_sizes(sizes.begin(), sizes.end() - 1);
    out_sizes.push_back(out->sym_sizes()[1]);
    return ops::view(out, out_sizes);
  }
  Tensor out = Matmul(input, wt);
  if (bias && bias->defined()) out = ops::add(out, *bias);
  return out;
}

}  // namespace

void RegisterLinalgOps(Registry& r) {
  r.Def("mm(Tensor self, Tensor mat2) -> Tensor", {Tag::core, Tag::compute_intensive}, kFunctionAndMethod)
      .Impl<&MmCPU>(DispatchKey::CPU).Meta<&MmMeta>();
  r.Def("bmm(Tensor self, Tensor mat2) -> Tensor", {Tag::core, Tag::compute_intensive}, kFunctionAndMethod)
      .Impl<&BmmCPU>(DispatchKey::CPU).Meta<&BmmMeta>();
  r.Def("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
        {Tag::core, Tag::compute_intensive}, kFunctionAndMethod)
      .CPUAndCUDA<&AddmmCPU>().Meta<&AddmmMeta>();
  r.Def("_addmm_activation(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, "
        "bool use_gelu=False) -> Tensor", {Tag::compute_intensive}, kFunctionAndMethod)
      .CPUAndCUDA<&AddmmActivation>().Meta<&AddmmActivationMeta>();
  r.Def("baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
        {Tag::core, Tag::compute_intensive}, kFunctionAndMethod)
      .CPUAndCUDA<&BaddbmmCPU>().Meta<&BaddbmmMeta>();
  r.Def("dot(Tensor self, Tensor tensor) -> Tensor", {Tag::compute_intensive}, kFunctionAndMethod)
      .CPUAndCUDA<&DotCPU>().Meta<&DotMeta>();
  r.Def("mv(Tensor self, Tensor vec) -> Tensor", {Tag::compute_intensive}, kFunctionAndMethod).Composite<&Mv>();
  r.Def("matmul(Tensor self, Tensor other) -> Tensor", {Tag::compute_intensive}, kFunctionAndMethod)
      .Composite<&Matmul>();
  r.Def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", {Tag::compute_intensive}, kFunction)
      .Composite<&Linear>();
}

}  // namespace kiln
