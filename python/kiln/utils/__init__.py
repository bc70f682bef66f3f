"""kiln.utils: data loading (kiln.utils.data), hook handles (kiln.utils.hooks) and pytrees
(kiln.utils._pytree, imported on demand as torch.utils._pytree)."""

from kiln.utils import data, hooks  # noqa: F401
