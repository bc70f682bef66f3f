"""GraphLowering: an aten FX graph -> kernels + a Python wrapper that runs them.

Walks the graph in order, lowering each node (lowering.py: the C++ lowering table) to a lazy value; values become kernels
only when realized: graph outputs, values read by more than one node (unless cheap to recompute:
Note [Recompute or realize]), arguments of fallback ops. Realizing a value forms one kernel
holding everything lazy behind it, in C++ (kiln._C._inductor.scheduler.Scheduler, Note [Kernels
formed at realization] in inductor/scheduler/scheduler.h): vertical fusion of pointwise chains,
a reduction with the pointwise code before it and after it along the reduced axis, epilogues of
a reduction loop (Pointwise.space); a reduction several nodes read is deferred to its first use,
and sibling reductions over the same loop reading one of its buffers join its kernel (horizontal
fusion). This module decides what to realize and in which layout (graph outputs, extern ops'
arguments) and records the extern calls. The records (Alloc, KernelCall, View, ExternCall,
Return) become the wrapper with its memory planned in wrapper.py.
"""

import operator

import kiln
from kiln import _C
from kiln._C._inductor.ir import dense_order, expanded_dims, gapped_order, same_layout, squeezed_strides
from kiln._C._inductor.scheduler import Scheduler, cheap_to_recompute
from kiln._C._inductor.lowering import GraphContext
from kiln._inductor.ir import Buffer, Pointwise, Reduction
from kiln._inductor import autotune
from kiln._inductor.bisect_controls import fusions, lowerings
from kiln._inductor.lowering import Fallback, V, ViewOfUnrealized, has_lowering, lower, mm_template
from kiln._inductor.wrapper import (Alloc, ExternCall, KernelCall, Return, View, plan_memory, wrapper_code,
                                    wrapper_program)
from kiln._logging import getArtifactLogger
from kiln.fx.node import Node
from kiln.fx.traceback import provenance_comments

output_code_log = getArtifactLogger(__name__, "output_code")


class Kernel:
    """A kernel's IR (a kernel_ir.Kernel) and the buffers it takes, compiled on first use: memory
    planning may still rewrite the IR (an in-place kernel reads its victim through the output's
    pointer)."""

    def __init__(self, name, ir, buffers, stack_traces=(), ops=()):
        self.name, self.ir, self.buffers, self._compiled = name, ir, buffers, None
        self.stack_traces = list(stack_traces)  # of the nodes it computes, in graph order
        self.ops = set(ops)  # the aten ops its code computes (its name's)

    @property
    def provenance(self):
        """`# File ...` comments: the user's lines it computes (read only where the output code is)."""
        return provenance_comments(self.stack_traces)

    def rewrite(self, ir, buffers):
        self.ir, self.buffers, self._compiled = ir, buffers, None

    @property
    def compiled(self):
        if self._compiled is None:
            self._compiled = _C._inductor.compile(self.ir)
        return self._compiled


def compile_kernels(kernels, threads):
    """Compiles the kernels not compiled yet on up to `threads` threads, each distinct body once
    (Note [Kernels keyed by body] in codegen/llvm_codegen.cc: a model's repeated layers give the
    same kernels under other names)."""
    todo = [k for k in kernels if k._compiled is None]
    for kernel, compiled in zip(todo, _C._inductor.compile_many([k.ir for k in todo], threads)):
        kernel._compiled = compiled


