// tensor/ops/fft.h: registration of the FFT primitives (fft.cc).
#pragma once

#include "tensor/dispatcher.h"

namespace kiln {

void RegisterFftOps(Registry& r);  // _fft_c2c, _fft_r2c, _fft_c2r

}  // namespace kiln
