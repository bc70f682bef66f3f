// runtime/cuda/module.h: device code loaded into a context (cuModuleLoadData of a cubin from
// nvjitlink.h) and kernel launches on a stream.
#pragma once

#include <string>
#include <vector>

#include "runtime/cuda/driver_api.h"
#include "runtime/cuda/stream.h"

namespace kiln::cuda {

class Module {
 public:
  Module(int device, const std::string& cubin);  // loads into the device's primary context
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  CUfunction Function(const std::string& name);  // throws naming the kernel when it is missing
  int device() const { return device_; }

 private:
  int device_;
  CUmodule module_ = nullptr;
};

// Launches `fn` over grid x block threads (1-D) on `stream`; `args` point at each parameter's value.
void Launch(CUfunction fn, unsigned grid, unsigned block, unsigned shared_bytes, const Stream& stream,
            std::vector<void*>& args);
// The same over a 2-D grid of 2-D blocks (grid_y at most 65535, block_x * block_y at most 1024).
struct LaunchDims {
  unsigned grid_x = 1, grid_y = 1, block_x = 1, block_y = 1, shared_bytes = 0;
};
void Launch(CUfunction fn, const LaunchDims& dims, const Stream& stream, std::vector<void*>& args);

}  // namespace kiln::cuda
