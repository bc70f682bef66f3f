"""kiln.nn.utils: gradient clipping, parameter/vector conversion, and rnn (packed sequences)."""

from kiln.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
from kiln.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from kiln.nn.utils import rnn  # noqa: F401
