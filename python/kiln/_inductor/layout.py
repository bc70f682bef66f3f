"""Layout optimization: channels-last (NHWC) activations for graphs with 2-d convolutions, as
PyTorch's Inductor chooses them (config.layout_optimization, GraphLowering.decide_layout_opt,
config.keep_output_stride).

Note [Layout optimization]: kiln's CPU convolutions run on oneDNN in nhwc (Note [oneDNN
convolutions] in tensor/ops/conv_onednn.cc), so an nchw activation is reordered into nhwc before
each convolution and its result back after it, and the batch norms, activations and pools
between them read and write nchw. An inference graph whose convolutions are all 4-d float32 CPU
ones (not transposed, static shapes) is instead laid out channels-last, as PyTorch's Inductor
does on a CPU with mkldnn:
- each convolution that runs on oneDNN (N * oh * ow >= 128) reads its activation channels-last:
  `clone(x, channels_last)` where x is not so already, which a lazy x turns into its own kernel
  storing in that layout (no copy); the smaller ones, which run kiln's im2col kernel, read nchw;
- every node's meta value is propagated again on the fake tensors (eager's stride rules: a
  channels-last convolution gives a channels-last result, pointwise ops and pools follow their
  input), so the kernels after a convolution read and write nhwc, the inner loop along C; an op
  whose eager kernel drops the layout (max_pool2d's backward) is followed by a channels-last
  clone for its readers; weights keep the user's layout (oneDNN reorders them on every call);
- outputs the user sees leave with eager's strides (PyTorch's keep_output_stride, always on in
  kiln: Note [Output strides] in inductor/graph/graph_lowering.h), copied back where they differ.
resnet18 (batch 16, 64x64, eval, one thread): 29.5 -> 26.9 ms, the convolutions 29.8 -> 25.7.

Training graphs keep nchw unless config.force_layout_optimization (measured on resnet18, one
thread): batch norm's statistics and gradient sums reduce over N, H and W, which channels-last
puts outside C, and kiln's loop reductions then walk one strided column per channel (the stem's
var_mean 0.2 -> 1.0 ms; eager's sums get slower too); without batch norm, the weight gradients
come out of the backward convolutions channels-last and are copied into the parameters' layout
(3 ms a step), and max_pool2d's backward returns nchw, transposed again (2 ms), more than the
convolutions gain (4.5 ms). An inference graph with per-channel statistics (a train-mode batch
norm under no_grad) keeps nchw for the same reason. Forced, a forward graph's saved values stay
channels-last and its backward, compiled after it (and the specialised backwards compiled
later), reads them so: their placeholders take the strides the forward produced
(`saved_layouts`, by node name, as PyTorch's TracingContext.report_output_strides).

A graph whose fake propagation fails, or whose user-visible output changes a layout that is no
dense one (a strided view), is left as it was (logged under KILN_LOGS=+inductor).
"""

import logging

import kiln
from kiln._inductor import config
from kiln.fx.node import map_arg

aten = kiln.ops.aten
log = logging.getLogger(__name__)

# The convolution ops, each with the positions of the activations laid out channels-last and of
# its `transposed` argument.
_CONVOLUTIONS = {aten.convolution.default: ((0,), 6), aten.convolution_backward.default: ((0, 1), 7)}


def _static(t):
    return all(type(s) is int for s in tuple(t.shape) + tuple(t.stride()))


def is_channels_last(t):
    """Whether a 4-d tensor is dense with C innermost, then W, H, N (size-1 dims' strides free)."""
    if t.dim() != 4 or not _static(t):
        return False
    expected = 1
    for d in (1, 3, 2, 0):
        if t.shape[d] != 1:
            if t.stride(d) != expected:
                return False
            expected *= t.shape[d]
    return True


def _dense(shape, stride):
    order = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -stride[d])
    expected = 1
    for d in reversed(order):
        if stride[d] != expected:
            return False
        expected *= shape[d]
    return True


