"""F.triplet_margin_with_distance_loss: the triplet loss under a user's distance function, PyTorch's
Python code over kiln ops (kiln.nn.functional re-exports it).

It lives apart from _loss_functional.py because it calls user code: kiln._dynamo records the
functions of that module as single graph nodes, but traces into this one (as PyTorch's dynamo traces
into its Python), so a distance function is captured in the caller's graph like any other code.
"""

import kiln
from kiln.nn._loss_functional import _check_triplet_dims
from kiln.nn.functional import pairwise_distance

__all__ = ["triplet_margin_with_distance_loss"]


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _check_triplet_dims(anchor, positive, negative)
    if distance_function is None:
        distance_function = pairwise_distance
    dist_pos = distance_function(anchor, positive)
    dist_neg = distance_function(anchor, negative)
    if swap:
        dist_neg = kiln.minimum(dist_neg, distance_function(positive, negative))
    loss = kiln.clamp_min(margin + dist_pos - dist_neg, 0)
    if reduction == "sum":
        return kiln.sum(loss)
    if reduction == "mean":
        return kiln.mean(loss)
    return loss
