// runtime/cuda/cublas.cc: the cuBLAS loader, per-thread handles, and the batched GEMM call.
#include "runtime/cuda/cublas.h"

#include <array>
#include <atomic>
#include <limits>
#include <mutex>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

using Status = int;
struct HandleSt;
using Handle = HandleSt*;
constexpr int kOpN = 0, kOpT = 1;
constexpr int kGemmDefault = -1;

struct Cublas {
  bool available = false;
  std::string reason;
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, CUstream) = nullptr;
  const char* (*status_string)(Status) = nullptr;
  Status (*gemm_strided_batched)(Handle, int, int, int, int, int, const void*, const void*, int, int, long long,
                                 const void*, int, int, long long, const void*, void*, int, int, long long, int, int,
                                 int) = nullptr;
};

Cublas* Load() {
  auto* c = new Cublas();
  Library lib = OpenLibraryWithDriver("cuBLAS", "libcublas.so.13", &c->reason);
  if (lib.handle == nullptr) return c;
  auto find = [&](auto& fn, const char* name) { ResolveSymbol(lib, fn, name, &c->reason); };
  find(c->create, "cublasCreate_v2");
  find(c->set_stream, "cublasSetStream_v2");
  find(c->status_string, "cublasGetStatusString");
  find(c->gemm_strided_batched, "cublasGemmStridedBatchedEx");
  c->available = c->reason.empty();
  return c;
}

Cublas& Lib() {
  static Cublas* lib = Load();
  return *lib;
}

std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_conv_allow_tf32{true};

void CheckStatus(Status s, const char* what) {
  if (s == 0) return;
  const char* text = Lib().status_string != nullptr ? Lib().status_string(s) : "unknown";
  throw NamedError("kiln", "AcceleratorError", std::string("CUDA error: ") + text + " when calling `" + what + "`");
}

// One handle per device and thread, created on first use (a handle is not thread-safe).
Handle HandleFor(int device) {
  thread_local std::array<Handle, 64> handles{};
  if (handles[device] == nullptr) {
    EnsureContext(device);
    CheckStatus(Lib().create(&handles[device]), "cublasCreate(handle)");
  }
  return handles[device];
}

int Int32(int64_t v, const char* what) {
  KILN_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "cuBLAS GEMM: ", what, " = ", v,
             " does not fit the 32-bit interface");
  return static_cast<int>(v);
}

}  // namespace

bool CublasAvailable() { return Lib().available; }
const std::string& CublasUnavailableReason() { return Lib().reason; }
void SetAllowTF32(bool allow) { g_allow_tf32 = allow; }
bool AllowTF32() { return g_allow_tf32; }
void SetConvAllowTF32(bool allow) { g_conv_allow_tf32 = allow; }
bool ConvAllowTF32() { return g_conv_allow_tf32; }

void Gemm(const Stream& stream, const GemmArgs& g) {
  KILN_CHECK(CublasAvailable(), Lib().reason);
  Handle h = HandleFor(stream.device);
  CheckStatus(Lib().set_stream(h, stream.handle), "cublasSetStream(handle, stream)");
  // 16-bit and float32 inputs accumulate in float32, as PyTorch's cuBLAS calls do.
  BlasCompute compute = g.dtype == BlasDataType::kF64 ? BlasCompute::k64F
                        : (g.dtype == BlasDataType::kF32 && (g.convolution ? ConvAllowTF32() : AllowTF32())) ? BlasCompute::k32FFastTF32
                                                                         : BlasCompute::k32F;
  float alpha32 = static_cast<float>(g.alpha), beta32 = static_cast<float>(g.beta);
  double alpha64 = g.alpha, beta64 = g.beta;
  const void* alpha = g.dtype == BlasDataType::kF64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = g.dtype == BlasDataType::kF64 ? static_cast<const void*>(&beta64) : &beta32;
  int type = static_cast<int>(g.dtype);
  CheckStatus(Lib().gemm_strided_batched(
                  h, g.trans_a ? kOpT : kOpN, g.trans_b ? kOpT : kOpN, Int32(g.m, "m"), Int32(g.n, "n"),
                  Int32(g.k, "k"), alpha, g.a, type, Int32(g.lda, "lda"), g.stride_a, g.b, type, Int32(g.ldb, "ldb"),
                  g.stride_b, beta, g.c, type, Int32(g.ldc, "ldc"), g.stride_c, Int32(g.batch, "batch"),
                  static_cast<int>(compute), kGemmDefault),
              "cublasGemmStridedBatchedEx");
}

}  // namespace kiln::cuda