def _why_not_nhwc(node):
    """Why a convolution node does not run in nhwc on oneDNN (None when it does)."""
    positions, transposed_at = _CONVOLUTIONS[node.target]
    if len(node.args) > transposed_at and node.args[transposed_at]:
        return "a transposed convolution"
    for i in positions:
        val = getattr(node.args[i], "meta", {}).get("val")
        if not isinstance(val, kiln.Tensor):
            return "an input without a meta value"
        if val.dim() != 4:
            return f"a {val.dim() - 2}-d convolution"
        if val.device.type != "cpu" or val.dtype != kiln.float32:
            return f"a {val.dtype} convolution on {val.device}"
        if not _static(val):
            return "a convolution of symbolic shape"
    return None


# Below this many output positions per weight (N * oh * ow) kiln's eager convolution runs its own
# im2col kernel, not oneDNN (kMinWeightReuse in tensor/ops/conv_onednn.cc); that kernel reads
# nchw, and given channels-last tensors it copies them and its weight gradient comes out
# channels-last (resnet18's 2x2 stage at batch 16: its backward 4.9 ms nchw, 6.2 ms nhwc).
_MIN_WEIGHT_REUSE = 128


def _weight_reuse(node):
    """N * oh * ow of a convolution (its output, or convolution_backward's output gradient)."""
    out = node.meta.get("val") if node.target is aten.convolution.default else node.args[0].meta.get("val")
    reuse = 1
    for d in [0] + list(range(2, out.dim())):
        reuse *= out.shape[d]
    return reuse


def _per_channel_reduction(node):
    """Whether a node reduces a 4-d activation over N, keeping C (batch norm's training statistics
    and the sums of its backward): a reduction (Tag.reduction) over a `dim` list."""
    target = node.target
    if node.op != "call_function" or kiln.Tag.reduction not in getattr(target, "tags", ()):
        return False
    arguments = target._schema.arguments
    if len(arguments) < 2 or arguments[1].name != "dim":
        return False
    x = getattr(node.args[0], "meta", {}).get("val")
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if not isinstance(x, kiln.Tensor) or x.dim() != 4 or not isinstance(dims, (list, tuple)):
        return False
    dims = {d % 4 for d in dims}
    return 0 in dims and 1 not in dims


def decide_layout_opt(gm, kind):
    """The memory format of each convolution's activations (Note [Layout optimization]), as
    {node: channels_last or contiguous_format}: empty unless config.layout_optimization is on and
    the graph is an inference graph whose convolutions are all 4-d float32 CPU ones, some of
    which run on oneDNN, and which holds no per-channel statistics; with
    config.force_layout_optimization, every convolution of any graph channels-last."""
    if not config.layout_optimization:
        return {}
    convs = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in _CONVOLUTIONS]
    if not convs:
        return {}
    if config.force_layout_optimization:
        return {node: kiln.channels_last for node in convs}
    if kind != "inference":
        log.debug("layout optimization skipped: a %s graph (Note [Layout optimization])", kind)
        return {}
    for node in convs:
        why = _why_not_nhwc(node)
        if why is not None:
            log.debug("layout optimization skipped: %s (%s)", why, node.name)
            return {}
    statistics = next((n for n in gm.graph.nodes if _per_channel_reduction(n)), None)
    if statistics is not None:
        log.debug("layout optimization skipped: per-channel statistics (%s), which kiln reduces faster in nchw",
                  statistics.name)
        return {}
    formats = {node: kiln.channels_last if _weight_reuse(node) >= _MIN_WEIGHT_REUSE else kiln.contiguous_format
               for node in convs}
    if all(f is kiln.contiguous_format for f in formats.values()):
        log.debug("layout optimization skipped: every convolution runs kiln's im2col kernel")
        return {}
    return formats


def _outputs(gm):
    outs = gm.graph.output_node().args[0]
    return list(outs) if isinstance(outs, (tuple, list)) else [outs]


