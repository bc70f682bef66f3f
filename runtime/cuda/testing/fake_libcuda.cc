// runtime/cuda/testing/fake_libcuda.cc: a stand-in libcuda.so.1 for machines without a GPU (CI),
// so that everything kiln does on the host side of CUDA — loading the driver, contexts, streams,
// events, the caching allocator, copies, pinned memory, errors — runs in tests there.
//
// "Device" memory is host memory, copies and memsets happen at once (every stream is always idle,
// every event complete), and nothing can run a kernel: cuModuleLoadData answers
// CUDA_ERROR_NOT_SUPPORTED. Because a device pointer is a host address here, a host read of device
// memory would pass unnoticed: tests/cuda also runs on the H200 (tools/gpu/test.sh), where it would not.
//
// Knobs: KILN_FAKE_CUDA_DEVICES (default 1), KILN_FAKE_CUDA_MEMORY bytes per device (default 1 GiB),
// KILN_FAKE_CUDA_NOOP_KERNELS=1: modules load and launches succeed without running anything, so a
// whole program walks through every op's host side on a machine without a GPU (an op with no CUDA
// kernel raises as it would on one; with nvJitLink on the library path, generated kernels compile
// too); the values it computes are garbage. KILN_FAKE_CUDA_GUARD_MEMORY=1: device memory is mapped
// PROT_NONE, opened only inside the fake's own copies and memsets, so a host read or write of device
// memory faults here as it does on a GPU (run it with no-op kernels, which touch nothing, under gdb
// to find the reading code).
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

using CUresult = int;
constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kNotInitialized = 3, kInvalidDevice = 101,
                   kInvalidContext = 201, kNotSupported = 801;

struct FakeState {
  std::mutex mu;
  bool initialized = false;
  int devices = 1;
  size_t capacity = size_t(1) << 30;
  std::map<uintptr_t, std::pair<int, size_t>> allocations;  // address -> (device, bytes)
  size_t used[16] = {0};
  int current = -1;  // the context current on the (single) calling thread; good enough for tests
  uintptr_t next_handle = 0x1000;
};

FakeState& S() {
  static FakeState* s = new FakeState();
  return *s;
}

bool GuardMemory() {
  static const bool guard = std::getenv("KILN_FAKE_CUDA_GUARD_MEMORY") != nullptr &&
                            std::string(std::getenv("KILN_FAKE_CUDA_GUARD_MEMORY")) == "1";
  return guard;
}

size_t PageRound(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// The device allocation holding [p, p + bytes), or allocations.end().
std::map<uintptr_t, std::pair<int, size_t>>::iterator AllocationOf(FakeState& s, uintptr_t p) {
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return s.allocations.end();
  --it;
  return p < it->first + it->second.second ? it : s.allocations.end();
}

// Opens (or closes again) the guarded device allocation around p for the fake's own access.
void Protect(uintptr_t p, bool open) {
  if (!GuardMemory()) return;
  FakeState& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = AllocationOf(s, p);
  if (it == s.allocations.end()) return;  // host memory
  mprotect(reinterpret_cast<void*>(it->first), PageRound(it->second.second), open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

// Device memory open for the duration of one of the fake's copies or memsets.
struct Opened {
  uintptr_t a, b;
  Opened(uintptr_t a, uintptr_t b = 0) : a(a), b(b) {
    Protect(a, true);
    if (b) Protect(b, true);
  }
  ~Opened() {
    Protect(a, false);
    if (b) Protect(b, false);
  }
};

size_t EnvSize(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// Context handles encode the device: 0x100 + device.
void* ContextFor(int device) { return reinterpret_cast<void*>(uintptr_t(0x100 + device)); }

}  // namespace

extern "C" {

CUresult cuInit(unsigned) {
  FakeState& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.devices = static_cast<int>(EnvSize("KILN_FAKE_CUDA_DEVICES", 1));
  if (s.devices > 16) s.devices = 16;
  s.capacity = EnvSize("KILN_FAKE_CUDA_MEMORY", size_t(1) << 30);
  s.initialized = true;
  return kSuccess;
}
CUresult cuDriverGetVersion(int* v) { *v = 13000; return kSuccess; }
CUresult cuGetErrorName(CUresult e, const char** name) {
  switch (e) {
    case kSuccess: *name = "CUDA_SUCCESS"; break;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case kInvalidDevice: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case kInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case kNotSupported: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    default: *name = "CUDA_ERROR_UNKNOWN";
  }
  return kSuccess;
}
CUresult cuGetErrorString(CUresult e, const char** text) {
  switch (e) {
    case kOutOfMemory: *text = "out of memory"; break;
    case kInvalidDevice: *text = "invalid device ordinal"; break;
    case kNotSupported: *text = "operation not supported (kiln's fake driver runs no kernels)"; break;
    default: *text = "fake driver error";
  }
  return kSuccess;
}
CUresult cuDeviceGetCount(int* n) { *n = S().initialized ? S().devices : 0; return S().initialized ? kSuccess : kNotInitialized; }
CUresult cuDeviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= S().devices) return kInvalidDevice;
  *d = ordinal;
  return kSuccess;
}
CUresult cuDeviceGetName(char* name, int len, int) { std::strncpy(name, "kiln fake CUDA device", len); return kSuccess; }
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 1: *v = 1024; break;        // max threads per block
    case 10: *v = 32; break;         // warp size
    case 16: *v = 4; break;          // multiprocessors
    case 38: *v = 1 << 20; break;    // L2
    case 39: *v = 2048; break;       // threads per multiprocessor
    case 75: *v = 9; break;          // compute capability
    case 76: *v = 0; break;
    case 97: *v = 227 << 10; break;  // shared memory per block (opt-in)
    default: *v = 0;
  }
  return kSuccess;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, int) { *bytes = S().capacity; return kSuccess; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) { *ctx = ContextFor(dev); return kSuccess; }
