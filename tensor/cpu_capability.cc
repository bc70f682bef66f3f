// tensor/cpu_capability.cc: the CPU's instruction set for the kernels, capped by ATEN_CPU_CAPABILITY.
#include "tensor/cpu_capability.h"

#include <cstdlib>
#include <cstring>

namespace kiln {
namespace {

CpuCapability Detect() {
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const char* cap = std::getenv("ATEN_CPU_CAPABILITY");
  const bool capped = cap && (std::strcmp(cap, "default") == 0 || std::strcmp(cap, "avx2") == 0);
  return avx512 && !capped ? CpuCapability::kAvx512 : CpuCapability::kAvx2;
}

}  // namespace

CpuCapability GetCpuCapability() {
  static const CpuCapability capability = Detect();
  return capability;
}

const char* CpuCapabilityName(CpuCapability c) { return c == CpuCapability::kAvx512 ? "AVX512" : "AVX2"; }

}  // namespace kiln
