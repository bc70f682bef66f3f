"""kiln.backends.openmp: kiln parallelizes CPU kernels with its own thread pool (kiln.set_num_threads),
not OpenMP, so is_available() is False."""


def is_available():
    return False
