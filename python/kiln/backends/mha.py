"""kiln.backends.mha: the switch of PyTorch's multi-head-attention "fast path".

PyTorch's fast path is an inference-time kernel choice (fused layers, nested tensors) that computes
the same values as the ordinary path, except that a TransformerEncoder handing a padded batch to
nested tensors gives zeros at the padded positions. kiln always takes the ordinary path and
reproduces that one visible difference while the switch is on (see nn/modules/transformer.py).
"""

_fastpath_enabled = True


def get_fastpath_enabled():
    """Whether the fast path may be taken (default True, as PyTorch's)."""
    return _fastpath_enabled


def set_fastpath_enabled(value):
    """Turns the fast path on or off."""
    global _fastpath_enabled
    _fastpath_enabled = bool(value)
