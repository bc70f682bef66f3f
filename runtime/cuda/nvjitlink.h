// runtime/cuda/nvjitlink.h: nvJitLink (libnvJitLink.so.13) loaded at run time: PTX from LLVM's
// NVPTX back end in, machine code for the device out (DESIGN.md §3: LLVM 14 writes sm_80 PTX,
// which nvJitLink compiles for the device it runs on; the driver's own PTX JIT cannot use threads).
#pragma once

#include <string>

namespace kiln::cuda {

bool NvJitLinkAvailable();  // loads it on first call; never throws
const std::string& NvJitLinkUnavailableReason();

// The cubin for `ptx` on compute capability major.minor ("-arch=sm_90", -O3). Throws kiln::Error
// with nvJitLink's error log when the PTX does not compile.
std::string CompilePtx(const std::string& ptx, int major, int minor);

}  // namespace kiln::cuda
