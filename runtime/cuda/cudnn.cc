// runtime/cuda/cudnn.cc: the cuDNN loader, per-thread handles, and the three convolution passes
// with their descriptors and the heuristic's algorithms cached per problem.
#include "runtime/cuda/cudnn.h"

#include <array>
#include <atomic>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

using Status = int;
struct HandleSt;
struct TensorDescSt;
struct FilterDescSt;
struct ConvDescSt;
using Handle = HandleSt*;
using TensorDesc = TensorDescSt*;
using FilterDesc = FilterDescSt*;
using ConvDesc = ConvDescSt*;

// Values of cuDNN 9's headers (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h).
constexpr int kFormatNCHW = 0, kFormatNHWC = 1;
constexpr int kCrossCorrelation = 1;
constexpr int kDefaultMath = 0, kTensorOpMath = 1, kFmaMath = 3;
constexpr int kDeterministic = 1;
constexpr int kMaxAlgorithms = 8;

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: one layout for the three passes.
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

using GetAlgorithms = Status (*)(Handle, const void*, const void*, ConvDesc, const void*, int, int*, AlgoPerf*);

struct Cudnn {
  bool available = false;
  std::string reason;
  size_t (*version)() = nullptr;
  const char* (*error_string)(Status) = nullptr;
  Status (*create)(Handle*) = nullptr;
  Status (*set_stream)(Handle, CUstream) = nullptr;
  Status (*tensor_create)(TensorDesc*) = nullptr;
  Status (*tensor_set)(TensorDesc, int, int, const int*, const int*) = nullptr;
  Status (*tensor_destroy)(TensorDesc) = nullptr;
  Status (*filter_create)(FilterDesc*) = nullptr;
  Status (*filter_set)(FilterDesc, int, int, int, const int*) = nullptr;
  Status (*filter_destroy)(FilterDesc) = nullptr;
  Status (*conv_create)(ConvDesc*) = nullptr;
  Status (*conv_set)(ConvDesc, int, const int*, const int*, const int*, int, int) = nullptr;
  Status (*conv_groups)(ConvDesc, int) = nullptr;
  Status (*conv_math)(ConvDesc, int) = nullptr;
  Status (*conv_destroy)(ConvDesc) = nullptr;
  // forward: (handle, x, w, conv, y, ...); backward data: (handle, w, dy, conv, dx, ...);
  // backward filter: (handle, x, dy, conv, dw, ...)
  Status (*fwd_algorithms)(Handle, TensorDesc, FilterDesc, ConvDesc, TensorDesc, int, int*, AlgoPerf*) = nullptr;
  Status (*bwd_data_algorithms)(Handle, FilterDesc, TensorDesc, ConvDesc, TensorDesc, int, int*, AlgoPerf*) = nullptr;
  Status (*bwd_filter_algorithms)(Handle, TensorDesc, TensorDesc, ConvDesc, FilterDesc, int, int*, AlgoPerf*) = nullptr;
  Status (*forward)(Handle, const void*, TensorDesc, const void*, FilterDesc, const void*, ConvDesc, int, void*, size_t,
                    const void*, TensorDesc, void*) = nullptr;
  Status (*backward_data)(Handle, const void*, FilterDesc, const void*, TensorDesc, const void*, ConvDesc, int, void*,
                          size_t, const void*, TensorDesc, void*) = nullptr;
  Status (*backward_filter)(Handle, const void*, TensorDesc, const void*, TensorDesc, const void*, ConvDesc, int, void*,
                            size_t, const void*, FilterDesc, void*) = nullptr;
};

