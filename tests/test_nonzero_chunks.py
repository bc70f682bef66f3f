"""nonzero of large contiguous tensors (tensor/ops/index.cc, NonzeroContiguous): counted, then
written, in one chunk per thread, against PyTorch across chunk boundaries."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch


@requires_torch
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape,dtype", [((300001,), "bool"), ((97, 5, 211), "float32"), ((1, 70000, 3), "int8"),
                                         ((65536 * 2,), "complex64"), ((7, 0, 3), "float64")], ids=str)
def test_nonzero_of_large_contiguous_tensors_in_chunks(shape, dtype, threads):
    """A contiguous tensor's nonzero counts, then writes, in one chunk per thread: the rows come out
    in order across chunk boundaries (NaN counts, -0.0 does not)."""
    rng = np.random.default_rng(7)
    a = (rng.random(shape) > 0.6) * rng.integers(1, 4, shape)
    a = a.astype(dtype)
    if a.dtype.kind == "f" and a.size:
        a.flat[::1001] = np.nan
        a.flat[5::997] = -0.0
    old = kiln.get_num_threads()
    kiln.set_num_threads(threads)
    try:
        got = kiln.tensor(a).nonzero()
        rows = kiln.tensor(a)[kiln.tensor(a != 0)] if a.ndim else None
    finally:
        kiln.set_num_threads(old)
    want = torch.tensor(a).nonzero()
    assert got.dtype == kiln.int64 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(rows.numpy(), a[a != 0])