class GraphLowering:
    def __init__(self, gm, config=None):
        self.gm = gm
        self.config = config or {}
        self.records = []          # the wrapper's steps (wrapper.py: Alloc, KernelCall, View, ExternCall, Return)
        self.kernels = []
        # forms the kernels (C++); its state: which lazy values kernels computed (lazy value -> its
        # Buffer), the snapshots some reads are decided by (Note [Realized as of]), and every Reduction
        # lowerings made (sibling candidates)
        self.scheduler = Scheduler()
        self.state = self.scheduler.state
        self.realized = self.state.now
        self.inputs = []
        self.fallbacks = []
        self.env = {}
        self._lowered = []         # (node, its lowered value), in order: pre_fusion's lines
        self._memory_plan = None
        self.autotune_choices = []  # (op, chosen alternative) under max-autotune
        # what the C++ lowerings share (inductor/lowering/reductions.h): the scheduler, the means
        # variances computed (mean.dim of the same input and axes reads one)
        self.lowering_context = GraphContext(self.scheduler)
        # layout.py's choice (Note [Layout optimization]): output position -> the strides it
        # leaves with (eager's) where its meta value's differ; None when the graph kept its layouts
        self.output_strides = gm.meta.get("output_strides") if hasattr(gm, "meta") else None

    # --- buffers and kernels (formed by the C++ Scheduler) ---------------------------------------
    def new_buffer(self, dtype, shape, stride=None, offset=0):
        return self.scheduler.new_buffer(dtype, list(shape), None if stride is None else list(stride), offset)

    def _formed(self, result):
        """result, after the steps the scheduler made for it joined the records (its kernels
        among self.kernels)."""
        for step in self.scheduler.take_steps():
            kind = step.kind
            if kind == "alloc":
                self.records.append(Alloc(step.buf))
            elif kind == "view":
                self.records.append(View(step.buf, step.base))
            else:
                formed = step.kernel
                kernel = self._kernel(formed)
                self.kernels.append(kernel)
                self.records.append(KernelCall(kernel))
        return result

    def _kernel(self, formed):
        return Kernel(formed.ir.name, formed.ir, formed.buffers, formed.stack_traces, formed.ops)

    def define(self, buf):
        """Makes the wrapper define `buf` (a view of another buffer is defined from its base)."""
        return self._formed(self.scheduler.define(buf))

    def realize(self, value):
        if not isinstance(value, (Buffer, Pointwise, Reduction)):
            raise TypeError(f"cannot realize {type(value).__name__}")
        return self._formed(self.scheduler.realize(value))

    def _kernel_for_pointwise(self, value, stride=None):
        """One kernel over value's shape (and the members of value.group not computed yet); with
        `stride` (a dense or gapped layout: a graph output's), stored in that layout."""
        return self._formed(self.scheduler.kernel_for_pointwise(value, None if stride is None else list(stride)))

    def _squeezed_view(self, buf, shape):
        """buf seen with another shape that differs only in size-1 dimensions (no copy)."""
        return self._formed(self.scheduler.squeezed_view(buf, list(shape)))

    # --- realization -----------------------------------------------------------------------------
    def realize_output(self, value, stride):
        """A graph output in memory with the strides its node's meta value promises (Note [Output
        strides]): a lazy value is computed straight into that layout; a kernel output already
        computed in another layout is copied into it."""
        dense = stride is not None and dense_order(value.shape, stride) is not None
        # a view's layout with gaps (`v[:, ::2]`), where an extern op reads it: its results'
        # strides follow this input's (a split piece of a compacted copy was read with the gaps)
        gapped = stride is not None and not dense and gapped_order(value.shape, stride) is not None
        plain = isinstance(value, Pointwise) and value.space is None and value.squeeze_of is None \
            and value not in self.realized
        if plain and stride is not None and not dense and expanded_dims(value.shape, stride):
            expanded = self._realize_expanded(value, stride)
            if expanded is not None:
                self.realized[value] = expanded
                return expanded
        if (dense or gapped) and plain:
            buf = self._kernel_for_pointwise(value, stride)
            self.realized[value] = buf
            return buf
        buf = self.realize(value)
        if (dense or gapped) and _produced(buf) and not same_layout(buf.shape, buf.stride, stride):
            copy = Pointwise(buf.dtype, buf.shape, lambda ctx, idx: ctx.load(buf, idx), set())
            return self._kernel_for_pointwise(copy, stride)
        return buf

    def _in_user_layout(self, value, stride):
        """A graph output in the dense layout eager gives it where layout optimization laid its
        node out otherwise (Note [Layout optimization]): computed into it, or copied into it from
        whatever made it (an extern convolution's channels-last result included)."""
        buf = self.realize_output(value, stride)
        if same_layout(buf.shape, buf.stride, stride):
            return buf
        copy = Pointwise(buf.dtype, buf.shape, lambda ctx, idx: ctx.load(buf, idx), {"copy"})
        return self._kernel_for_pointwise(copy, stride)

    def _realize_expanded(self, value, stride):
        """value in an expanded layout (Note [Expanded layouts]): its elements at index 0 of each
        expanded dimension computed into a dense buffer, seen with stride 0 along those
        dimensions; None when the other dimensions are no dense layout."""
        expanded = expanded_dims(value.shape, stride)
        shape = [1 if d in expanded else n for d, n in enumerate(value.shape)]
        if dense_order(shape, stride) is None:
            return None
        # over a size-1 dimension the loop index is 0: fn reads the first of the repeated elements
        buf = self._kernel_for_pointwise(Pointwise(value.dtype, shape, None, value.ops, like=value), list(stride))
        return self.define(Buffer(None, value.dtype, list(value.shape), list(stride), buf.offset, origin=buf))

    def _output_view(self, node, meta):
        """An output whose meta layout is no dense one of its own (a strided view into a larger
        intermediate: `seq[:, -1].t()` saved for a backward) computed as that view: the
        intermediate its chain of view nodes starts from is realized in its own meta layout and
        the views are lowered again over its buffer, giving the meta strides and offset (Note
        [Output strides]). None where the output is not such a view of a computed value.

        So is an output whose dense meta layout is exactly what the chain makes of its base's
        (a transpose of a row-major value, column-major): the base is computed once, in its own
        layout, for the view and for its other readers. A gelu backward that a sum read and a
        matmul read transposed was computed twice into the same memory order, and a gradient
        already in memory was copied to be read transposed (the digits MLP's backward)."""
        if isinstance(self.env.get(node), Buffer):
            return None
        dense = dense_order(list(meta.shape), list(meta.stride())) is not None
        chain, base = [], node
        while getattr(base, "op", None) == "call_function" and _is_lowered_view(base.target) and base.args and \
                not isinstance(self.env.get(base), Buffer):
            chain.append(base)
            base = base.args[0]
        value = self.env.get(base) if isinstance(base, Node) else None
        base_meta = base._meta_get_or("val", None) if isinstance(base, Node) else None
        if not chain or not isinstance(value, (Pointwise, Reduction)) or not isinstance(base_meta, kiln.Tensor):
            return None
        if dense:
            # the chain over a buffer laid out as base_meta (a dry run: view lowerings of a Buffer
            # only make Buffers) must give meta's strides at that buffer's own offset (a
            # transpose, a permute, a reshape of a dense base; no slice into it)
            probe = Buffer(None, base_meta.dtype, list(base_meta.shape), list(base_meta.stride()))
            out = self._lower_views(chain, probe)
            if out is None or list(out.shape) != list(meta.shape) or out.offset != probe.offset or \
                    not same_layout(out.shape, out.stride, list(meta.stride())):
                return None
        out = self._lower_views(chain, self.realize_output(value, list(base_meta.stride())))
        return None if out is None else self.define(out)

    def _lower_views(self, chain, buf):
        """The view nodes in `chain` (last first) lowered again over `buf`: a Buffer, or None
        where one of them cannot view a buffer."""
        for view in reversed(chain):
            try:
                buf = lower(view.target, view.meta["val"], [buf] + [self._arg(a) for a in view.args[1:]],
                            {k: self._arg(v) for k, v in view.kwargs.items()})
            except (Fallback, NotImplementedError):
                return None
            if not isinstance(buf, Buffer):
                return None
        return buf

    def _realize_in_meta_layout(self, node):
        """node's value in memory laid out as its meta value (a kernel's output, or a buffer)."""
        value, meta = self.env[node], node._meta_get_or("val", None)
        if not isinstance(value, (Buffer, Pointwise, Reduction)) or not isinstance(meta, kiln.Tensor):
            return value
        return self.realize_output(value, list(meta.stride()))

    def cheap_to_recompute(self, value):
        """Note [Recompute or realize] (inductor/scheduler/fusion.h)."""
        return cheap_to_recompute(value, self.state)

    # --- the graph -------------------------------------------------------------------------------
    def run(self):
        previous, V.graph = V.graph, self
        try:
            with self.state.lowering():  # the Reductions lowerings make join self.state.reductions
                return self._run()
        finally:
            V.graph = previous

    def _run(self):
        nodes = list(self.gm.graph.nodes)
        users = {n: n._num_users for n in nodes}
        node_names = {n.name for n in nodes}
        shared = _storages_outputs_share(self.gm.graph)
        # lazy values that recompute a value several nodes read (Note [Recompute or realize])
        recomputes = set()
        for node in nodes:
            if node.op == "placeholder":
                val = node.meta["val"]
                name = _input_name(node.name, node_names)
                if isinstance(val, kiln.Tensor):
                    buf = Buffer(name, val.dtype, list(val.shape), list(val.stride()), val.storage_offset())
                    self.scheduler.mark_defined(buf.name)
                    self.env[node] = buf
                else:
                    self.env[node] = val
                self.inputs.append(name)
            elif node.op == "call_function":
                self.env[node] = self._call(node)
                value = self.env[node]
                _record_origin(value, (len(self._lowered), node._meta_get_or("stack_trace", None)))
                self._lowered.append((node, value))
                if isinstance(value, (Pointwise, Reduction)) and not fusions.allow_node(node):
                    self.env[node] = value = self.realize(value)  # kiln._dynamo.bisect: no fusion past here
                base = value
                while isinstance(base, Pointwise) and base.squeeze_of is not None:
                    base = base.squeeze_of
                if isinstance(base, Reduction) and users[node] > 1:
                    buf = self.scheduler.defer(base)
                    self.env[node] = buf if base is value else \
                        Buffer(None, buf.dtype, value.shape, squeezed_strides(buf.shape, buf.stride, value.shape), origin=buf)
                elif isinstance(value, Pointwise):
                    chained = any(a in recomputes and isinstance(self.env[a], Pointwise) for a in node.all_input_nodes)
                    if users[node] > 1 and _computes(value):
                        if chained or not self.cheap_to_recompute(value):
                            # in its meta layout where layout.py chose one (channels-last after a
                            # convolution)
                            self.env[node] = self._realize_in_meta_layout(node) if self.output_strides is not None \
                                else self.realize(value)
                        else:
                            recomputes.add(node)
                    elif chained:
                        recomputes.add(node)
                if node in shared:  # Note [Outputs sharing a storage]
                    self.env[node] = self._realize_in_meta_layout(node)
            elif node.op == "output":
                outs = node.args[0]
                outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
                results = []
                for i, o in enumerate(outs):
                    v = self.env.get(o) if isinstance(o, Node) else o
                    if isinstance(v, (Buffer, Pointwise, Reduction)) and i in (self.output_strides or {}):
                        v = self._in_user_layout(v, self.output_strides[i])
                    elif isinstance(v, (Buffer, Pointwise, Reduction)):
                        meta = o._meta_get_or("val", None) if isinstance(o, Node) else None
                        view = self._output_view(o, meta) if isinstance(meta, kiln.Tensor) else None
                        v = view if view is not None else \
                            self.realize_output(v, list(meta.stride()) if isinstance(meta, kiln.Tensor) else None)
                    results.append(v)
                self.records.append(Return(results))
            else:
                raise NotImplementedError(f"inductor: {node.op} nodes")
        return self

    def _call(self, node):
        args = [self._arg(a) for a in node.args]
        kwargs = {k: self._arg(v) for k, v in node.kwargs.items()}
        if node.target is operator.getitem:
            return args[0][args[1]]
        out = node._meta_get_or("val", None)
        if self.config.get("max_autotune") and autotune.tunable(node.target):
            return self._autotuned(node, out, args, kwargs)
        if isinstance(out, kiln.Tensor) or (isinstance(out, (tuple, list)) and out and
                                            all(isinstance(o, kiln.Tensor) for o in out)):
            if has_lowering(node.target) and not lowerings.allow_node(node):
                return self._fallback(node, args, kwargs, "kiln._dynamo.bisect: lowering turned off")
            try:
                return lower(node.target, out, args, kwargs)
            except ViewOfUnrealized:
                # in its meta layout, the one eager's view read: an expanded value stays expanded
                # (Note [Expanded layouts])
                args[0] = self._realize_in_meta_layout(node.args[0]) if isinstance(node.args[0], Node) else args[0]
                args[0] = self.realize(args[0])
                try:
                    return lower(node.target, out, args, kwargs)
                except Fallback as again:
                    return self._fallback(node, args, kwargs, str(again))
            except Fallback as why:
                return self._fallback(node, args, kwargs, str(why))
            except NotImplementedError as why:
                return self._fallback(node, args, kwargs, str(why))
        return self._fallback(node, args, kwargs, "non-tensor result")

    def _autotuned(self, node, out, args, kwargs):
        """max-autotune: the alternative autotune.choose timed fastest for this layout."""
        metas = [a._meta_get_or("val", None) if isinstance(a, Node) else a for a in node.args]
        choice = autotune.choose(node.target, out, metas, dict(node.kwargs), generated=_generated_mm)
        self.autotune_choices.append((str(node.target), choice))
        if choice == "generated":
            try:
                if node.target is kiln.ops.aten.addmm.default:
                    return mm_template(out, args[1], args[2], bias=args[0], **kwargs)
                return mm_template(out, *args)
            except Fallback as why:
                return self._fallback(node, args, kwargs, str(why))
        if choice == "im2col":
            return self._fallback(node, args, kwargs, "autotune: im2col", target=autotune.conv2d_im2col)
        return self._fallback(node, args, kwargs, "autotune: the extern kernel")

    def _arg(self, a):
        if isinstance(a, Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._arg(x) for x in a)
        return a

    @property
    def pre_fusion(self):
        """Each node's lowered value, before kernels are formed (KILN_COMPILE_DEBUG's ir_pre_fusion.txt)."""
        return [f"{node.name} = {node.target}: {_describe(value)}" for node, value in self._lowered]

    def memory_plan(self):
        """The wrapper's memory plan (wrapper.py's plan_memory), made once: its in-place writes
        rewrite kernels' IR, which must happen before they compile."""
        if self._memory_plan is None:
            self._memory_plan = plan_memory(self)
        return self._memory_plan

    def wrapper_program(self, as_declared):
        """The wrapper as a WrapperProgram over the compiled kernels (wrapper.py)."""
        return wrapper_program(self, self.memory_plan(), as_declared)

    def wrapper_code(self):
        """Python source of `call(args)`, with buffer lifetimes planned (wrapper.py)."""
        return wrapper_code(self, self.memory_plan())

    @staticmethod
    def _view_results_of(node, target, args, kwargs, val):
        """The results of an extern op that returns views of its first argument, laid out as they
        are over that argument's buffer: the op run on a meta tensor with the buffer's layout.
        `v1[1:].split(1, 1)[-1].view(-1)` was made past the end of the buffer `v1[1:]` was computed
        into (fuzz seed 1041, program 3175), and a chunk of an expanded value computed densely was
        read with the stride 0 of its meta value: a wrong matmul (fuzz seed 1051, program 1517).
        Other ops, and views of non-buffer or symbolic inputs, keep their meta value."""
        source = node.args[0] if node.args else None
        meta = source._meta_get_or("val", None) if isinstance(source, Node) else None
        if not _returns_alias(target) or not args or not isinstance(args[0], Buffer) or \
                not isinstance(meta, kiln.Tensor) or not all(map(_plain_ints, [*args[1:], *kwargs.values()])):
            return val
        buf = args[0]
        if (list(buf.stride), buf.offset) == (list(meta.stride()), meta.storage_offset()):
            return val
        try:
            span = sum((n - 1) * abs(st) for n, st in zip(buf.shape, buf.stride)) if buf.numel() else 0
            base = kiln.empty(buf.offset + span + 1, dtype=buf.dtype, device="meta")
            probe = base.as_strided(list(buf.shape), list(buf.stride), buf.offset)
            return target(probe, *args[1:], **kwargs)
        except (TypeError, RuntimeError, NotImplementedError):  # a symbolic size: the meta value's
            return val

    def _extern_arg(self, v, src):
        """An extern op's argument v (its node's argument src): lazy values realized, each in the
        layout of its own meta value (below, in _fallback). A method, not a closure: a recursive
        closure is a reference cycle, which kept every GraphLowering alive until the cyclic
        collector ran (25,000 objects at the end of a 16-layer GPT's compile)."""
        if isinstance(v, (Buffer, Pointwise, Reduction)):
            meta = src._meta_get_or("val", None) if isinstance(src, Node) else None
            if isinstance(meta, kiln.Tensor) and list(meta.shape) == list(v.shape):
                view = self._output_view(src, meta)
                if view is not None:
                    return view
                return self.realize_output(v, list(meta.stride()))
            return self.realize(v)
        if isinstance(v, (list, tuple)):
            srcs = src if isinstance(src, (list, tuple)) and len(src) == len(v) else [None] * len(v)
            return type(v)(self._extern_arg(x, sx) for x, sx in zip(v, srcs))
        return v

    def _fallback(self, node, args, kwargs, why, target=None):
        target = target or node.target
        output_code_log.debug("fallback: %s (%s)", target, why)
        self.fallbacks.append((str(target), why))

        # An extern op's result layout follows its inputs' (index_put of a column-major tensor is
        # column-major), and its output buffer is declared with the layout of the node's meta
        # value: so each input is realized in the layout of its own meta value (Note [Output
        # strides]). A `clone` of a transposed input computed into a row-major buffer gave
        # masked_fill a row-major input, whose row-major result the next kernel read as the
        # column-major one the meta promised: values transposed, silently.
        # An input whose meta layout is a strided view with gaps (`v3[::2]` of a transposed
        # intermediate) is that view of its intermediate realized in its own layout: a dense copy
        # gave `diagonal` other strides than the meta value the next kernel read it by, and that
        # kernel read past the copy's end (fuzz seed 191, program 48).
        sources = list(node.args) if len(node.args) == len(args) else [None] * len(args)
        args = [self._extern_arg(a, sa) for a, sa in zip(args, sources)]
        kwargs = {k: self._extern_arg(v, node.kwargs.get(k)) for k, v in kwargs.items()}
        val = node._meta_get_or("val", None)
        results = []
        # an extern op may return views (split's pieces) at the storage offsets its meta value
        # has: a view of one is made at that offset plus its own (it was made at its own alone,
        # and x.split(1)[-1].t() read row 0: fuzz seed 71, program 1629). The meta value's layout
        # is the meta input's; the input in memory may be laid out otherwise (a lazy `v1[1:]`
        # computed into a buffer of its own starts at 0, not at row 1; an expanded value computed
        # densely has no stride 0), and the views follow it (_view_results_of)
        val = self._view_results_of(node, target, args, kwargs, val)
        if isinstance(val, kiln.Tensor):
            results = [self.new_buffer(val.dtype, list(val.shape), list(val.stride()), val.storage_offset())]
            value = results[0]
        elif isinstance(val, (tuple, list)):
            value = []
            for v in val:
                if isinstance(v, kiln.Tensor):
                    b = self.new_buffer(v.dtype, list(v.shape), list(v.stride()), v.storage_offset())
                    results.append(b)
                    value.append(b)
                else:
                    results.append(None)
                    value.append(v)
            value = tuple(value)
        else:
            value = val
        for b in results:
            if b is not None:
                self.scheduler.mark_defined(b.name)
        self.records.append(ExternCall(target, args, kwargs, results, isinstance(val, (tuple, list)),
                                       [node._meta_get_or("stack_trace", None)]))
        return value


