// runtime/cuda/module.cc: module loading and kernel launches through the driver.
#include "runtime/cuda/module.h"

#include "runtime/cuda/driver.h"
#include "runtime/error.h"

namespace kiln::cuda {

Module::Module(int device, const std::string& cubin) : device_(device) {
  EnsureContext(device);
  KILN_CUDA_CHECK(Api().cuModuleLoadData(&module_, cubin.data()));
}

Module::~Module() {
  if (module_ != nullptr && Available()) {
    EnsureContext(device_);
    Api().cuModuleUnload(module_);  // no throw from a destructor
  }
}

CUfunction Module::Function(const std::string& name) {
  CUfunction fn = nullptr;
  CUresult r = Api().cuModuleGetFunction(&fn, module_, name.c_str());
  KILN_CHECK(r == CUDA_SUCCESS, "CUDA module has no kernel named '", name, "'");
  return fn;
}

void Launch(CUfunction fn, unsigned grid, unsigned block, unsigned shared_bytes, const Stream& stream,
            std::vector<void*>& args) {
  Launch(fn, LaunchDims{grid, 1, block, 1, shared_bytes}, stream, args);
}

void Launch(CUfunction fn, const LaunchDims& d, const Stream& stream, std::vector<void*>& args) {
  EnsureContext(stream.device);
  KILN_CUDA_CHECK(Api().cuLaunchKernel(fn, d.grid_x, d.grid_y, 1, d.block_x, d.block_y, 1, d.shared_bytes,
                                       stream.handle, args.data(), nullptr));
}

}  // namespace kiln::cuda