def _num_user_visible(gm, kind, saved_layouts):
    """How many of the graph's outputs leave in eager's layout: all but a forward graph's saved
    values and sizes (fw_module.meta["partition"], kiln._functorch.partitioners), and all of a
    forward whose backward will not hear of their layouts (no `saved_layouts` to fill)."""
    n = len(_outputs(gm))
    if kind != "forward" or saved_layouts is None:
        return n
    info = gm.meta.get("partition")
    return n if info is None else n - len(info.saved_values) - len(info.saved_sym_nodes)


def _fake_mode(gm):
    from kiln._subclasses.fake_tensor import _mode_of

    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, kiln.Tensor):
            mode = _mode_of(val)
            if mode is not None:
                return mode
    return None


def optimize_layouts(gm, kind, saved_layouts=None):
    """The pass (Note [Layout optimization]) on a graph of `kind` ("forward", "backward" or
    "inference"); `saved_layouts` (name -> strides) carries a forward's saved values' layouts
    to its backward: filled by a forward, read by a backward. Returns whether it changed the
    graph; when it did, gm.meta["output_strides"] maps output positions to the strides they
    leave with where those differ from their (new) meta value's."""
    restrided = {}
    if kind == "backward" and saved_layouts:
        for node in gm.graph.nodes:
            val = node.meta.get("val")
            stride = saved_layouts.get(node.name) if node.op == "placeholder" else None
            if stride is not None and isinstance(val, kiln.Tensor) and tuple(val.stride()) != stride:
                restrided[node] = stride
    convert = {}  # convolution (or view, _propagate) -> (the argument positions to lay out, the memory format)
    for node, memory_format in decide_layout_opt(gm, kind).items():
        convert[node] = ([i for i in _CONVOLUTIONS[node.target][0] if isinstance(node.args[i], kiln.fx.Node)],
                         memory_format)
    if not convert and not restrided:
        return False
    mode = _fake_mode(gm)
    if mode is None:
        return False
    relaid = {}
    try:
        vals = _propagate(gm, mode, restrided, convert, relaid)
    except Exception as e:  # noqa: BLE001 - an op the fake tensors refuse: the graph stays as it was
        log.debug("layout optimization skipped: propagating layouts failed (%s: %s)", type(e).__name__, e)
        return False
    outs = _outputs(gm)
    visible = _num_user_visible(gm, kind, saved_layouts)
    output_strides = {}
    for i, out in enumerate(outs):
        old, new = getattr(out, "meta", {}).get("val"), vals.get(out) if hasattr(out, "op") else None
        if not isinstance(old, kiln.Tensor) or not isinstance(new, kiln.Tensor):
            continue
        if i < visible and tuple(old.stride()) != tuple(new.stride()):
            if not _static(old) or not _dense(list(old.shape), list(old.stride())):
                log.debug("layout optimization skipped: output %d (%s) is a strided view %s", i, out.name,
                          tuple(old.stride()))
                return False
            output_strides[i] = list(old.stride())
    _commit(gm, mode, vals, convert, relaid)
    gm.meta["output_strides"] = output_strides
    if kind == "forward" and saved_layouts is not None:
        for out in outs[visible:]:
            val = out.meta.get("val") if hasattr(out, "op") else None
            if isinstance(val, kiln.Tensor) and _static(val):
                saved_layouts[out.name] = tuple(val.stride())
    log.debug("layout optimization: %d of %d convolutions and views channels-last, %d saved inputs restrided, %d outputs "
              "copied back", sum(f is kiln.channels_last for _, f in convert.values()), len(convert), len(restrided),
              len(output_strides))
    return True


def _in_format(val, memory_format):
    """Whether val is laid out dense in memory_format (channels_last or contiguous_format)."""
    return is_channels_last(val) if memory_format is kiln.channels_last else \
        _static(val) and _dense(list(val.shape), list(val.stride())) and val.is_contiguous()


def _converted(mode, val, memory_format):
    with mode:
        return aten.clone.default(val, memory_format=memory_format)