def _plain_ints(a):
    return isinstance(a, int) or isinstance(a, (list, tuple)) and all(isinstance(x, int) for x in a)


# --- max-autotune's generated alternative ----------------------------------------------------------
def _generated_mm(target, out_meta, args, kwargs):
    """The matmul template compiled alone (a throwaway GraphLowering), as a callable."""
    tensors, values = {}, []
    for i, a in enumerate(args):
        if isinstance(a, kiln.Tensor):
            buf = Buffer(f"arg{i}", a.dtype, list(a.shape), list(a.stride()))
            tensors[id(buf)] = a
            values.append(buf)
        else:
            values.append(a)
    graph = GraphLowering(None)
    previous, V.graph = V.graph, graph
    try:
        with graph.state.lowering():
            if target is kiln.ops.aten.addmm.default:
                value = mm_template(out_meta, values[1], values[2], bias=values[0], **kwargs)
            else:
                value = mm_template(out_meta, values[0], values[1])
            out_buf = graph.realize(value)
    finally:
        V.graph = previous
    (kernel,) = graph.kernels
    out = kiln.empty_strided(out_buf.shape, out_buf.stride, dtype=out_buf.dtype)
    tensors[id(out_buf)] = out
    ptrs = [tensors[id(b)] for b in kernel.buffers]

    def run():
        kernel.compiled(*ptrs)
        return out

    return run


