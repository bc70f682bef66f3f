"""kiln.amp: automatic mixed precision (PyTorch's torch.amp). autocast runs matrix products in a
16-bit dtype and losses in float32 (autocast_mode.py); GradScaler scales the loss so that small
float16 gradients do not underflow, and skips optimizer steps whose gradients overflowed."""

from kiln.amp.autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available  # noqa: F401
from kiln.amp.grad_scaler import GradScaler, OptState  # noqa: F401
