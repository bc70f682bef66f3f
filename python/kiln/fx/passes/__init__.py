"""kiln.fx.passes: graph passes over GraphModules (shape propagation, the Conv-BN folding example)."""

from kiln.fx.passes import shape_prop  # noqa: F401
