// runtime/cuda/driver.cc: loading libcuda, contexts, device properties, error mapping.
#include "runtime/cuda/driver.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct DriverState {
  bool available = false;
  std::string reason;
  std::string path;
  DriverApi api;
  int version = 0;
  int device_count = 0;
  std::array<std::once_flag, kMaxDevices> context_once;
  std::array<CUcontext, kMaxDevices> contexts{};
  std::array<std::once_flag, kMaxDevices> properties_once;
  std::array<DeviceProperties, kMaxDevices> properties;
};

std::string ErrorText(const DriverApi& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName != nullptr) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString != nullptr) api.cuGetErrorString(r, &text);
  std::string out = text != nullptr ? text : "unknown error";
  out += " (";
  out += name != nullptr ? name : "CUDA error " + std::to_string(r);
  out += ")";
  return out;
}

DriverState* Load() {
  auto* s = new DriverState();  // never destroyed: frees of device memory may come at exit
  Library lib = OpenLibrary("libcuda.so.1");
  if (lib.handle == nullptr) {
    s->reason = "Found no NVIDIA driver on your system: libcuda.so.1 could not be loaded (" + lib.error + ")";
    return s;
  }
  s->path = lib.path;
#define KILN_CUDA_RESOLVE(name, symbol, ret, params)                              \
  s->api.name = reinterpret_cast<ret(*) params>(FindSymbol(lib.handle, symbol)); \
  if (s->api.name == nullptr) {                                                 \
    s->reason = std::string(lib.path) + " lacks " symbol ": the driver is too old for kiln"; \
    return s;                                                                   \
  }
  KILN_CUDA_DRIVER_FUNCTIONS(KILN_CUDA_RESOLVE)
#undef KILN_CUDA_RESOLVE
  if (CUresult r = s->api.cuInit(0); r != CUDA_SUCCESS) {
    s->reason = "cuInit failed: " + ErrorText(s->api, r);
    return s;
  }
  s->api.cuDriverGetVersion(&s->version);
  if (CUresult r = s->api.cuDeviceGetCount(&s->device_count); r != CUDA_SUCCESS || s->device_count == 0) {
    s->reason = "the NVIDIA driver found no CUDA device";
    s->device_count = 0;
    return s;
  }
  if (s->device_count > kMaxDevices) s->device_count = kMaxDevices;
  s->available = true;
  return s;
}

DriverState& State() {
  static DriverState* state = Load();
  return *state;
}

thread_local int tls_current_device = 0;
std::atomic<bool> g_initialized{false};

void CheckDeviceIndex(int device) {
  DriverState& s = State();
  if (device < 0 || device >= s.device_count)
    throw NamedError("kiln", "AcceleratorError",
                     "CUDA error: invalid device ordinal (device " + std::to_string(device) + " of " +
                         std::to_string(s.device_count) + " CUDA devices)");
}

// DeviceMemoryOps through the driver: the caching allocator's view of one device.
class DriverMemory final : public DeviceMemoryOps {
 public:
  explicit DriverMemory(int device) : device_(device) {}
  bool Malloc(void** ptr, size_t bytes) override {
    EnsureContext(device_);
    CUdeviceptr p = 0;
    CUresult r = Api().cuMemAlloc(&p, bytes);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
    Check(r, "cuMemAlloc");
    *ptr = reinterpret_cast<void*>(p);
    return true;
  }
  void Free(void* ptr) override {
    EnsureContext(device_);
    Check(Api().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)), "cuMemFree");
  }
  void MemGetInfo(size_t* free_bytes, size_t* total_bytes) override {
    EnsureContext(device_);
    Check(Api().cuMemGetInfo(free_bytes, total_bytes), "cuMemGetInfo");
  }
  EventHandle CreateEvent() override {
    EnsureContext(device_);
    CUevent e = nullptr;
    Check(Api().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    return reinterpret_cast<EventHandle>(e);
  }
  void DestroyEvent(EventHandle e) override { Check(Api().cuEventDestroy(reinterpret_cast<CUevent>(e)), "cuEventDestroy"); }
  void RecordEvent(EventHandle e, StreamHandle s) override {
    Check(Api().cuEventRecord(reinterpret_cast<CUevent>(e), reinterpret_cast<CUstream>(s)), "cuEventRecord");
  }
  bool QueryEvent(EventHandle e) override {
    CUresult r = Api().cuEventQuery(reinterpret_cast<CUevent>(e));
    if (r == CUDA_ERROR_NOT_READY) return false;
    Check(r, "cuEventQuery");
    return true;
  }
  void SynchronizeEvent(EventHandle e) override {
    Check(Api().cuEventSynchronize(reinterpret_cast<CUevent>(e)), "cuEventSynchronize");
  }
  void SynchronizeDevice() override {
    EnsureContext(device_);
    Check(Api().cuCtxSynchronize(), "cuCtxSynchronize");
  }

 private:
  int device_;
};

}  // namespace

