// runtime/cuda/cublaslt.cc: the cuBLASLt loader, per-thread handles, and GEMMs with a bias/ReLU/GELU
// epilogue.
//
// Note [cuBLASLt plans]: a cuBLASLt call needs a matmul descriptor, four matrix layouts and an
// algorithm from the heuristic query, which costs more host time than the launch itself. They
// depend only on the problem (sizes, leading dims, transposes, dtype, compute type, epilogue) and
// on the operands' pointer alignment (told to the heuristic: an algorithm may need more), so each thread
// keeps them per such key and sets only the bias pointer per call. A problem with no algorithm is
// remembered too, and LtGemm returns false for it at once.
#include "runtime/cuda/cublaslt.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <unordered_map>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

using Status = int;
using Handle = void*;
using MatmulDesc = void*;
using Layout = void*;
using Preference = void*;
struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
  Algo algo;
  size_t workspace_size;
  Status state;
  float waves_count;
  int reserved[4];
};

// Values of CUDA 13's cublasLt.h.
constexpr int kDescComputeType = 0, kDescTransA = 3, kDescTransB = 4, kDescEpilogue = 7, kDescBiasPointer = 8;
constexpr int kPrefMaxWorkspaceBytes = 1, kPrefMinAlignmentA = 5, kPrefMinAlignmentB = 6, kPrefMinAlignmentC = 7,
              kPrefMinAlignmentD = 8;
constexpr uint32_t kEpilogueDefault = 1, kEpilogueRelu = 2, kEpilogueBias = 4, kEpilogueGelu = 32;
constexpr int kScaleF32 = 0, kScaleF64 = 1;
constexpr uint64_t kMaxWorkspace = 32ull << 20;  // PyTorch's cuBLASLt workspace on Hopper

struct CublasLt {
  bool available = false;
  std::string reason;
  Status (*create)(Handle*) = nullptr;
  const char* (*status_string)(Status) = nullptr;
  Status (*desc_create)(MatmulDesc*, int compute, int scale) = nullptr;
  Status (*desc_destroy)(MatmulDesc) = nullptr;
  Status (*desc_set)(MatmulDesc, int attribute, const void* value, size_t size) = nullptr;
  Status (*layout_create)(Layout*, int type, uint64_t rows, uint64_t cols, int64_t ld) = nullptr;
  Status (*layout_destroy)(Layout) = nullptr;
  Status (*pref_create)(Preference*) = nullptr;
  Status (*pref_destroy)(Preference) = nullptr;
  Status (*pref_set)(Preference, int attribute, const void* value, size_t size) = nullptr;
  Status (*heuristic)(Handle, MatmulDesc, Layout, Layout, Layout, Layout, Preference, int requested,
                      HeuristicResult* results, int* returned) = nullptr;
  Status (*matmul)(Handle, MatmulDesc, const void* alpha, const void* a, Layout, const void* b, Layout,
                   const void* beta, const void* c, Layout, void* d, Layout, const Algo*, void* workspace,
                   size_t workspace_size, CUstream) = nullptr;
};

CublasLt* Load() {
  auto* c = new CublasLt();
  Library lib = OpenLibraryWithDriver("cuBLASLt", "libcublasLt.so.13", &c->reason);
  if (lib.handle == nullptr) return c;
  auto find = [&](auto& fn, const char* name) { ResolveSymbol(lib, fn, name, &c->reason); };
  find(c->create, "cublasLtCreate");
  find(c->status_string, "cublasLtGetStatusString");
  find(c->desc_create, "cublasLtMatmulDescCreate");
  find(c->desc_destroy, "cublasLtMatmulDescDestroy");
  find(c->desc_set, "cublasLtMatmulDescSetAttribute");
  find(c->layout_create, "cublasLtMatrixLayoutCreate");
  find(c->layout_destroy, "cublasLtMatrixLayoutDestroy");
  find(c->pref_create, "cublasLtMatmulPreferenceCreate");
  find(c->pref_destroy, "cublasLtMatmulPreferenceDestroy");
  find(c->pref_set, "cublasLtMatmulPreferenceSetAttribute");
  find(c->heuristic, "cublasLtMatmulAlgoGetHeuristic");
  find(c->matmul, "cublasLtMatmul");
  c->available = c->reason.empty();
  return c;
}

