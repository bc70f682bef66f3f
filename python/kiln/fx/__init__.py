"""kiln.fx: FX graphs — Graph, Node, GraphModule — as in torch.fx.

The graph itself lives in C++ (fx/graph.h); see fx/README.md for how the pieces fit.
"""

from kiln.fx.node import Node, has_side_effect, map_arg  # noqa: F401
from kiln.fx.graph import Graph  # noqa: F401
from kiln.fx.graph_module import GraphModule  # noqa: F401
from kiln.fx.proxy import Proxy, TraceError  # noqa: F401,E402
from kiln.fx._symbolic_trace import PH, Tracer, symbolic_trace, wrap  # noqa: F401,E402
from kiln.fx.interpreter import Interpreter, Transformer  # noqa: F401,E402
from kiln.fx import subgraph_rewriter, passes  # noqa: F401,E402
