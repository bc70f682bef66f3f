"""kiln.utils: data loading (kiln.utils.data) and hook handles (kiln.utils.hooks)."""

from kiln.utils import data, hooks  # noqa: F401
