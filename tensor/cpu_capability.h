// tensor/cpu_capability.h: which instruction set the CPU kernels run (Note [CPU instruction sets]
// in loops.h). kiln is built for x86-64-v3 (AVX2); where the CPU also has AVX-512 (x86-64-v4:
// F, BW, DQ, VL) the hot loops run their AVX-512 versions. ATEN_CPU_CAPABILITY caps it as it caps
// PyTorch's (default or avx2: the AVX2 versions; avx512: as the CPU allows), so one variable runs
// both libraries' AVX2 code, and tests can compare the two versions on one machine.
#pragma once

namespace kiln {

enum class CpuCapability { kAvx2, kAvx512 };

// Read once, at the first call.
CpuCapability GetCpuCapability();
const char* CpuCapabilityName(CpuCapability c);  // "AVX2" / "AVX512", as torch.backends.cpu names them

}  // namespace kiln
