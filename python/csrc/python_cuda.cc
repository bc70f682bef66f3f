// python/csrc/python_cuda.cc: kiln._C's CUDA entry points (runtime/cuda/), wrapped by kiln.cuda:
// availability and devices, the current device and stream, events, and the caching allocator's
// statistics. Streams cross as (device, handle, priority) triples; kiln.cuda.Stream holds one.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/csrc/tensor_caster.h"
#include "runtime/cuda/cublas.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cudnn.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/loader.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/nvjitlink.h"
#include "tensor/cuda/pointwise.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"
#include "tensor/cuda/cuda_ops.h"
#include "tensor/cuda/multi_tensor.h"
#include "tensor/ops/conv_cudnn.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using StreamTuple = std::tuple<int, uintptr_t, int>;

StreamTuple Pack(const cuda::Stream& s) { return {s.device, s.id(), s.priority}; }
cuda::Stream Unpack(const StreamTuple& t) {
  return cuda::Stream{std::get<0>(t), reinterpret_cast<cuda::CUstream>(std::get<1>(t)), std::get<2>(t)};
}

py::dict StatsDict(const cuda::CachingAllocator::Stats& s) {
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes;
  d["allocated_bytes.all.peak"] = s.allocated_bytes_peak;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.reserved_bytes_peak;
  d["active_bytes.all.current"] = s.active_bytes;
  d["inactive_split_bytes.all.current"] = s.inactive_split_bytes;
  d["allocation.all.allocated"] = s.num_allocs;
  d["allocation.all.freed"] = s.num_frees;
  d["num_ooms"] = s.num_ooms;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["segment.all.current"] = s.num_segments;
  return d;
}

}  // namespace

