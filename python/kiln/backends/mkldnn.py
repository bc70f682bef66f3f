"""kiln.backends.mkldnn: oneDNN (MKL-DNN). kiln's CPU kernels are its own (and OpenBLAS), so
is_available() is False; `enabled` is stored (PyTorch's default True) and not used."""

enabled = True


def is_available():
    return False
