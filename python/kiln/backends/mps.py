"""kiln.backends.mps: Apple's Metal backend, which kiln does not have."""


def is_available():
    return False


def is_built():
    return False
