"""kiln.backends.cpu: the instruction set kiln's CPU kernels run, as torch.backends.cpu reports
PyTorch's: "AVX512" where the CPU has AVX-512 (F, BW, DQ, VL), else "AVX2" (kiln's baseline).
ATEN_CPU_CAPABILITY=avx2 (or default), set before the first kernel runs, keeps both libraries on
their AVX2 code (tensor/cpu_capability.h)."""

from kiln import _C


def get_cpu_capability():
    return _C._get_cpu_capability()
