"""kiln.amp: automatic mixed precision (PyTorch's torch.amp). GradScaler scales the loss so that
small float16 gradients do not underflow, and skips optimizer steps whose gradients overflowed."""

from kiln.amp.grad_scaler import GradScaler, OptState  # noqa: F401
