"""The minifier: the smallest part of a failing FX graph that still fails (PyTorch's fx minifier).

    small_gm, small_inputs = minify(gm, inputs, still_fails)

`still_fails(gm, inputs)` compiles and runs a candidate and says whether it shows the failure.
Two strategies, each keeping a candidate only while it still fails:

1. truncate: the graph up to the first node whose value alone (the only output) fails;
2. cut inputs: each earlier node, nearest the output first, becomes an input holding the value
   eager computed for it, so what feeds it disappears.

Candidates that cannot be built or that fail otherwise count as passing. The number of compiles
is capped (`max_trials`): a large graph gives its best candidate so far.
"""

import kiln
from kiln.fx.interpreter import Interpreter

from kiln._dynamo.debug_utils import clone_inputs


def minify(gm, inputs, still_fails, max_trials=150):
    values = _eager_values(gm, inputs)
    nodes = [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    tensors = [n for n in nodes if isinstance(values.get(n), kiln.Tensor)]
    trials = [0]

    def fails(output, cut):
        if trials[0] >= max_trials:
            return False
        trials[0] += 1
        candidate, candidate_inputs = subgraph(gm, inputs, values, output, cut)
        try:
            return bool(still_fails(candidate, candidate_inputs))
        except Exception:  # noqa: BLE001 - a candidate that breaks otherwise is no repro
            return False

    output = next((n for n in tensors if fails(n, set())), None)
    if output is None:  # no single value fails alone: the whole graph is the repro
        return gm, list(inputs)
    cut = set()
    for node in reversed(_ancestors(output)):
        if node.op != "placeholder" and isinstance(values.get(node), kiln.Tensor) and fails(output, cut | {node}):
            cut.add(node)
    return subgraph(gm, inputs, values, output, cut)


def subgraph(gm, inputs, values, output, cut):
    """The graph computing `output` alone, with the nodes in `cut` turned into inputs that hold
    their eager values; its inputs (clones), in placeholder order."""
    keep, stack = set(), [output]
    while stack:
        node = stack.pop()
        if node in keep:
            continue
        keep.add(node)
        if node not in cut:
            stack.extend(node.all_input_nodes)
    graph = kiln.fx.Graph()
    env, new_inputs = {}, []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, inputs):
        if node in keep:
            env[node] = graph.placeholder(node.name)
            env[node].meta.update(node.meta)
            new_inputs.append(value)
    for node in gm.graph.nodes:
        if node not in keep or node.op == "placeholder":
            continue
        if node in cut:
            env[node] = graph.placeholder(node.name)
            env[node].meta.update({k: v for k, v in node.meta.items() if k in ("val", "example_value")})
            new_inputs.append(_as_input(values[node]))
        else:
            env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output((env[output],))
    return kiln.fx.GraphModule(gm, graph), clone_inputs(new_inputs)


def _as_input(value):
    """An eager intermediate as a graph input: a leaf of its own, requiring grad as it did."""
    leaf = value.detach().clone()
    return leaf.requires_grad_(value.requires_grad and (value.dtype.is_floating_point or value.dtype.is_complex))


def _ancestors(output):
    """The nodes `output` depends on, in graph order."""
    seen, stack = set(), [output]
    while stack:
        node = stack.pop()
        for n in node.all_input_nodes:
            if n not in seen:
                seen.add(n)
                stack.append(n)
    order = {n: i for i, n in enumerate(output.graph.nodes)}
    return sorted(seen, key=order.__getitem__)


def _eager_values(gm, inputs):
    """Every node's eager value (kept: none is freed after its last use)."""

    class Recording(Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            recorded[node] = value
            return value

    recorded = {}
    Recording(gm, garbage_collect_values=False).run(*clone_inputs(inputs))
    return recorded
