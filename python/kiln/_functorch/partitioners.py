"""kiln._functorch.partitioners: split a joint forward+backward graph into the forward and the
backward graph, as torch._functorch.partitioners does.

    fw_module, bw_module = default_partition(joint_module, joint_inputs, num_fwd_outputs=K)
    fw_module, bw_module = min_cut_rematerialization_partition(joint_module, joint_inputs,
                                                               num_fwd_outputs=K)

The joint graph's placeholders are the primals then the tangents; its output is the flat tuple
``(*fw_outs, *grads)``. ``joint_inputs`` is ``(primals, tangents)``, the example inputs, as
PyTorch's AOTAutograd passes it: the partitioners count the tangents from it (Note [The joint
graph's contract], aot/joint.h). Without it (``None``) they fall back to PyTorch's naming
contract: the placeholders named ``tangents_*`` (make_fx names a function of ``(primals,
tangents)`` lists so). The forward module maps primals to ``(*fw_outs, *saved_values,
*saved_sym_nodes)``; the backward module maps ``(*saved_sym_nodes, *saved_values, *tangents)`` to the
grads. The work is C++ (aot/partition.h, Note [Partitioning the joint graph]). What was saved is
recorded in ``fw_module.meta["partition"]``, a ``kiln._C._aot.Partition``: ``saved_values``,
``saved_sym_nodes`` (joint-graph names), ``recomputed`` (forward nodes the backward computes again)
and ``saved_bytes``.
"""

import dataclasses

from kiln import _C
from kiln.fx.graph_module import GraphModule

__all__ = ["default_partition", "min_cut_rematerialization_partition", "MinCutOptions"]


@dataclasses.dataclass
class MinCutOptions:
    """Which values min-cut never recomputes (PyTorch's MinCutOptions; the ones kiln implements).

    Compute-heavy ops (matmul, convolution, attention), random ops and ``CheckpointPolicy.MUST_SAVE``
    nodes are banned in every case."""

    ban_if_not_in_allowlist: bool = True  # only pointwise/reduction/view/cheap ops are recomputed
    ban_if_materialized_backward: bool = True  # the backward reads it through a non-fusible op
    ban_if_reduction: bool = True  # its output is 4x smaller than its inputs


def _graph_of(joint_module):
    return joint_module.graph if hasattr(joint_module, "graph") else joint_module


def _joint_graph(joint_module, joint_inputs, num_fwd_outputs):
    """The ``kiln._C._aot.JointGraph`` the C++ partitioners take: the tangents counted from
    ``joint_inputs = (primals, tangents)``, else by PyTorch's names (``tangents_*``,
    torch._functorch.partitioners._is_tangent) for a caller that passes no inputs."""
    graph = _graph_of(joint_module)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if isinstance(joint_inputs, (tuple, list)) and len(joint_inputs) == 2 and \
            all(isinstance(x, (tuple, list)) for x in joint_inputs):
        num_tangents = len(joint_inputs[1])
    elif joint_inputs is None:
        num_tangents = sum(n.name.startswith("tangents") for n in placeholders)
    else:
        raise TypeError(f"partition: joint_inputs must be (primals, tangents) lists or None, got "
                        f"{type(joint_inputs).__name__}")
    return _C._aot.JointGraph(graph, len(placeholders) - num_tangents, num_tangents, num_fwd_outputs)


def _modules(joint_module, result):
    root = joint_module if isinstance(joint_module, GraphModule) else {}
    fw_module = GraphModule(root, result.forward)
    bw_module = GraphModule(root, result.backward)
    fw_module.meta["partition"] = result
    bw_module.meta["partition"] = result
    return fw_module, bw_module


def default_partition(joint_module, joint_inputs, *, num_fwd_outputs, static_lifetime_input_indices=None,
                      static_lifetime_input_nodes=None):
    """Saves every forward value the backward reads; returns ``(fw_module, bw_module)``.

    As in PyTorch, a joint graph with ``MUST_RECOMPUTE``/``PREFER_RECOMPUTE`` annotations is
    partitioned by min-cut instead."""
    result = _C._aot.partition(_joint_graph(joint_module, joint_inputs, num_fwd_outputs), "default")
    return _modules(joint_module, result)


def min_cut_rematerialization_partition(joint_module, joint_inputs, compiler="inductor", *, num_fwd_outputs,
                                        static_lifetime_input_indices=None, _options=None):
    """Saves a minimum-byte set of forward values (a max-flow/min-cut over the values' sizes) and
    recomputes the rest in the backward; returns ``(fw_module, bw_module)``.

    ``compiler`` is accepted for PyTorch's signature; the bans are the same for every compiler.
    ``_options`` (kiln only) is a :class:`MinCutOptions`."""
    o = _options or MinCutOptions()
    result = _C._aot.partition(_joint_graph(joint_module, joint_inputs, num_fwd_outputs), "min_cut",
                               o.ban_if_not_in_allowlist, o.ban_if_materialized_backward, o.ban_if_reduction)
    return _modules(joint_module, result)
