"""Dropout: zeroes elements with probability p in training (scaling the rest by 1/(1-p))."""

from kiln.nn import functional as F
from kiln.nn.modules.module import Module


class Dropout(Module):
    __constants__ = ["p", "inplace"]

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)
