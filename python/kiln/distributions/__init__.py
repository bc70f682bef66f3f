"""kiln.distributions: probability distributions with torch.distributions' API (shapes, sampling,
reparameterised rsample, log_prob, entropy, moments, argument validation, kl_divergence).

| file | holds |
| --- | --- |
| `distribution.py` | `Distribution`: batch/event shapes, `_extended_shape`, validation of parameters and values |
| `constraints.py` | the constraints the distributions use (`real`, `positive`, `simplex`, `interval`, ...) |
| `utils.py` | `broadcast_all`, probs/logits conversions, `lazy_property` |
| `normal.py`, `uniform.py` | reparameterised continuous distributions (rsample through `randn`/`rand`) |
| `bernoulli.py`, `categorical.py` | discrete ones, parameterised by probs or logits (sampled with `bernoulli`/`multinomial`) |
| `kl.py` | `kl_divergence` and `register_kl`, with the closed forms of the pairs above |
"""

from kiln.distributions import constraints  # noqa: F401
from kiln.distributions.bernoulli import Bernoulli
from kiln.distributions.categorical import Categorical
from kiln.distributions.distribution import Distribution
from kiln.distributions.kl import kl_divergence, register_kl
from kiln.distributions.normal import Normal
from kiln.distributions.uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Normal", "Uniform", "constraints", "kl_divergence",
           "register_kl"]
