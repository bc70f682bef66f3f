// runtime/cuda/cufft.h: cuFFT (libcufft.so.12) loaded at run time through loader.h's search, with
// kiln's own declarations of the few entry points it uses: batches of contiguous 1-D transforms,
// their plans cached per device, length, type and batch (a plan costs milliseconds to make), as
// PyTorch's plan cache does.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/cuda/stream.h"

namespace kiln::cuda {

bool CufftAvailable();  // loads cuFFT on first call; never throws
const std::string& CufftUnavailableReason();

// cufftType values of CUDA 13's cufft.h: complex<->complex, real->complex (the first n/2 + 1
// outputs), complex->real, in float32 (C, R) or float64 (Z, D).
enum class FftType : int { kC2C = 0x29, kZ2Z = 0x69, kR2C = 0x2a, kD2Z = 0x6a, kC2R = 0x2c, kZ2D = 0x6c };

// `batch` unnormalised transforms of length n, one after another in memory (the basic layout:
// signals of n values, or n / 2 + 1 for the complex side of R2C/C2R), on `stream`. forward picks
// e^-2πi jk/n for C2C/Z2Z (R2C is forward, C2R backward). C2R overwrites its input.
void Fft1d(const Stream& stream, FftType type, int64_t n, int64_t batch, void* in, void* out, bool forward);

}  // namespace kiln::cuda
