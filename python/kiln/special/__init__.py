"""kiln.special, as torch.special: special functions of the registry's ops.

An op registered as `special_<name>` (its schema's name, as PyTorch's native_functions.yaml
spells torch.special's ops) is `kiln.special.<name>`, found in the registry on first use: a new
op of the pointwise families (tensor/ops/unary.cc) needs no line here. The rest are torch.special's
names for ops kiln has under their top-level names. Names torch.special has and kiln lacks raise
AttributeError naming torch's function.
"""

import kiln
from kiln import _C

# torch.special name -> the kiln function it is
_ALIASES = {
    "digamma": "digamma", "psi": "digamma", "erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "exp2": "exp2",
    "expit": "sigmoid", "expm1": "expm1", "gammaln": "lgamma", "gammainc": "igamma", "gammaincc": "igammac",
    "i0": "i0", "log1p": "log1p", "logit": "logit", "logsumexp": "logsumexp", "multigammaln": "mvlgamma",
    "polygamma": "polygamma", "round": "round", "sinc": "sinc", "xlogy": "xlogy", "softmax": "softmax",
    "log_softmax": "log_softmax",
}

_REGISTRY_OPS = None


def _registry_ops():
    global _REGISTRY_OPS
    if _REGISTRY_OPS is None:
        _REGISTRY_OPS = {name[len("special_"):] for _, name, _ in _C._packets() if name.startswith("special_")}
    return _REGISTRY_OPS


def __getattr__(name):
    if name in _ALIASES:
        return getattr(kiln, _ALIASES[name])
    if name in _registry_ops():
        return getattr(kiln, "special_" + name)
    raise AttributeError(f"module 'kiln.special' has no attribute '{name}' (torch.special.{name} is not in kiln)")


def __dir__():
    return sorted(set(_ALIASES) | _registry_ops())
