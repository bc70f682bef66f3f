"""kiln.special, as torch.special: special functions of the registry's ops.

torch.special's names are the registry's: an op registered as `special_<name>` (its schema's name,
as PyTorch's native_functions.yaml spells torch.special's ops: special_ndtr) or an alias
`special_<name>` of an op kiln has under its top-level name (special_expit of sigmoid: Note [Op
aliases] in tensor/dispatcher.h) is `kiln.special.<name>`, found on first use; a new one needs no
line here. The imports below are torch.special's names for kiln functions written in Python,
which the registry does not hold. Names torch.special has and kiln lacks raise AttributeError
naming torch's function.
"""

import kiln
from kiln import _C
from kiln._pointwise_more import sinc  # noqa: F401
from kiln._special_more import igamma as gammainc, igammac as gammaincc, mvlgamma as multigammaln, polygamma  # noqa: F401
from kiln._windows import i0  # noqa: F401

_REGISTRY_NAMES = None


def _registry_names():
    """torch.special name -> the name of the kiln function it is."""
    global _REGISTRY_NAMES
    if _REGISTRY_NAMES is None:
        names = {name: name for _, name, _ in _C._packets() if name.startswith("special_")}
        names.update((alias, name) for alias, name, _ in _C._op_aliases() if alias.startswith("special_"))
        _REGISTRY_NAMES = {alias[len("special_"):]: name for alias, name in names.items()}
    return _REGISTRY_NAMES


def __getattr__(name):
    target = _registry_names().get(name)
    if target is not None:
        return getattr(kiln, target)
    raise AttributeError(f"module 'kiln.special' has no attribute '{name}' (torch.special.{name} is not in kiln)")


def __dir__():
    imported = {name for name, value in globals().items() if callable(value) and not name.startswith("_")}
    return sorted(set(_registry_names()) | imported)