void InitCudaBindings(py::module_& m) {
  m.def("_cuda_add_library_dir", &cuda::AddLibrarySearchDir);
  m.def("_cuda_is_available", [] { return cuda::Available(); });
  m.def("_cuda_unavailable_reason", [] { return cuda::UnavailableReason(); });
  m.def("_cuda_device_count", [] { return cuda::DeviceCount(); });
  m.def("_cuda_driver_version", [] { return cuda::DriverVersion(); });
  m.def("_cuda_driver_path", [] { return cuda::DriverLibraryPath(); });
  m.def("_cuda_init", [](int device) { cuda::EnsureContext(device); });
  m.def("_cuda_is_initialized", [] { return cuda::Available() && cuda::Initialized(); });
  m.def("_cuda_current_device", [] { return cuda::CurrentDevice(); });
  m.def("_cuda_set_device", [](int device) {
    cuda::SetCurrentDevice(device);
    cuda::EnsureContext(device);
  });
  m.def("_cuda_get_device_properties", [](int device) {
    const cuda::DeviceProperties& p = cuda::GetDeviceProperties(device);
    py::dict d;
    d["name"] = p.name;
    d["major"] = p.major;
    d["minor"] = p.minor;
    d["multi_processor_count"] = p.multi_processor_count;
    d["total_memory"] = p.total_memory;
    d["max_threads_per_block"] = p.max_threads_per_block;
    d["max_threads_per_multi_processor"] = p.max_threads_per_multi_processor;
    d["warp_size"] = p.warp_size;
    d["L2_cache_size"] = p.l2_cache_size;
    d["shared_memory_per_block_optin"] = p.shared_memory_per_block_optin;
    return d;
  });
  m.def("_cuda_synchronize", [](int device) {
    py::gil_scoped_release release;
    cuda::SynchronizeDevice(device);
  });
  m.def("_cuda_mem_get_info", [](int device) {
    size_t free_bytes = 0, total = 0;
    cuda::DriverMemoryOps(device)->MemGetInfo(&free_bytes, &total);
    return std::make_pair(free_bytes, total);
  });

  m.def("_cuda_set_allow_tf32", &cuda::SetAllowTF32);
  m.def("_cuda_set_conv_allow_tf32", &cuda::SetConvAllowTF32);
  m.def("_cuda_cublas_available", [] { return cuda::CublasAvailable(); });
  m.def("_cuda_cublas_unavailable_reason", [] { return cuda::CublasUnavailableReason(); });
  m.def("_cuda_cublaslt_available", [] { return cuda::CublasLtAvailable(); });
  m.def("_cuda_cublaslt_unavailable_reason", [] { return cuda::CublasLtUnavailableReason(); });
  m.def("_cuda_cublaslt_gemms", [] { return cuda::LtGemmCount(); });
  m.def("_cudnn_available", [] { return cuda::CudnnAvailable(); });
  m.def("_cudnn_unavailable_reason", [] { return cuda::CudnnUnavailableReason(); });
  m.def("_cudnn_version", [] { return cuda::CudnnVersion(); });
  m.def("_cudnn_convolutions", [] { return cuda::CudnnConvolutionCount(); });
  m.def("_cudnn_set_enabled", &SetCudnnEnabled);
  m.def("_cudnn_set_deterministic", &SetCudnnDeterministic);

  m.def("_cuda_nvjitlink_available", [] { return cuda::NvJitLinkAvailable(); });
  m.def("_cuda_nvjitlink_unavailable_reason", [] { return cuda::NvJitLinkUnavailableReason(); });
  m.def("_cuda_pointwise_cache_stats", [] {
    cuda::PointwiseCacheStats s = cuda::GetPointwiseCacheStats();
    return py::dict(py::arg("compiled") = s.compiled, py::arg("disk_hits") = s.disk_hits, py::arg("hits") = s.hits);
  });
  // PTX -> the device's machine code (a cubin, as bytes), for the generated kernels.
  m.def("_cuda_compile_ptx", [](const std::string& ptx, int major, int minor) {
    std::string cubin;
    {
      py::gil_scoped_release release;
      cubin = cuda::CompilePtx(ptx, major, minor);
    }
    return py::bytes(cubin);
  });

  // A loaded cubin and 1-D launches of its kernels on the current stream: each argument is a CUDA
  // tensor (its data pointer) or an int (an int64 parameter).
  py::class_<cuda::Module>(m, "_CudaModule")
      .def(py::init([](int device, py::bytes cubin) {
        return std::make_unique<cuda::Module>(device, std::string(cubin));
      }))
      .def("launch", [](cuda::Module& mod, const std::string& name, unsigned grid, unsigned block, py::list args) {
        std::vector<int64_t> values(args.size());
        std::vector<void*> params(args.size());
        for (size_t i = 0; i < args.size(); ++i) {
          py::handle a = args[i];
          if (IsTensor(a.ptr())) {
            Tensor t = UnpackTensor(a.ptr());
            KILN_CHECK(t.device().is_cuda() && t.device().index == mod.device(), "kernel argument ", i,
                       " is a tensor on ", t.device().str(), ", not on cuda:", mod.device());
            values[i] = reinterpret_cast<int64_t>(t->data());
          } else {
            values[i] = py::cast<int64_t>(a);
          }
          params[i] = &values[i];
        }
        cuda::Launch(mod.Function(name), grid, block, 0, cuda::CurrentStream(mod.device()), params);
      });

  // Streams.
  m.def("_cuda_current_stream", [](int device) { return Pack(cuda::CurrentStream(device)); });
  m.def("_cuda_default_stream", [](int device) { return Pack(cuda::DefaultStream(device)); });
  m.def("_cuda_stream_from_pool", [](int device, int priority) { return Pack(cuda::StreamFromPool(device, priority)); });
  m.def("_cuda_set_stream", [](const StreamTuple& s) { cuda::SetCurrentStream(Unpack(s)); });
  m.def("_cuda_stream_synchronize", [](const StreamTuple& s) {
    py::gil_scoped_release release;
    Unpack(s).Synchronize();
  });
  m.def("_cuda_stream_query", [](const StreamTuple& s) { return Unpack(s).Query(); });

  py::class_<cuda::Event>(m, "_CudaEvent")
      .def(py::init<bool, bool>(), py::arg("enable_timing") = false, py::arg("blocking") = false)
      .def("record", [](cuda::Event& e, const StreamTuple& s) { e.Record(Unpack(s)); })
      .def("wait", [](const cuda::Event& e, const StreamTuple& s) { e.Wait(Unpack(s)); })
      .def("query", &cuda::Event::Query)
      .def("synchronize", [](const cuda::Event& e) {
        py::gil_scoped_release release;
        e.Synchronize();
      })
      .def("elapsed_time", &cuda::Event::ElapsedTime)
      .def_property_readonly("recorded", &cuda::Event::recorded)
      .def_property_readonly("device", &cuda::Event::device);

  // The caching allocator.
  m.def("_cuda_memory_stats", [](int device) { return StatsDict(cuda::DeviceCachingAllocator(device).stats()); });
  m.def("_cuda_reset_peak_memory_stats", [](int device) { cuda::DeviceCachingAllocator(device).ResetPeakStats(); });
  m.def("_cuda_reset_accumulated_memory_stats",
        [](int device) { cuda::DeviceCachingAllocator(device).ResetAccumulatedStats(); });
  m.def("_cuda_empty_cache", [] {
    if (!cuda::Available()) return;
    py::gil_scoped_release release;
    for (int d = 0; d < cuda::DeviceCount(); ++d) cuda::DeviceCachingAllocator(d).EmptyCache();
  });
  m.def("_cuda_memory_snapshot", [](int device) {
    py::list segments;
    for (const auto& seg : cuda::DeviceCachingAllocator(device).Snapshot()) {
      py::dict s;
      s["device"] = device;
      s["address"] = reinterpret_cast<uintptr_t>(seg.address);
      s["total_size"] = seg.total_size;
      s["allocated_size"] = seg.allocated_size;
      s["stream"] = seg.stream;
      s["segment_type"] = seg.is_large ? "large" : "small";
      py::list blocks;
      for (const auto& b : seg.blocks) {
        py::dict bd;
        bd["address"] = reinterpret_cast<uintptr_t>(b.address);
        bd["size"] = b.size;
        bd["state"] = b.allocated ? "active_allocated" : b.pending_free ? "active_pending_free" : "inactive";
        blocks.append(bd);
      }
      s["blocks"] = blocks;
      segments.append(s);
    }
    return segments;
  });
  m.def("_cuda_multi_tensor_adam",
        [](const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
           const std::vector<Tensor>& exp_avg_sqs, const std::vector<Tensor>& max_exp_avg_sqs,
           const std::vector<double>& step_sizes, const std::vector<double>& bias_correction2_sqrts, double lr,
           double beta1, double beta2, double eps, double weight_decay, bool decoupled, bool maximize) {
          cuda::MultiTensorAdam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step_sizes,
                                bias_correction2_sqrts, cuda::AdamHyper{lr, beta1, beta2, eps, weight_decay, decoupled,
                                                                        maximize});
        });
  m.def("_cuda_multi_tensor_sgd",
        [](const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
           const std::vector<Tensor>& momentum_buffers, const std::vector<bool>& first, double lr, double momentum,
           double dampening, double weight_decay, bool nesterov, bool maximize) {
          cuda::MultiTensorSgd(params, grads, momentum_buffers, first,
                               cuda::SgdHyper{lr, momentum, dampening, weight_decay, nesterov, maximize});
        });
  m.def("_cuda_grad_norm", [](const std::vector<Tensor>& grads) { return cuda::GradNorm(grads); });
  m.def("_cuda_clip_grads_by_norm", [](const std::vector<Tensor>& grads, const Tensor& total_norm, double max_norm) {
    cuda::ClipGradsByNorm(grads, total_norm, max_norm);
  });
  m.def("_cuda_record_stream", [](const Tensor& t, const StreamTuple& s) {
    KILN_CHECK(t.device().is_cuda(), "record_stream expects a CUDA tensor, got one on ", t.device().str());
    cuda::DeviceCachingAllocator(t.device().index).RecordStream(t->storage()->data(), Unpack(s).id());
  });
  m.def("_cuda_pin_memory", [](const Tensor& t) { return cuda::PinMemory(t); });
  m.def("_cuda_is_pinned", [](const Tensor& t) { return t.device().is_cpu() && t->has_storage() && cuda::IsPinned(t->storage()->data()); });
}

}  // namespace kiln::python