def _record_origin(value, origin):
    """Source provenance of a lazy value: placing its body inside a kernel (the Scheduler's) adds
    its node's stack trace to the kernel's origins, so a fused kernel names every user line it
    computes; a Buffer's own kernel or extern call was attributed when it was made."""
    if origin[1] is None or not isinstance(value, (Pointwise, Reduction)):
        return
    if isinstance(value, Pointwise) and value.squeeze_of is not None:  # realized as its base's view
        _record_origin(value.squeeze_of, origin)
    value.add_origin(*origin)


def _describe(value):
    return value.describe() if isinstance(value, (Buffer, Pointwise, Reduction)) else repr(value)


# Names the wrapper's own code uses (compile_fx's namespace, `call(args)`, static_buffers).
_WRAPPER_NAMES = {"kiln", "empty_strided", "reinterpret_tensor", "as_declared", "static_buffers", "call", "args"}


def _input_name(name, taken):
    """A graph input's name in the wrapper: a backward's saved activation is named after the op
    that made it (`empty_strided`), which shadowed the wrapper's own empty_strided (an
    UnboundLocalError at the first allocation; fuzz seed 81, program 362)."""
    if name not in _WRAPPER_NAMES:
        return name
    renamed = name + "_"
    while renamed in taken or renamed in _WRAPPER_NAMES:
        renamed += "_"
    return renamed


