// runtime/cuda/cuda_allocator.h: the Allocator behind CUDA tensors' storages: one caching
// allocator per device (runtime/cuda/caching_allocator.h) over the driver, allocating on the
// calling thread's current stream of that device, as PyTorch's does.
#pragma once

#include "runtime/allocator.h"
#include "runtime/cuda/caching_allocator.h"

namespace kiln::cuda {

// The device's allocator (its primary context is made current first). Throws when CUDA is
// unavailable or the index is not a device.
Allocator* GetCUDAAllocator(int device);

// The caching allocator itself, for statistics, empty_cache and record_stream.
CachingAllocator& DeviceCachingAllocator(int device);

// Pinned (page-locked) host memory for pin_memory() and non-blocking copies: cuMemHostAlloc,
// cached by size like the CPU allocator's large blocks.
Allocator* GetPinnedHostAllocator();
bool IsPinned(const void* ptr);

}  // namespace kiln::cuda
