"""kiln.optim: optimizers and learning-rate schedulers, as torch.optim."""

from kiln.optim.optimizer import (Optimizer, register_optimizer_step_post_hook,  # noqa: F401
                                  register_optimizer_step_pre_hook)
from kiln.optim.sgd import SGD
from kiln.optim.adam import Adam, AdamW
from kiln.optim.rmsprop import RMSprop
from kiln.optim.adadelta import Adadelta
from kiln.optim.adagrad import Adagrad
from kiln.optim.adamax import Adamax
from kiln.optim.nadam import NAdam
from kiln.optim.radam import RAdam
from kiln.optim.rprop import Rprop
from kiln.optim.asgd import ASGD
from kiln.optim.lbfgs import LBFGS
from kiln.optim.adafactor import Adafactor
from kiln.optim import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam",
           "Rprop", "ASGD", "LBFGS", "Adafactor", "lr_scheduler"]
