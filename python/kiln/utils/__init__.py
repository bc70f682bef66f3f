"""kiln.utils: data loading (kiln.utils.data), hook handles (kiln.utils.hooks) and pytrees
(kiln.utils._pytree, reachable after `import kiln` as torch.utils._pytree is)."""

from kiln.utils import _pytree, data, hooks  # noqa: F401