bool Available() { return State().available; }
bool Initialized() { return g_initialized; }
const std::string& UnavailableReason() { return State().reason; }
int DeviceCount() { return State().device_count; }
int DriverVersion() { return State().version; }
const std::string& DriverLibraryPath() { return State().path; }

const DriverApi& Api() {
  DriverState& s = State();
  if (!s.available) throw Error(s.reason);
  return s.api;
}

void Check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const DriverApi& api = State().api;
  std::string msg = "CUDA error: " + ErrorText(api, result) + " in " + what;
  if (result == CUDA_ERROR_OUT_OF_MEMORY) throw NamedError("kiln", "OutOfMemoryError", msg);
  throw NamedError("kiln", "AcceleratorError", msg);
}

void EnsureContext(int device) {
  Api();
  CheckDeviceIndex(device);
  DriverState& s = State();
  std::call_once(s.context_once[device], [&] {
    CUdevice dev = 0;
    Check(s.api.cuDeviceGet(&dev, device), "cuDeviceGet");
    Check(s.api.cuDevicePrimaryCtxRetain(&s.contexts[device], dev), "cuDevicePrimaryCtxRetain");
    g_initialized = true;
  });
  // Setting the context costs a driver call; skip it when this thread already has it.
  thread_local CUcontext tls_context = nullptr;
  if (tls_context != s.contexts[device]) {
    Check(s.api.cuCtxSetCurrent(s.contexts[device]), "cuCtxSetCurrent");
    tls_context = s.contexts[device];
  }
}

int CurrentDevice() {
  Api();
  return tls_current_device;
}

void SetCurrentDevice(int device) {
  Api();
  CheckDeviceIndex(device);
  tls_current_device = device;
}

const DeviceProperties& GetDeviceProperties(int device) {
  Api();
  CheckDeviceIndex(device);
  DriverState& s = State();
  std::call_once(s.properties_once[device], [&] {
    CUdevice dev = 0;
    Check(s.api.cuDeviceGet(&dev, device), "cuDeviceGet");
    DeviceProperties& p = s.properties[device];
    char name[256] = {0};
    Check(s.api.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
    p.name = name;
    auto attr = [&](int a) {
      int v = 0;
      Check(s.api.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
      return v;
    };
    p.major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    p.minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    p.multi_processor_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    p.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    p.max_threads_per_multi_processor = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    p.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    p.l2_cache_size = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    p.shared_memory_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    Check(s.api.cuDeviceTotalMem(&p.total_memory, dev), "cuDeviceTotalMem");
  });
  return s.properties[device];
}

DeviceMemoryOps* DriverMemoryOps(int device) {
  EnsureContext(device);
  static std::array<std::unique_ptr<DriverMemory>, kMaxDevices>* ops =
      new std::array<std::unique_ptr<DriverMemory>, kMaxDevices>();
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (!(*ops)[device]) (*ops)[device] = std::make_unique<DriverMemory>(device);
  return (*ops)[device].get();
}

}  // namespace kiln::cuda
