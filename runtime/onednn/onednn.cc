// runtime/onednn/onednn.cc: dlopen of libdnnl, the function table, the CPU engine and per-thread
// streams (onednn.h).
#include "runtime/onednn/onednn.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "runtime/error.h"

namespace kiln::onednn {
namespace {

std::atomic<bool> g_enabled{true};

#if KILN_HAVE_ONEDNN

struct Loaded {
  Api api;
  bool ok = false;
  std::string reason;
  std::string version;
};

// The library is loaded once and never closed: its OpenMP threads and JIT code live as long as
// the process (as PyTorch's statically linked copy does).
Loaded Load() {
  Loaded l;
  if (const char* off = std::getenv("KILN_ONEDNN"); off != nullptr && std::string(off) == "0") {
    l.reason = "disabled by KILN_ONEDNN=0";
    return l;
  }
  const char* env = std::getenv("KILN_ONEDNN_LIB");
  const std::string path = env != nullptr && *env != '\0' ? env : "libdnnl.so.2";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    l.reason = "cannot load " + path + " (" + (err ? err : "unknown error") + "); on Debian: apt-get install libdnnl2";
    return l;
  }
#define KILN_ONEDNN_RESOLVE(name)                                                              \
  l.api.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));                      \
  if (l.api.name == nullptr) {                                                                 \
    l.reason = path + " has no " #name " (kiln needs oneDNN 2.x, the C API of its headers)"; \
    return l;                                                                                  \
  }
  KILN_ONEDNN_FUNCTIONS(KILN_ONEDNN_RESOLVE)
#undef KILN_ONEDNN_RESOLVE
  // dlsym through the library's handle also searches what it loaded (libgomp).
  l.api.omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(handle, "omp_set_num_threads"));
  l.api.omp_get_max_threads = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_max_threads"));
  const dnnl_version_t* v = l.api.dnnl_version();
  if (v->major != DNNL_VERSION_MAJOR) {
    l.reason = path + " is oneDNN " + std::to_string(v->major) + ".x; kiln was built against " +
               std::to_string(DNNL_VERSION_MAJOR) + ".x";
    return l;
  }
  l.version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  if (l.api.dnnl_engine_create(&l.api.engine, dnnl_cpu, 0) != dnnl_success) {
    l.reason = "oneDNN could not create its CPU engine";
    return l;
  }
  l.ok = true;
  return l;
}

const Loaded& Library() {
  static const Loaded loaded = Load();
  return loaded;
}

#endif  // KILN_HAVE_ONEDNN

}  // namespace

#if KILN_HAVE_ONEDNN

const Api* Get() {
  if (!g_enabled.load(std::memory_order_relaxed)) return nullptr;
  const Loaded& l = Library();
  return l.ok ? &l.api : nullptr;
}

dnnl_stream_t ThisThreadStream(const Api& api) {
  struct Owned {
    const Api* api = nullptr;
    dnnl_stream_t stream = nullptr;
    ~Owned() {
      if (stream != nullptr) api->dnnl_stream_destroy(stream);
    }
  };
  thread_local Owned owned;
  if (owned.stream == nullptr) {
    Check(api.dnnl_stream_create(&owned.stream, api.engine, dnnl_stream_default_flags), "dnnl_stream_create");
    owned.api = &api;
  }
  return owned.stream;
}

// OpenMP's count is per calling thread, and shared with whatever else in the process uses the
// same libgomp (PyTorch's, when torch is imported: one libgomp.so.1 serves both): read, not
// cached, since torch.set_num_threads(2) in between left kiln's convolutions on two threads
// under kiln.set_num_threads(1) when kiln remembered having set 1.
void SetThreads(const Api& api, int n) {
  if (api.omp_set_num_threads == nullptr) return;
  if (api.omp_get_max_threads == nullptr || api.omp_get_max_threads() != n) api.omp_set_num_threads(n);
}

void Check(dnnl_status_t status, const char* what) {
  KILN_CHECK(status == dnnl_success, "oneDNN: ", what, " failed (status ", static_cast<int>(status), ")");
}

bool Available() { return Get() != nullptr; }

std::string UnavailableReason() {
  if (!g_enabled.load()) return "disabled by kiln.backends.mkldnn.enabled = False";
  return Library().reason;
}

std::string Version() { return Library().ok ? Library().version : ""; }

#else  // !KILN_HAVE_ONEDNN

bool Available() { return false; }
std::string UnavailableReason() { return "kiln was built without oneDNN's headers (apt-get install libdnnl-dev)"; }
std::string Version() { return ""; }

#endif

void SetEnabled(bool enabled) { g_enabled.store(enabled); }
bool Enabled() { return g_enabled.load(); }

}  // namespace kiln::onednn