CublasLt& Lib() {
  static CublasLt* lib = Load();
  return *lib;
}

void CheckLt(Status s, const char* what) {
  if (s == 0) return;
  const char* text = Lib().status_string != nullptr ? Lib().status_string(s) : "unknown";
  throw NamedError("kiln", "AcceleratorError", std::string("CUDA error: ") + text + " when calling `" + what + "`");
}

Handle HandleFor(int device) {
  thread_local std::array<Handle, 64> handles{};
  if (handles[device] == nullptr) {
    EnsureContext(device);
    CheckLt(Lib().create(&handles[device]), "cublasLtCreate(handle)");
  }
  return handles[device];
}

// The largest power of two (up to 256, what the heuristic assumes unless told) dividing the address.
uint32_t Alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

using Key = std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, uint32_t,
                       uint32_t, uint32_t, uint32_t>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 0;
    auto mix = [&](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    std::apply([&](auto... v) { (mix(static_cast<uint64_t>(v)), ...); }, k);
    return h;
  }
};

struct Plan {
  bool found = false;
  MatmulDesc desc = nullptr;
  Layout a = nullptr, b = nullptr, d = nullptr;
  Algo algo{};
  size_t workspace = 0;
};

// Creates the descriptors of key's problem and asks the heuristic for one algorithm.
Plan MakePlan(Handle h, const GemmArgs& g, int compute, uint32_t epilogue) {
  CublasLt& lt = Lib();
  Plan p;
  const int type = static_cast<int>(g.dtype);
  CheckLt(lt.desc_create(&p.desc, compute, g.dtype == BlasDataType::kF64 ? kScaleF64 : kScaleF32),
        "cublasLtMatmulDescCreate");
  const int32_t ta = g.trans_a ? 1 : 0, tb = g.trans_b ? 1 : 0;
  CheckLt(lt.desc_set(p.desc, kDescTransA, &ta, sizeof(ta)), "cublasLtMatmulDescSetAttribute(TRANSA)");
  CheckLt(lt.desc_set(p.desc, kDescTransB, &tb, sizeof(tb)), "cublasLtMatmulDescSetAttribute(TRANSB)");
  CheckLt(lt.desc_set(p.desc, kDescEpilogue, &epilogue, sizeof(epilogue)), "cublasLtMatmulDescSetAttribute(EPILOGUE)");
  // the stored matrices: A is m x k (k x m when transposed), B k x n (n x k), D m x n
  CheckLt(lt.layout_create(&p.a, type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda), "cublasLtMatrixLayoutCreate(A)");
  CheckLt(lt.layout_create(&p.b, type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb), "cublasLtMatrixLayoutCreate(B)");
  CheckLt(lt.layout_create(&p.d, type, g.m, g.n, g.ldc), "cublasLtMatrixLayoutCreate(D)");
  Preference pref = nullptr;
  CheckLt(lt.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  CheckLt(lt.pref_set(pref, kPrefMaxWorkspaceBytes, &kMaxWorkspace, sizeof(kMaxWorkspace)),
          "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  // the operands' actual alignment (the heuristic assumes 256 bytes, and an algorithm picked for that
  // fails on a tensor at an element offset)
  const uint32_t align_a = Alignment(g.a), align_b = Alignment(g.b), align_c = Alignment(g.c);
  CheckLt(lt.pref_set(pref, kPrefMinAlignmentA, &align_a, sizeof(align_a)), "cublasLtMatmulPreferenceSetAttribute(A)");
  CheckLt(lt.pref_set(pref, kPrefMinAlignmentB, &align_b, sizeof(align_b)), "cublasLtMatmulPreferenceSetAttribute(B)");
  CheckLt(lt.pref_set(pref, kPrefMinAlignmentC, &align_c, sizeof(align_c)), "cublasLtMatmulPreferenceSetAttribute(C)");
  CheckLt(lt.pref_set(pref, kPrefMinAlignmentD, &align_c, sizeof(align_c)), "cublasLtMatmulPreferenceSetAttribute(D)");
  HeuristicResult result{};
  int returned = 0;
  // a problem cuBLASLt does not support comes back as an error status: no plan, not a failure
  const Status s = lt.heuristic(h, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &returned);
  lt.pref_destroy(pref);
  p.found = s == 0 && returned > 0 && result.state == 0;
  p.algo = result.algo;
  p.workspace = result.workspace_size;
  return p;
}

void Destroy(Plan& p) {
  Lib().layout_destroy(p.a);
  Lib().layout_destroy(p.b);
  Lib().layout_destroy(p.d);
  Lib().desc_destroy(p.desc);
}

std::atomic<int64_t> g_lt_gemms{0};

struct PlanCache {
  std::unordered_map<Key, Plan, KeyHash> plans;
  ~PlanCache() { Clear(); }
  void Clear() {
    for (auto& [key, plan] : plans) Destroy(plan);
    plans.clear();
  }
};

}  // namespace

bool CublasLtAvailable() { return Lib().available; }
const std::string& CublasLtUnavailableReason() { return Lib().reason; }

bool LtGemm(const Stream& stream, const GemmArgs& g, const void* bias, LtActivation activation) {
  if (!CublasLtAvailable()) return false;
  KILN_INTERNAL_ASSERT(g.batch == 1, "cuBLASLt GEMMs here are not batched");
  // as Gemm's: float32 in TF32 when allowed, 16-bit and float32 inputs accumulate in float32
  const BlasCompute compute = g.dtype == BlasDataType::kF64 ? BlasCompute::k64F
                              : (g.dtype == BlasDataType::kF32 && AllowTF32()) ? BlasCompute::k32FFastTF32
                                                                             : BlasCompute::k32F;
  uint32_t epilogue = activation == LtActivation::kRelu ? kEpilogueRelu
                      : activation == LtActivation::kGelu ? kEpilogueGelu : kEpilogueDefault;
  if (bias != nullptr) epilogue = epilogue == kEpilogueDefault ? kEpilogueBias : (epilogue | kEpilogueBias);
  // the heuristic is told the matrices' alignment but not the bias's: a bias off 16 bytes takes the
  // caller's unfused path
  if (bias != nullptr && Alignment(bias) < 16) return false;
  const Key key{stream.device, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, static_cast<int>(g.dtype),
                static_cast<int>(compute), epilogue, Alignment(g.a), Alignment(g.b), Alignment(g.c)};
  Handle h = HandleFor(stream.device);
  thread_local PlanCache cache;
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    if (cache.plans.size() >= 1024) cache.Clear();  // a bound for programs with ever-changing shapes
    it = cache.plans.emplace(key, MakePlan(h, g, static_cast<int>(compute), epilogue)).first;
  }
  Plan& plan = it->second;
  if (!plan.found) return false;
  if (bias != nullptr) {
    CheckLt(Lib().desc_set(plan.desc, kDescBiasPointer, &bias, sizeof(bias)), "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  float alpha32 = static_cast<float>(g.alpha), beta32 = 0;
  double alpha64 = g.alpha, beta64 = 0;
  const bool f64 = g.dtype == BlasDataType::kF64;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
  // the workspace comes from the caching allocator on this stream, so it is not reused before the
  // GEMM that reads it has run
  DataPtr workspace = plan.workspace > 0 ? GetCUDAAllocator(stream.device)->Allocate(plan.workspace) : DataPtr();
  CheckLt(Lib().matmul(h, plan.desc, alpha, g.a, plan.a, g.b, plan.b, beta, g.c, plan.d, g.c, plan.d, &plan.algo,
                     workspace.get(), plan.workspace, stream.handle),
        "cublasLtMatmul");
  ++g_lt_gemms;
  return true;
}

int64_t LtGemmCount() { return g_lt_gemms; }

}  // namespace kiln::cuda