CUresult cuCtxSetCurrent(void* ctx) {
  S().current = static_cast<int>(reinterpret_cast<uintptr_t>(ctx) - 0x100);
  return kSuccess;
}
CUresult cuCtxGetCurrent(void** ctx) { *ctx = S().current < 0 ? nullptr : ContextFor(S().current); return kSuccess; }
CUresult cuCtxSynchronize() { return S().current < 0 ? kInvalidContext : kSuccess; }
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  FakeState& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.current < 0) return kInvalidContext;
  *total = s.capacity;
  *free_bytes = s.capacity - s.used[s.current];
  return kSuccess;
}
CUresult cuMemAlloc_v2(unsigned long long* ptr, size_t bytes) {
  FakeState& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.current < 0) return kInvalidContext;
  if (bytes == 0) return kInvalidValue;
  if (s.used[s.current] + bytes > s.capacity) return kOutOfMemory;
  void* p = nullptr;
  if (GuardMemory()) {
    p = mmap(nullptr, PageRound(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return kOutOfMemory;
  } else {
    p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) return kOutOfMemory;
  }
  std::memset(p, 0xA5, bytes);  // never zeros: a test must not pass on memory nothing wrote
  if (GuardMemory()) mprotect(p, PageRound(bytes), PROT_NONE);
  s.allocations[reinterpret_cast<uintptr_t>(p)] = {s.current, bytes};
  s.used[s.current] += bytes;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return kSuccess;
}
CUresult cuMemFree_v2(unsigned long long ptr) {
  FakeState& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.allocations.find(ptr);
  if (it == s.allocations.end()) return kInvalidValue;
  s.used[it->second.first] -= it->second.second;
  if (GuardMemory()) {
    munmap(reinterpret_cast<void*>(ptr), PageRound(it->second.second));
  } else {
    std::free(reinterpret_cast<void*>(ptr));
  }
  s.allocations.erase(it);
  return kSuccess;
}
CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) {
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *p != nullptr ? kSuccess : kOutOfMemory;
}
CUresult cuMemFreeHost(void* p) { std::free(p); return kSuccess; }
CUresult cuMemcpyAsync(unsigned long long dst, unsigned long long src, size_t bytes, void*) {
  Opened open(dst, src);
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}
CUresult cuMemsetD8Async(unsigned long long dst, unsigned char v, size_t n, void*) {
  Opened open(dst);
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return kSuccess;
}
CUresult cuMemsetD16Async(unsigned long long dst, unsigned short v, size_t n, void*) {
  Opened open(dst);
  auto* p = reinterpret_cast<unsigned short*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return kSuccess;
}
CUresult cuMemsetD32Async(unsigned long long dst, unsigned v, size_t n, void*) {
  Opened open(dst);
  auto* p = reinterpret_cast<unsigned*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return kSuccess;
}
CUresult cuStreamCreateWithPriority(void** stream, unsigned, int) {
  std::lock_guard<std::mutex> lock(S().mu);
  *stream = reinterpret_cast<void*>(S().next_handle += 0x10);
  return kSuccess;
}
CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) { *least = 0; *greatest = -5; return kSuccess; }
CUresult cuStreamDestroy_v2(void*) { return kSuccess; }
CUresult cuStreamSynchronize(void*) { return kSuccess; }
CUresult cuStreamQuery(void*) { return kSuccess; }
CUresult cuStreamWaitEvent(void*, void*, unsigned) { return kSuccess; }
CUresult cuEventCreate(void** e, unsigned) {
  *e = new double(0);  // the record time
  return kSuccess;
}
CUresult cuEventDestroy_v2(void* e) { delete static_cast<double*>(e); return kSuccess; }
CUresult cuEventRecord(void* e, void*) {
  static double clock = 0;
  *static_cast<double*>(e) = clock += 0.25;  // each record a quarter millisecond after the last
  return kSuccess;
}
CUresult cuEventQuery(void*) { return kSuccess; }
CUresult cuEventSynchronize(void*) { return kSuccess; }
CUresult cuEventElapsedTime(float* ms, void* start, void* end) {
  *ms = static_cast<float>(*static_cast<double*>(end) - *static_cast<double*>(start));
  return kSuccess;
}
bool NoopKernels() {
  static const bool noop = std::getenv("KILN_FAKE_CUDA_NOOP_KERNELS") != nullptr &&
                           std::string(std::getenv("KILN_FAKE_CUDA_NOOP_KERNELS")) == "1";
  return noop;
}
int noop_handle;  // what a no-op module or function points at
CUresult cuModuleLoadData(void** module, const void*) {
  if (!NoopKernels()) return kNotSupported;
  *module = &noop_handle;
  return kSuccess;
}
CUresult cuModuleUnload(void*) { return NoopKernels() ? kSuccess : kNotSupported; }
CUresult cuModuleGetFunction(void** fn, void*, const char*) {
  if (!NoopKernels()) return kNotSupported;
  *fn = &noop_handle;
  return kSuccess;
}
CUresult cuFuncSetAttribute(void*, int, int) { return NoopKernels() ? kSuccess : kNotSupported; }
CUresult cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                        void**) {
  return NoopKernels() ? kSuccess : kNotSupported;
}

}  // extern "C"