def _is_lowered_view(target):
    """An op with a lowering whose result may alias its input (its schema returns `Tensor(a)`:
    views, t, reshape), so it can be lowered again over a realized base."""
    return has_lowering(target) and _returns_alias(target)


# Note [Output strides]: a graph output leaves with the strides its node's meta value states (eager's
# strides, as PyTorch's Inductor keeps them), not in whatever layout its kernel found convenient.
# The forward graph's saved activations are the backward graph's inputs, and the backward is
# lowered against the strides the joint graph recorded for them: a saved `z.t()` computed into a
# contiguous buffer was read by the backward as if it were `z`'s transposed view, so a weight
# gradient came out as z's elements in the wrong order (issue 16's VAE). User-visible outputs keep
# eager's strides too (`x.t() + 1` is column-major in eager). The layout questions (dense_order,
# gapped_order, same_layout, ...) are C++: inductor/ir/strides.h.
#
# Note [Expanded layouts]: a value whose meta layout repeats elements (`(w * 2).expand(2, 4, 4)`, eager's
# stride-0 view of a 4x4 result) is realized as eager holds it: the distinct elements in a dense
# buffer, viewed with stride 0 along the expanded dimensions. Realized in full, a saved
# `expanded.transpose(1, 2)` reached the backward laid out (16, 1, 4) where the joint graph recorded
# (0, 1, 4), and re-laying it there (compile_fx's Note [Input layouts]) wrote one element twice
# ("more than one element of the written-to tensor refers to a single memory location").
#
# Note [Outputs sharing a storage]: outputs that eager returns as views of one tensor (`v[:1], v[1:]`,
# `v, v[1:]` of `v = (x * 3)[::2]`, a split piece of a returned slice) are views of one buffer here
# too, with eager's strides and offsets: each was computed into a buffer of its own (the views
# lower to index maps of a lazy value), and a write through one did not show in the other. The
# value whose memory they view (found through the graph's view ops: aliasing returns in their
# schema) is realized when lowered, in its meta layout; the view nodes after it then lower to
# strided views of its buffer, as PyTorch's AOTAutograd regenerates them from one intermediate.
def _storages_outputs_share(graph):
    """The nodes whose memory two or more graph outputs are or view (graph inputs left out: the
    runtime rebuilds views of inputs itself)."""
    outs = graph.output_node().args[0]
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    count = {}
    for out in outs:
        if isinstance(getattr(out, "meta", {}).get("val"), kiln.Tensor):
            root = _storage_owner(out)
            if root.op != "placeholder":
                count[root] = count.get(root, 0) + 1
    return {node for node, n in count.items() if n > 1}


def _storage_owner(node):
    """The node whose memory `node` views: back through ops returning an alias of their first
    argument (`Tensor(a)`, a piece of `Tensor(a)[]`)."""
    while node.op == "call_function":
        if node.target is operator.getitem and _returns_alias(getattr(node.args[0], "target", None)):
            node = node.args[0].args[0]
        elif _returns_alias(node.target) and node.args and isinstance(node.args[0], Node):
            node = node.args[0]
        else:
            break
    return node


def _returns_alias(target):
    """Whether an op's schema returns a view of an argument (`Tensor(a)`, not in place: `Tensor(a!)`)."""
    schema = getattr(target, "_schema", None)
    return schema is not None and any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _produced(buf):
    """Whether buf is memory this graph's kernels wrote (not an input, a view of one, or an extern
    op's result, whose layout eager's meta function decided)."""
    while isinstance(buf.origin, Buffer):
        buf = buf.origin
    return buf.origin == "kernel"


def _computes(value):
    return bool(getattr(value, "ops", None))
