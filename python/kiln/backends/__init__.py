"""kiln.backends: PyTorch's torch.backends switches (cuda.matmul.allow_tf32, cudnn.benchmark, ...).
kiln runs on its own CPU kernels (cpu.get_cpu_capability() says which instruction set) and has no
cuDNN, MPS, oneDNN or OpenMP backend; the switches are stored and read back so that training
scripts which set them run unchanged, and the is_available() queries say what kiln was built with.
"""

from kiln.backends import cpu, cuda, cudnn, mha, mkldnn, mps, openmp  # noqa: F401
