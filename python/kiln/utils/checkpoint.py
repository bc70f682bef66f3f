"""kiln.utils.checkpoint: selective activation checkpointing policies.

``CheckpointPolicy`` mirrors ``torch.utils.checkpoint.CheckpointPolicy`` (same names and values).
A node of a joint graph annotated ``node.meta["recompute"] = CheckpointPolicy.MUST_SAVE`` is always
saved for the backward by ``min_cut_rematerialization_partition``; ``MUST_RECOMPUTE`` (and
``PREFER_RECOMPUTE``) always recomputed; ``PREFER_SAVE`` is treated as ``MUST_SAVE``
(aot/partition.h). The ``checkpoint`` function itself is not implemented yet.
"""

import enum

__all__ = ["CheckpointPolicy"]


class CheckpointPolicy(enum.Enum):
    """Whether an op's output is saved for the backward or recomputed there."""

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
