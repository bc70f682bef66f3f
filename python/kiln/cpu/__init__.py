"""kiln.cpu: PyTorch's torch.cpu names (the deprecated torch.cpu.amp.autocast)."""

from kiln.cpu import amp  # noqa: F401
