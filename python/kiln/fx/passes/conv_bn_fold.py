"""kiln.fx.passes.conv_bn_fold: folds eval-mode BatchNorm2d into the Conv2d before it.

    gm = fuse_conv_bn(kiln.fx.symbolic_trace(model.eval()))

A BatchNorm in eval mode is an affine map per channel, so conv followed by bn equals one conv
with weight and bias

    scale = bn.weight * rsqrt(bn.running_var + bn.eps)
    weight' = conv.weight * scale.reshape(-1, 1, 1, 1)
    bias'   = (conv.bias - bn.running_mean) * scale + bn.bias

Unlike folding that bakes the result into new parameters, this pass computes weight' and bias'
in the graph, from get_attr nodes of the live parameters and buffers, so the folded module keeps
following later updates of the conv weights or the running statistics (an optimizer step, a
load_state_dict) — nothing stale is ever baked in. The arithmetic reads only parameters, so a
later constant-folding stage can hoist it out of the per-input path.

Folded: a call_module of a Conv2d (zero padding) whose only user is a call_module of a
BatchNorm2d that is in eval mode (training False) with running statistics. Anything else,
train-mode BatchNorms in particular, is left alone.
"""

import kiln
from kiln import nn
import kiln.nn.functional as F
from kiln.fx.graph_module import GraphModule

__all__ = ["fuse_conv_bn"]


def _module(gm, target):
    try:
        return gm.get_submodule(target)
    except AttributeError:
        return None


def _foldable(gm, conv_node, bn_node):
    conv, bn = _module(gm, conv_node.target), _module(gm, bn_node.target)
    if not isinstance(conv, nn.Conv2d) or not isinstance(bn, nn.BatchNorm2d):
        return False
    if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
        return False
    if bn.training or bn.running_mean is None or bn.running_var is None:
        return False
    if bn.num_features != conv.out_channels:
        return False
    # The conv's result must feed only the bn, and the bn must take it as its only argument.
    return len(conv_node.users) == 1 and len(bn_node.args) == 1 and not bn_node.kwargs and \
        bn_node.args[0] is conv_node and len(conv_node.args) == 1 and not conv_node.kwargs


def _fold_one(gm, conv_node, bn_node):
    graph = gm.graph
    conv, bn = _module(gm, conv_node.target), _module(gm, bn_node.target)
    c, b = conv_node.target, bn_node.target
    with graph.inserting_before(bn_node):
        w = graph.get_attr(f"{c}.weight")
        rm = graph.get_attr(f"{b}.running_mean")
        rv = graph.get_attr(f"{b}.running_var")
        # scale = bn.weight * rsqrt(running_var + eps): one factor per output channel.
        inv_std = graph.call_function(kiln.rsqrt, (graph.call_function(kiln.add, (rv, bn.eps)),))
        scale = graph.call_function(kiln.mul, (graph.get_attr(f"{b}.weight"), inv_std)) if bn.weight is not None \
            else inv_std
        fused_w = graph.call_function(kiln.mul, (w, graph.call_method("reshape", (scale, [-1, 1, 1, 1]))))
        # bias' = (conv.bias - running_mean) * scale + bn.bias
        centred = graph.call_function(kiln.sub, (graph.get_attr(f"{c}.bias"), rm)) if conv.bias is not None \
            else graph.call_function(kiln.neg, (rm,))
        fused_b = graph.call_function(kiln.mul, (centred, scale))
        if bn.bias is not None:
            fused_b = graph.call_function(kiln.add, (fused_b, graph.get_attr(f"{b}.bias")))
        out = graph.call_function(F.conv2d, (conv_node.args[0], fused_w, fused_b, tuple(conv.stride),
                                             tuple(conv.padding), tuple(conv.dilation), conv.groups))
    out.meta.update(dict(bn_node.meta))
    bn_node.replace_all_uses_with(out)
    graph.erase_node(bn_node)
    graph.erase_node(conv_node)


def fuse_conv_bn(gm):
    """Folds each eval-mode Conv2d -> BatchNorm2d pair of `gm` (a GraphModule, or a module to
    trace first) into one conv whose weight and bias are computed in the graph from the live
    parameters and buffers. Edits gm in place and returns it; train-mode pairs stay as they are."""
    if not isinstance(gm, GraphModule):
        if not isinstance(gm, nn.Module):
            raise TypeError(f"fuse_conv_bn expects a kiln.fx.GraphModule or an nn.Module, got {type(gm).__name__}")
        from kiln.fx._symbolic_trace import symbolic_trace

        gm = symbolic_trace(gm)
    pairs = []
    for node in gm.graph.nodes:
        if node.op == "call_module" and node.args and getattr(node.args[0], "op", None) == "call_module":
            conv_node = node.args[0]
            if _foldable(gm, conv_node, node):
                pairs.append((conv_node, node))
    for conv_node, bn_node in pairs:
        _fold_one(gm, conv_node, bn_node)
    if pairs:
        gm.graph.lint()
        gm._lazy_recompile()
    return gm
