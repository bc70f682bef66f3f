"""kiln.utils: data loading (kiln.utils.data), hook handles (kiln.utils.hooks), pytrees
(kiln.utils._pytree) and activation checkpointing (kiln.utils.checkpoint), each reachable after
`import kiln` as torch.utils's are."""

from kiln.utils import _pytree, data, hooks  # noqa: F401


def __getattr__(name):
    # kiln.utils.checkpoint imports kiln's autograd machinery, so it loads on first use
    if name == "checkpoint":
        import importlib

        return importlib.import_module("kiln.utils.checkpoint")
    raise AttributeError(f"module 'kiln.utils' has no attribute '{name}'")
