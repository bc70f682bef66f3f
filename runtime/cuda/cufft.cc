// runtime/cuda/cufft.cc: the cuFFT loader, the plan cache and the transform call.
#include "runtime/cuda/cufft.h"

#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

using Result = int;
using Plan = int;  // cufftHandle
constexpr int kForward = -1, kInverse = 1;

struct Cufft {
  bool available = false;
  std::string reason;
  Result (*plan_1d)(Plan*, int, int, int) = nullptr;
  Result (*set_stream)(Plan, CUstream) = nullptr;
  Result (*exec_c2c)(Plan, void*, void*, int) = nullptr;
  Result (*exec_z2z)(Plan, void*, void*, int) = nullptr;
  Result (*exec_r2c)(Plan, void*, void*) = nullptr;
  Result (*exec_d2z)(Plan, void*, void*) = nullptr;
  Result (*exec_c2r)(Plan, void*, void*) = nullptr;
  Result (*exec_z2d)(Plan, void*, void*) = nullptr;
  Result (*destroy)(Plan) = nullptr;
};

Cufft* Load() {
  auto* c = new Cufft();
  Library lib = OpenLibraryWithDriver("cuFFT", "libcufft.so.12", &c->reason);
  if (lib.handle == nullptr) return c;
  auto find = [&](auto& fn, const char* name) { ResolveSymbol(lib, fn, name, &c->reason); };
  find(c->plan_1d, "cufftPlan1d");
  find(c->set_stream, "cufftSetStream");
  find(c->exec_c2c, "cufftExecC2C");
  find(c->exec_z2z, "cufftExecZ2Z");
  find(c->exec_r2c, "cufftExecR2C");
  find(c->exec_d2z, "cufftExecD2Z");
  find(c->exec_c2r, "cufftExecC2R");
  find(c->exec_z2d, "cufftExecZ2D");
  find(c->destroy, "cufftDestroy");
  c->available = c->reason.empty();
  return c;
}

Cufft& Lib() {
  static Cufft* lib = Load();
  return *lib;
}

void CheckFft(Result r, const char* what) {
  if (r == 0) return;
  throw NamedError("kiln", "AcceleratorError",
                   std::string("cuFFT error: ") + std::to_string(r) + " when calling `" + what + "`");
}

// Plans by (device, type, n, batch); at most kMaxPlans, the cache emptied when full (PyTorch's
// default cache holds 4096 per device; a training loop uses a handful).
constexpr size_t kMaxPlans = 256;
struct PlanCache {
  std::mutex mu;
  std::map<std::tuple<int, int, int64_t, int64_t>, Plan> plans;
};
PlanCache& Plans() {
  static PlanCache* cache = new PlanCache;
  return *cache;
}

int Int32(int64_t v, const char* what) {
  KILN_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "cuFFT: ", what, " = ", v,
             " does not fit its 32-bit interface");
  return static_cast<int>(v);
}

}  // namespace

bool CufftAvailable() { return Lib().available; }
const std::string& CufftUnavailableReason() { return Lib().reason; }

void Fft1d(const Stream& stream, FftType type, int64_t n, int64_t batch, void* in, void* out, bool forward) {
  KILN_CHECK(CufftAvailable(), Lib().reason);
  if (n == 0 || batch == 0) return;
  EnsureContext(stream.device);
  PlanCache& cache = Plans();
  std::lock_guard<std::mutex> lock(cache.mu);  // a plan runs on one stream at a time
  const auto key = std::make_tuple(stream.device, static_cast<int>(type), n, batch);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    if (cache.plans.size() >= kMaxPlans) {
      for (auto& [k, plan] : cache.plans) Lib().destroy(plan);  // queued work keeps what it needs
      cache.plans.clear();
    }
    Plan plan = 0;
    CheckFft(Lib().plan_1d(&plan, Int32(n, "n"), static_cast<int>(type), Int32(batch, "batch")), "cufftPlan1d");
    it = cache.plans.emplace(key, plan).first;
  }
  const Plan plan = it->second;
  CheckFft(Lib().set_stream(plan, stream.handle), "cufftSetStream");
  const int direction = forward ? kForward : kInverse;
  switch (type) {
    case FftType::kC2C: return CheckFft(Lib().exec_c2c(plan, in, out, direction), "cufftExecC2C");
    case FftType::kZ2Z: return CheckFft(Lib().exec_z2z(plan, in, out, direction), "cufftExecZ2Z");
    case FftType::kR2C: return CheckFft(Lib().exec_r2c(plan, in, out), "cufftExecR2C");
    case FftType::kD2Z: return CheckFft(Lib().exec_d2z(plan, in, out), "cufftExecD2Z");
    case FftType::kC2R: return CheckFft(Lib().exec_c2r(plan, in, out), "cufftExecC2R");
    case FftType::kZ2D: return CheckFft(Lib().exec_z2d(plan, in, out), "cufftExecZ2D");
  }
}

}  // namespace kiln::cuda
