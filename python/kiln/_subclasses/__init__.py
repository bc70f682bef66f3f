"""Tensor subclasses (PyTorch's torch._subclasses): fake tensors."""

from kiln._subclasses.fake_tensor import FakeTensor, FakeTensorMode  # noqa: F401