Cudnn* Load() {
  auto* c = new Cudnn();
  Library lib = OpenLibraryWithDriver("cuDNN", "libcudnn.so.9", &c->reason);
  if (lib.handle == nullptr) return c;
  auto find = [&](auto& fn, const char* name) { ResolveSymbol(lib, fn, name, &c->reason); };
  find(c->version, "cudnnGetVersion");
  find(c->error_string, "cudnnGetErrorString");
  find(c->create, "cudnnCreate");
  find(c->set_stream, "cudnnSetStream");
  find(c->tensor_create, "cudnnCreateTensorDescriptor");
  find(c->tensor_set, "cudnnSetTensorNdDescriptor");
  find(c->tensor_destroy, "cudnnDestroyTensorDescriptor");
  find(c->filter_create, "cudnnCreateFilterDescriptor");
  find(c->filter_set, "cudnnSetFilterNdDescriptor");
  find(c->filter_destroy, "cudnnDestroyFilterDescriptor");
  find(c->conv_create, "cudnnCreateConvolutionDescriptor");
  find(c->conv_set, "cudnnSetConvolutionNdDescriptor");
  find(c->conv_groups, "cudnnSetConvolutionGroupCount");
  find(c->conv_math, "cudnnSetConvolutionMathType");
  find(c->conv_destroy, "cudnnDestroyConvolutionDescriptor");
  find(c->fwd_algorithms, "cudnnGetConvolutionForwardAlgorithm_v7");
  find(c->bwd_data_algorithms, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  find(c->bwd_filter_algorithms, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  find(c->forward, "cudnnConvolutionForward");
  find(c->backward_data, "cudnnConvolutionBackwardData");
  find(c->backward_filter, "cudnnConvolutionBackwardFilter");
  c->available = c->reason.empty();
  return c;
}

Cudnn& Lib() {
  static Cudnn* lib = Load();
  return *lib;
}

void CheckDnn(Status s, const char* what) {
  if (s == 0) return;
  const char* text = Lib().error_string != nullptr ? Lib().error_string(s) : "unknown";
  throw NamedError("kiln", "AcceleratorError", std::string("cuDNN error: ") + text + " when calling `" + what + "`");
}

Handle HandleFor(int device) {
  thread_local std::array<Handle, 64> handles{};
  if (handles[device] == nullptr) {
    EnsureContext(device);
    CheckDnn(Lib().create(&handles[device]), "cudnnCreate(handle)");
  }
  return handles[device];
}

bool ToInts(const int64_t* v, int n, int* out) {
  for (int i = 0; i < n; ++i) {
    if (v[i] < 0 || v[i] > std::numeric_limits<int>::max()) return false;
    out[i] = static_cast<int>(v[i]);
  }
  return true;
}

struct Candidate {
  int algo;
  size_t workspace;
  int math_type;
};

struct Plan {
  TensorDesc x = nullptr, y = nullptr;  // x and y (dx and dy in the backward passes)
  FilterDesc w = nullptr;
  ConvDesc conv = nullptr;
  std::vector<Candidate> candidates;  // the heuristic's order, usable ones only
  int math_type = -1;                 // what `conv` is set to now
};

void Destroy(Plan& p) {
  Cudnn& c = Lib();
  if (p.x) c.tensor_destroy(p.x);
  if (p.y) c.tensor_destroy(p.y);
  if (p.w) c.filter_destroy(p.w);
  if (p.conv) c.conv_destroy(p.conv);
}

// Forced for float32 without TF32 (PyTorch's CUDNN_FMA_MATH); otherwise the algorithm's own.
int MathTypeFor(const CudnnConvProblem& pr, int algo_math) {
  if (pr.dtype == CudnnType::kF32 && !pr.allow_tf32) return kFmaMath;
  return algo_math;
}

// Descriptors and the usable algorithms of one problem and pass; empty candidates if none (or
// the sizes do not fit cuDNN's 32-bit interface).
Plan MakePlan(Handle h, const CudnnConvProblem& pr, CudnnPass pass) {
  Cudnn& c = Lib();
  Plan p;
  int xs[4], xst[4], ws[4], ys[4], yst[4];
  if (!ToInts(pr.x_sizes, 4, xs) || !ToInts(pr.x_strides, 4, xst) || !ToInts(pr.w_sizes, 4, ws) ||
      !ToInts(pr.y_sizes, 4, ys) || !ToInts(pr.y_strides, 4, yst)) {
    return p;
  }
  const int type = static_cast<int>(pr.dtype);
  const int compute = pr.dtype == CudnnType::kF64 ? static_cast<int>(CudnnType::kF64) : static_cast<int>(CudnnType::kF32);
  CheckDnn(c.tensor_create(&p.x), "cudnnCreateTensorDescriptor");
  CheckDnn(c.tensor_create(&p.y), "cudnnCreateTensorDescriptor");
  CheckDnn(c.filter_create(&p.w), "cudnnCreateFilterDescriptor");
  CheckDnn(c.conv_create(&p.conv), "cudnnCreateConvolutionDescriptor");
  CheckDnn(c.tensor_set(p.x, type, 4, xs, xst), "cudnnSetTensorNdDescriptor(x)");
  CheckDnn(c.tensor_set(p.y, type, 4, ys, yst), "cudnnSetTensorNdDescriptor(y)");
  CheckDnn(c.filter_set(p.w, type, pr.w_nhwc ? kFormatNHWC : kFormatNCHW, 4, ws), "cudnnSetFilterNdDescriptor");
  CheckDnn(c.conv_set(p.conv, 2, pr.pad, pr.stride, pr.dilation, kCrossCorrelation, compute),
        "cudnnSetConvolutionNdDescriptor");
  CheckDnn(c.conv_groups(p.conv, pr.groups), "cudnnSetConvolutionGroupCount");
  // 16-bit floats on tensor cores; float32 as the flag says (the heuristic then ranks for it)
  const int math = pr.dtype == CudnnType::kF16 || pr.dtype == CudnnType::kBF16 ? kTensorOpMath
                   : MathTypeFor(pr, kDefaultMath);
  CheckDnn(c.conv_math(p.conv, math), "cudnnSetConvolutionMathType");
  p.math_type = math;
  std::array<AlgoPerf, kMaxAlgorithms> perf{};
  int returned = 0;
  Status s = 0;
  switch (pass) {
    case CudnnPass::kForward:
      s = c.fwd_algorithms(h, p.x, p.w, p.conv, p.y, kMaxAlgorithms, &returned, perf.data());
      break;
    case CudnnPass::kBackwardData:  // dx (x's descriptor) from dy (y's)
      s = c.bwd_data_algorithms(h, p.w, p.y, p.conv, p.x, kMaxAlgorithms, &returned, perf.data());
      break;
    case CudnnPass::kBackwardFilter:  // dw from x and dy (y's descriptor)
      s = c.bwd_filter_algorithms(h, p.x, p.y, p.conv, p.w, kMaxAlgorithms, &returned, perf.data());
      break;
  }
  if (s != 0) return p;  // a problem cuDNN does not support: no plan, not a failure
  for (int i = 0; i < returned; ++i) {
    const AlgoPerf& a = perf[i];
    if (a.status != 0) continue;
    if (pr.deterministic && a.determinism != kDeterministic) continue;
    p.candidates.push_back({a.algo, a.memory, MathTypeFor(pr, a.math_type)});
  }
  return p;
}

using Key = std::tuple<int, int, int, std::array<int64_t, 20>, bool, std::array<int, 7>, bool, bool>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 0;
    auto mix = [&](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(std::get<0>(k));
    mix(std::get<1>(k));
    mix(std::get<2>(k));
    for (int64_t v : std::get<3>(k)) mix(static_cast<uint64_t>(v));
    mix(std::get<4>(k));
    for (int v : std::get<5>(k)) mix(static_cast<uint64_t>(v));
    mix(std::get<6>(k));
    mix(std::get<7>(k));
    return h;
  }
};

Key KeyOf(int device, const CudnnConvProblem& pr, CudnnPass pass) {
  std::array<int64_t, 20> shape{};
  for (int i = 0; i < 4; ++i) {
    shape[i] = pr.x_sizes[i];
    shape[4 + i] = pr.x_strides[i];
    shape[8 + i] = pr.w_sizes[i];
    shape[12 + i] = pr.y_sizes[i];
    shape[16 + i] = pr.y_strides[i];
  }
  const std::array<int, 7> conv{pr.pad[0], pr.pad[1], pr.stride[0], pr.stride[1], pr.dilation[0], pr.dilation[1], pr.groups};
  return Key{device, static_cast<int>(pass), static_cast<int>(pr.dtype), shape, pr.w_nhwc, conv, pr.allow_tf32,
             pr.deterministic};
}

struct PlanCache {
  std::unordered_map<Key, Plan, KeyHash> plans;
  ~PlanCache() { Clear(); }
  void Clear() {
    for (auto& [key, plan] : plans) Destroy(plan);
    plans.clear();
  }
};

std::atomic<int64_t> g_convolutions{0};

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool CudnnAvailable() { return Lib().available; }
const std::string& CudnnUnavailableReason() { return Lib().reason; }
int64_t CudnnVersion() { return CudnnAvailable() ? static_cast<int64_t>(Lib().version()) : 0; }

bool CudnnConvolution(const Stream& stream, const CudnnConvProblem& pr, CudnnPass pass, const void* a, const void* b,
                      void* out) {
  if (!CudnnAvailable()) return false;
  // the legacy API's algorithms are chosen for aligned tensors; one at an element offset takes the
  // caller's kernels
  if (!Aligned16(a) || !Aligned16(b) || !Aligned16(out)) return false;
  Handle h = HandleFor(stream.device);
  thread_local PlanCache cache;
  const Key key = KeyOf(stream.device, pr, pass);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    if (cache.plans.size() >= 1024) cache.Clear();  // a bound for programs with ever-changing shapes
    it = cache.plans.emplace(key, MakePlan(h, pr, pass)).first;
  }
  Plan& plan = it->second;
  if (plan.candidates.empty()) return false;
  Cudnn& c = Lib();
  CheckDnn(c.set_stream(h, stream.handle), "cudnnSetStream");
  float one32 = 1, zero32 = 0;
  double one64 = 1, zero64 = 0;
  const bool f64 = pr.dtype == CudnnType::kF64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const Candidate& cand = plan.candidates[i];
    // the workspace comes from the caching allocator on this stream (freed after the launch, reused
    // only by later work on the stream); an algorithm whose workspace does not fit gives way to the
    // next, as PyTorch's selection does
    DataPtr workspace;
    if (cand.workspace > 0) {
      try {
        workspace = GetCUDAAllocator(stream.device)->Allocate(cand.workspace);
      } catch (const std::exception&) {
        if (i + 1 < plan.candidates.size()) continue;
        throw;
      }
    }
    if (plan.math_type != cand.math_type) {
      CheckDnn(c.conv_math(plan.conv, cand.math_type), "cudnnSetConvolutionMathType");
      plan.math_type = cand.math_type;
    }
    switch (pass) {
      case CudnnPass::kForward:
        CheckDnn(c.forward(h, alpha, plan.x, a, plan.w, b, plan.conv, cand.algo, workspace.get(), cand.workspace, beta,
                        plan.y, out),
              "cudnnConvolutionForward");
        break;
      case CudnnPass::kBackwardData:
        CheckDnn(c.backward_data(h, alpha, plan.w, b, plan.y, a, plan.conv, cand.algo, workspace.get(), cand.workspace,
                              beta, plan.x, out),
              "cudnnConvolutionBackwardData");
        break;
      case CudnnPass::kBackwardFilter:
        CheckDnn(c.backward_filter(h, alpha, plan.x, a, plan.y, b, plan.conv, cand.algo, workspace.get(), cand.workspace,
                                beta, plan.w, out),
              "cudnnConvolutionBackwardFilter");
        break;
    }
    ++g_convolutions;
    return true;
  }
  return false;
}

int64_t CudnnConvolutionCount() { return g_convolutions; }

}  // namespace kiln::cuda
