"""kiln.fx: FX graphs — Graph, Node, GraphModule — as in torch.fx.

The graph itself lives in C++ (fx/graph.h); see fx/README.md for how the pieces fit.
"""

from kiln.fx.node import Node, has_side_effect, map_arg  # noqa: F401
from kiln.fx.graph import Graph  # noqa: F401
from kiln.fx.graph_module import GraphModule  # noqa: F401