def _drops_channels_last(node, args, val):
    """Whether an op returned a 4-d activation laid out otherwise than the channels-last one of
    the same shape it read (eager's max_pool2d backward gives nchw whatever its input)."""
    if node.target is aten.clone.default or not isinstance(val, kiln.Tensor) or val.dim() != 4 or \
            not _static(val) or is_channels_last(val) or val.shape[1] == 1 or val.shape[2] * val.shape[3] == 1:
        return False
    return any(isinstance(a, kiln.Tensor) and tuple(a.shape) == tuple(val.shape) and is_channels_last(a)
               for a in args)


def _propagate(gm, mode, restrided, convert, relaid):
    """Every node's meta value again on the fake tensors: placeholders in `restrided` take those
    strides, the convolutions in `convert` read copies of those arguments in that format (an op
    that refuses its new layout joins `convert`, reading contiguous copies where it read
    contiguous tensors); a node that dropped a channels-last layout (_drops_channels_last) goes
    into `relaid`, with the channels-last copy its readers see (when `convert` is not empty)."""
    vals, seen = {}, {}  # a node's value; what its readers read (its channels-last copy, if relaid)
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder" or node.op == "get_attr":
            if node in restrided:
                with mode:
                    val = aten.empty_strided.default(list(val.shape), list(restrided[node]), dtype=val.dtype,
                                                     device=val.device)
            vals[node] = seen[node] = val
        elif node.op == "call_function":
            args = list(map_arg(tuple(node.args), lambda n: seen[n]))
            kwargs = map_arg(dict(node.kwargs), lambda n: seen[n])
            positions, memory_format = convert.get(node, ((), None))
            for i in positions:
                if not _in_format(args[i], memory_format):
                    args[i] = _converted(mode, args[i], memory_format)
            try:
                with mode:
                    vals[node] = seen[node] = node.target(*args, **kwargs)
            except RuntimeError:
                # a view the new layout cannot give (`x.view(n, -1)` of a channels-last x, before a
                # Linear): it reads its input contiguous, as it did
                back = [i for i, a in enumerate(node.args) if isinstance(a, kiln.fx.Node) and
                        isinstance(args[i], kiln.Tensor) and _in_format(a.meta.get("val"), kiln.contiguous_format)
                        and not _in_format(args[i], kiln.contiguous_format)]
                if node in convert or not back:
                    raise
                for i in back:
                    args[i] = _converted(mode, args[i], kiln.contiguous_format)
                with mode:
                    vals[node] = seen[node] = node.target(*args, **kwargs)
                convert[node] = (back, kiln.contiguous_format)
            if convert and _drops_channels_last(node, list(args) + list(kwargs.values()), vals[node]):
                relaid[node] = seen[node] = _converted(mode, vals[node], kiln.channels_last)
    return vals


def _commit(gm, mode, vals, convert, relaid):
    """The graph rewritten: clones before the convolutions and after the nodes in `relaid` (read
    by every reader but the output), every node's new meta value."""
    graph = gm.graph
    for node, val in relaid.items():
        readers = [u for u in node.users if u.op != "output"]
        with graph.inserting_after(node):
            clone = graph.call_function(aten.clone.default, (node,), {"memory_format": kiln.channels_last})
        clone.meta.update({k: v for k, v in node.meta.items() if k in ("stack_trace", "nn_module_stack")})
        clone.meta["val"] = vals[clone] = val
        for user in readers:
            user.replace_input_with(node, clone)
    clones = {}
    for conv, (positions, memory_format) in convert.items():
        args = list(conv.args)
        for i in positions:
            src = args[i]
            if _in_format(vals[src], memory_format):
                continue
            if (src, memory_format) not in clones:
                with graph.inserting_before(conv):
                    clone = graph.call_function(aten.clone.default, (src,), {"memory_format": memory_format})
                clone.meta.update({k: v for k, v in src.meta.items() if k in ("stack_trace", "nn_module_stack")})
                clone.meta["val"] = _converted(mode, vals[src], memory_format)
                clones[src, memory_format] = clone
            args[i] = clones[src, memory_format]
        conv.args = tuple(args)
    for node, val in vals.items():
        node.meta["val"] = val
    gm._lazy_recompile()
