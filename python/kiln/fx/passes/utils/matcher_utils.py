"""kiln.fx.passes.utils.matcher_utils: SubgraphMatcher and InternalMatch at torch.fx's import path.

The matcher itself is C++ (fx/subgraph_matcher.h); kiln.fx.subgraph_rewriter wraps it."""

from kiln.fx.subgraph_rewriter import InternalMatch, SubgraphMatcher  # noqa: F401

__all__ = ["SubgraphMatcher", "InternalMatch"]
