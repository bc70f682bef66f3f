"""kiln.optim: optimizers (SGD, Adam, AdamW, RMSprop) and learning-rate schedulers, as torch.optim."""

from kiln.optim.optimizer import (Optimizer, register_optimizer_step_post_hook,  # noqa: F401
                                  register_optimizer_step_pre_hook)
from kiln.optim.sgd import SGD
from kiln.optim.adam import Adam, AdamW
from kiln.optim.rmsprop import RMSprop
from kiln.optim import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
