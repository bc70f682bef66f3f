// runtime/onednn/onednn.h: oneDNN (the library PyTorch runs its CPU convolutions on) loaded at run
// time through its C API, as runtime/cuda/ loads the CUDA libraries.
//
// kiln builds against Debian's oneDNN 2.x headers (libdnnl-dev) but does not link the library:
// Get() dlopens libdnnl.so.2 ($KILN_ONEDNN_LIB first) on first use and resolves the functions in
// the table below, so a module built here loads on a machine without it (the GPU machine) and
// keeps its own kernels there. Without the headers at build time, or the library at run time, or
// with KILN_ONEDNN=0, Get() is null and the callers take their own paths; Available() and
// UnavailableReason() say which. Everything here knows nothing of tensors.
//
// Threads: Debian's oneDNN runs its parallel regions on OpenMP (libgomp), whose thread count is
// per calling thread; callers set it (SetThreads) before making a primitive (which keeps the count
// it was made with) and before running one, so kiln.set_num_threads holds for oneDNN too.
#pragma once

#include <string>

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define KILN_HAVE_ONEDNN 1
#else
#define KILN_HAVE_ONEDNN 0
#endif

namespace kiln::onednn {

#if KILN_HAVE_ONEDNN

// The C functions kiln calls, each resolved by name with the header's prototype.
#define KILN_ONEDNN_FUNCTIONS(X)                                                                          \
  X(dnnl_version) X(dnnl_engine_create) X(dnnl_engine_destroy) X(dnnl_stream_create) X(dnnl_stream_destroy) \
  X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_desc_init_by_strides) X(dnnl_memory_desc_get_size)        \
  X(dnnl_memory_desc_equal) X(dnnl_memory_create) X(dnnl_memory_destroy)                                   \
  X(dnnl_dilated_convolution_forward_desc_init) X(dnnl_dilated_convolution_backward_data_desc_init)        \
  X(dnnl_dilated_convolution_backward_weights_desc_init) X(dnnl_primitive_attr_create)                     \
  X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_scratchpad_mode) X(dnnl_primitive_desc_create)  \
  X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md) X(dnnl_primitive_desc_destroy)              \
  X(dnnl_primitive_create) X(dnnl_primitive_destroy) X(dnnl_primitive_execute)                             \
  X(dnnl_reorder_primitive_desc_create) X(dnnl_sgemm)

struct Api {
#define KILN_ONEDNN_POINTER(name) decltype(&::name) name = nullptr;
  KILN_ONEDNN_FUNCTIONS(KILN_ONEDNN_POINTER)
#undef KILN_ONEDNN_POINTER
  void (*omp_set_num_threads)(int) = nullptr;  // libgomp's, loaded with libdnnl
  int (*omp_get_max_threads)() = nullptr;
  dnnl_engine_t engine = nullptr;              // the CPU engine, shared (engines are thread-safe)
};

// The loaded library, or null (see the banner). Thread-safe; loads once.
const Api* Get();

// This thread's stream on the CPU engine (streams are not shared between threads).
dnnl_stream_t ThisThreadStream(const Api& api);

// Sets OpenMP's thread count for this thread's oneDNN calls to n (only on change).
void SetThreads(const Api& api, int n);

// Throws kiln's RuntimeError naming `what` when status is not dnnl_success.
void Check(dnnl_status_t status, const char* what);

#endif  // KILN_HAVE_ONEDNN

// Whether Get() is non-null, without exposing the header's types.
bool Available();

// Why Get() is null ("" when it is not): not built with the headers, the library missing, or
// KILN_ONEDNN=0.
std::string UnavailableReason();

// The loaded library's version ("2.6.3"), or "" when unavailable.
std::string Version();

// kiln.backends.mkldnn.enabled: when false, callers keep to their own kernels (default true).
void SetEnabled(bool enabled);
bool Enabled();

}  // namespace kiln::onednn
