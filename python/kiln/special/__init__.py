"""kiln.special, as torch.special: special functions of the registry's ops.

torch.special's names are the registry's: an op registered as `special_<name>` (its schema's name,
as PyTorch's native_functions.yaml spells torch.special's ops: special_ndtr) or an alias
`special_<name>` of an op kiln has under its top-level name (special_expit of sigmoid: Note [Op
aliases] in tensor/dispatcher.h) is `kiln.special.<name>`, found on first use; a new one needs no
line here. The functions below are torch.special's names for kiln functions written in Python,
which the registry does not hold. Names torch.special has and kiln lacks raise AttributeError
naming torch's function.
"""

import kiln
from kiln import _C

_REGISTRY_NAMES = None


def _registry_names():
    """torch.special name -> the name of the kiln function it is."""
    global _REGISTRY_NAMES
    if _REGISTRY_NAMES is None:
        names = {name: name for _, name, _ in _C._packets() if name.startswith("special_")}
        names.update((alias, name) for alias, name, _ in _C._op_aliases() if alias.startswith("special_"))
        _REGISTRY_NAMES = {alias[len("special_"):]: name for alias, name in names.items()}
    return _REGISTRY_NAMES


def gammainc(input, other, *, out=None):
    return kiln.igamma(input, other, out=out)


def gammaincc(input, other, *, out=None):
    return kiln.igammac(input, other, out=out)


def i0(input, *, out=None):
    return kiln.i0(input, out=out)


def multigammaln(input, p, *, out=None):
    return kiln.mvlgamma(input, p, out=out)


def polygamma(n, input, *, out=None):
    return kiln.polygamma(n, input, out=out)


def sinc(input, *, out=None):
    return kiln.sinc(input, out=out)


def __getattr__(name):
    target = _registry_names().get(name)
    if target is not None:
        return getattr(kiln, target)
    raise AttributeError(f"module 'kiln.special' has no attribute '{name}' (torch.special.{name} is not in kiln)")


def __dir__():
    defined_here = {name for name, value in globals().items()
                    if not name.startswith("_") and getattr(value, "__module__", None) == __name__}
    return sorted(set(_registry_names()) | defined_here)
