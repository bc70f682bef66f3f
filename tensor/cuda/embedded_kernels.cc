// tensor/cuda/embedded_kernels.cc: loading the embedded fat binaries (embedded_kernels.h).
#include "tensor/cuda/embedded_kernels.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"
#include "tensor/cuda/kernels/row_args.h"

namespace kiln::cuda {

// Each fat binary: the byte array third_party/system.bzl's compile_fatbin.sh writes, and its accessor.
#define KILN_EMBEDDED_FATBIN(Name, file)                                                 \
  extern const unsigned char k##Name[];                                                  \
  extern const size_t k##Name##Size;                                                     \
  const EmbeddedFatbin& Name() {                                                         \
    static const EmbeddedFatbin f{"tensor/cuda/kernels/" file, k##Name, k##Name##Size}; \
    return f;                                                                            \
  }
KILN_EMBEDDED_FATBIN(RandomKernels, "random.cu")
KILN_EMBEDDED_FATBIN(IndexKernels, "index.cu")
KILN_EMBEDDED_FATBIN(IndexedKernels, "indexed.cu")
KILN_EMBEDDED_FATBIN(LossKernels, "loss.cu")
KILN_EMBEDDED_FATBIN(OptimKernels, "optim.cu")
KILN_EMBEDDED_FATBIN(ConvPoolKernels, "conv_pool.cu")
KILN_EMBEDDED_FATBIN(SoftmaxKernels, "softmax.cu")
KILN_EMBEDDED_FATBIN(LayerNormKernels, "layer_norm.cu")
KILN_EMBEDDED_FATBIN(ScanKernels, "scan.cu")
KILN_EMBEDDED_FATBIN(SortKernels, "sort.cu")
#undef KILN_EMBEDDED_FATBIN

namespace {

struct Cache {
  std::mutex mu;
  std::map<std::pair<int, const unsigned char*>, std::unique_ptr<Module>> modules;
  std::map<std::tuple<int, const unsigned char*, std::string>, CUfunction> functions;
};
Cache& GetCache() {
  static Cache* cache = new Cache;  // never destroyed, as the generated kernels' (generated_kernels.cc)
  return *cache;
}

}  // namespace

CUfunction EmbeddedKernel(const EmbeddedFatbin& fatbin, int device, const char* kernel, const char* op) {
  KILN_CHECK(fatbin.size > 0, "[", op, "] this build of kiln has no CUDA kernels for it: ", fatbin.file,
             " is compiled by nvcc at build time, and no CUDA toolkit was found then (set KILN_CUDA_HOME and "
             "rebuild)");
  Cache& cache = GetCache();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto key = std::make_tuple(device, fatbin.data, std::string(kernel));
  auto it = cache.functions.find(key);
  if (it != cache.functions.end()) return it->second;
  std::unique_ptr<Module>& module = cache.modules[{device, fatbin.data}];
  if (!module) module = std::make_unique<Module>(device, std::string(reinterpret_cast<const char*>(fatbin.data),
                                                                    fatbin.size));
  CUfunction fn = module->Function(kernel);
  cache.functions.emplace(std::move(key), fn);
  return fn;
}

const char* KernelSuffix(ScalarType t) {
  switch (t) {
    case ScalarType::Float16: return "f16";
    case ScalarType::BFloat16: return "bf16";
    case ScalarType::Float32: return "f32";
    case ScalarType::Float64: return "f64";
    case ScalarType::Bool: return "b8";
    case ScalarType::UInt8: return "u8";
    case ScalarType::Int8: return "i8";
    case ScalarType::Int16: return "i16";
    case ScalarType::Int32: return "i32";
    case ScalarType::Int64: return "i64";
    default:  // the ops check their dtypes first; this keeps a missed one a typed error
      throw NotImplementedError(StrCat("kiln has no CUDA kernel for '", ScalarTypeDisplayName(t), "' here"));
  }
  return "";
}

void LaunchGrid(CUfunction fn, int device, int64_t n, std::vector<void*>& args) {
  if (n <= 0) return;
  constexpr int64_t kThreads = 256;
  // 8 blocks of 256 threads per SM keep an H200 full (2048 threads per SM); more only adds blocks
  // that start after the first ones finish.
  const int64_t most = int64_t(GetDeviceProperties(device).multi_processor_count) * 8;
  const int64_t blocks = std::min((n + kThreads - 1) / kThreads, std::max<int64_t>(most, 1));
  Launch(fn, static_cast<unsigned>(blocks), kThreads, 0, CurrentStream(device), args);
}

bool RowKernelFits(ScalarType dtype, int64_t n) {
  const int64_t threads = ElementSize(dtype) == 8 ? kRowMaxThreads64 : kRowMaxThreads;
  return n > 0 && n <= threads * kRowPerThread;
}

bool RowKernelVectorizable(int64_t n, const std::vector<const Tensor*>& tensors) {
  const int64_t width = ElementSize(tensors[0]->dtype()) == 8 ? 1 : 4;  // rows.cuh's VecWidth
  bool vec = n % width == 0;
  for (const Tensor* t : tensors) {
    if (t) vec = vec && reinterpret_cast<uintptr_t>(t->raw_data()) % (width * ElementSize(t->dtype())) == 0;
  }
  return vec;
}

void LaunchRowKernel(CUfunction fn, int device, int64_t rows, int64_t n, std::vector<void*>& args) {
  if (rows <= 0) return;
  int64_t threads = 32;
  while (threads * kRowPerThread < n) threads *= 2;
  const int64_t rows_per_block = std::max<int64_t>(1, 256 / threads);
  const int64_t blocks = std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, int64_t(1) << 20);
  const LaunchDims dims{static_cast<unsigned>(blocks), 1, static_cast<unsigned>(threads),
                        static_cast<unsigned>(rows_per_block)};
  Launch(fn, dims, CurrentStream(device), args);
}

}  // namespace kiln::cuda
