// tensor/cuda/generated_kernels.cc: the compiled-kernel cache and parameter values (generated_kernels.h).
//
// Note [Generated kernel cache]: a kernel is found per device by its codegen::KeyOf (a 128-bit hash
// of the expression, operand dtypes and kinds and layout class, computed without building text: a
// launch's whole host-side cost matters for small tensors). The first launch of a key generates
// PTX (LLVM, a few ms), compiles it for the device with nvJitLink and loads it; later launches find
// the CUfunction in a map. Loaded modules live until exit, as PyTorch's jiterator kernels do. The
// cubin is also kept on disk ($KILN_CUDA_CACHE_DIR, else ~/.cache/kiln/cuda), named by the kernel's
// symbol (which hashes the IR, operand kinds, layout and the code generator's sources and LLVM
// version) and the device's compute capability, so a later process loads it without LLVM or
// nvJitLink.
#include "tensor/cuda/generated_kernels.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/nvjitlink.h"
#include "runtime/disk_cache.h"
#include "runtime/error.h"
#include "tensor/cuda/pointwise.h"

namespace kiln::cuda {
namespace {

struct KeyHash {
  size_t operator()(const std::pair<int, codegen::PointwiseKey>& k) const { return k.second.a ^ size_t(k.first); }
};

struct Cache {
  std::mutex mu;
  std::unordered_map<std::pair<int, codegen::PointwiseKey>, CUfunction, KeyHash> functions;
  std::vector<std::unique_ptr<Module>> modules;
  PointwiseCacheStats stats;
};
Cache& GetCache() {
  static Cache* cache = new Cache;  // never destroyed: modules outlive static destructors' launches
  return *cache;
}

}  // namespace

CUfunction FindOrCompileKernel(int device, const codegen::PointwiseKey& kernel_key, const std::string& name,
                               const std::function<std::string()>& symbol_of, const std::function<std::string()>& ptx) {
  const auto key = std::make_pair(device, kernel_key);
  Cache& cache = GetCache();
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.functions.find(key);
    if (it != cache.functions.end()) {
      ++cache.stats.hits;
      return it->second;
    }
  }
  // Generated outside the lock (another thread may compile the same kernel; the first one stored wins).
  std::string symbol = symbol_of();
  const DeviceProperties& props = GetDeviceProperties(device);
  const std::string path = StrCat(CacheDirectory("KILN_CUDA_CACHE_DIR", "cuda"), "/", symbol, ".sm", props.major,
                                  props.minor, ".cubin");
  std::string cubin;
  bool from_disk = ReadCacheFile(path, &cubin);
  if (!from_disk) {
    KILN_CHECK(NvJitLinkAvailable(), "[", name, "] kiln generates its CUDA kernels at run time and compiles them "
               "with nvJitLink (libnvJitLink.so.13), which was not found: ", NvJitLinkUnavailableReason());
    cubin = CompilePtx(ptx(), props.major, props.minor);
    WriteCacheFile(path, cubin.data(), cubin.size());
  }
  auto module = std::make_unique<Module>(device, cubin);
  CUfunction fn = module->Function(symbol);
  std::lock_guard<std::mutex> lock(cache.mu);
  auto [it, inserted] = cache.functions.emplace(key, fn);
  if (inserted) {
    cache.modules.push_back(std::move(module));
    ++(from_disk ? cache.stats.disk_hits : cache.stats.compiled);
  }
  return it->second;
}

ScalarArg ScalarValue(const Scalar& s, codegen::DType t) {
  ScalarArg a;
  std::memset(&a, 0, sizeof(a));
  codegen::DType c = codegen::ComputeDType(t);
  if (c == codegen::DType::F32) a.f = static_cast<float>(s.to_double());
  else if (c == codegen::DType::F64) a.d = s.to_double();
  else if (s.is_floating()) a.i = static_cast<int64_t>(s.to_double());
  else a.i = s.is_bool() ? int64_t(s.to_bool()) : s.to_int();
  return a;
}


PointwiseCacheStats GetPointwiseCacheStats() {
  Cache& cache = GetCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.stats;
}

}  // namespace kiln::cuda
