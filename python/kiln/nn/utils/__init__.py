"""kiln.nn.utils: gradient clipping, parameter/vector conversion, rnn (packed sequences), parametrize and
parametrizations (weight_norm, spectral_norm), and the older hook-based weight_norm / spectral_norm."""

from kiln.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
from kiln.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from kiln.nn.utils import rnn  # noqa: F401
from kiln.nn.utils import parametrize, parametrizations  # noqa: F401
from kiln.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from kiln.nn.utils.weight_norm import remove_weight_norm, weight_norm  # noqa: F401
