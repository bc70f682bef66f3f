"""GraphLowering: an aten FX graph -> kernels + a Python wrapper that runs them.

The walk over the graph is C++ (kiln._C._inductor.graph.GraphLowering, Note [Lowering a graph] in
inductor/graph/graph_lowering.h): each node lowered by the lowering table to a lazy value, values
realized into kernels (the C++ Scheduler's, Note [Kernels formed at realization]) where a graph
output, a value several nodes read, an extern op's argument or memory several outputs view needs
them, each in the layout its meta value promises, and the ops without a lowering recorded as extern
calls. This module keeps what must touch Python objects -- a lowering put in an op's place
(lowering.OVERRIDES: tests, seeded bugs), max-autotune's choice (autotune.py), the bisector's
switches (bisect_controls.py) -- as hooks the walk calls only when one is active, and turns the
walk's records into the wrapper's steps (Alloc, KernelCall, View, ExternCall, Return), whose memory
wrapper.py plans.
"""

import kiln
from kiln import _C
from kiln._C._inductor.graph import Extern, GraphLowering as _CGraphLowering
from kiln._C._inductor.scheduler import Scheduler
from kiln._inductor.ir import Buffer, Pointwise, Reduction
from kiln._inductor import autotune
from kiln._inductor.bisect_controls import fusions, lowerings
from kiln._inductor.lowering import OVERRIDES, Fallback, has_lowering, mm_template
from kiln._inductor.wrapper import (Alloc, ExternCall, KernelCall, Return, View, plan_memory, wrapper_code,
                                    wrapper_program)
from kiln.fx.traceback import provenance_comments


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
        self.inputs = []
        self.fallbacks = []        # (op, why) of each node that runs eagerly
        self._memory_plan = None
        self.autotune_choices = []  # (op, chosen alternative) under max-autotune
        # layout.py's choice (Note [Layout optimization]): output position -> the strides it
        # leaves with (eager's) where its meta value's differ; None when the graph kept its layouts
        self.output_strides = gm.meta.get("output_strides") if hasattr(gm, "meta") else None
        self._lowering = _CGraphLowering(gm.graph, self.output_strides)

    def run(self):
        hooked = OVERRIDES or lowerings.recording or self.config.get("max_autotune")
        self._lowering.run(self._lower_hook if hooked else None, fusions.allow_node if fusions.recording else None)
        for record in self._lowering.records:
            kind = record.kind
            if kind == "alloc":
                self.records.append(Alloc(record.buf))
            elif kind == "view":
                self.records.append(View(record.buf, record.base))
            elif kind == "kernel":
                kernel = self._kernel(record.kernel)
                self.kernels.append(kernel)
                self.records.append(KernelCall(kernel))
            elif kind == "extern":
                self.records.append(ExternCall(record.target, record.args, record.kwargs, record.results,
                                               record.unpack, record.stack_traces))
            else:
                self.records.append(Return(record.values))
        self.inputs = self._lowering.inputs
        self.fallbacks = [(str(f.target), f.why) for f in self._lowering.fallbacks]
        return self

    def _kernel(self, formed):
        return Kernel(formed.ir.name, formed.ir, formed.buffers, formed.stack_traces, formed.ops)

    def _lower_hook(self, node, args, kwargs):
        """What Python decides for a node (None: the lowering table lowers it): max-autotune's
        alternative, the bisector's refusal, a lowering in the op's place."""
        target = node.target
        out = node._meta_get_or("val", None)
        if self.config.get("max_autotune") and autotune.tunable(target):
            return self._autotuned(node, out, args, kwargs)
        tensors = isinstance(out, kiln.Tensor) or (isinstance(out, (tuple, list)) and out and
                                                   all(isinstance(o, kiln.Tensor) for o in out))
        if not tensors:
            return None
        if has_lowering(target) and not lowerings.allow_node(node):
            return Extern("kiln._dynamo.bisect: lowering turned off")
        fn = OVERRIDES.get(target)
        if fn is None:
            return None
        try:
            return fn(out, *args, **kwargs)
        except (Fallback, NotImplementedError) as why:
            return Extern(str(why))

    def _autotuned(self, node, out, args, kwargs):
        """max-autotune: the alternative autotune.choose timed fastest for this layout."""
        metas = [a._meta_get_or("val", None) if isinstance(a, kiln.fx.Node) else a for a in node.args]
        choice = autotune.choose(node.target, out, metas, dict(node.kwargs), generated=_generated_mm)
        self.autotune_choices.append((str(node.target), choice))
        if choice == "generated":
            try:
                if node.target is kiln.ops.aten.addmm.default:
                    return mm_template(out, args[1], args[2], bias=args[0], **kwargs)
                return mm_template(out, *args)
            except Fallback as why:
                return Extern(str(why))
        if choice == "im2col":
            return Extern("autotune: im2col", autotune.conv2d_im2col)
        return Extern("autotune: the extern kernel")

    @property
    def pre_fusion(self):
        """Each node's lowered value, before kernels are formed (KILN_COMPILE_DEBUG's ir_pre_fusion.txt)."""
        return [f"{lowered.node.name} = {lowered.node.target}: {_describe(lowered.value)}"
                for lowered in self._lowering.lowered]

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


# --- max-autotune's generated alternative ----------------------------------------------------------
def _generated_mm(target, out_meta, args, kwargs):
    """The matmul template compiled alone (its kernel formed by a throwaway Scheduler), as a callable."""
    tensors, values = {}, []
    for i, a in enumerate(args):
        if isinstance(a, kiln.Tensor):
            buf = Buffer(f"arg{i}", a.dtype, list(a.shape), list(a.stride()))
            tensors[id(buf)] = a
            values.append(buf)
        else:
            values.append(a)
    scheduler = Scheduler()
    with scheduler.state.lowering():
        if target is kiln.ops.aten.addmm.default:
            value = mm_template(out_meta, values[1], values[2], bias=values[0], **kwargs)
        else:
            value = mm_template(out_meta, values[0], values[1])
        out_buf = scheduler.realize(value)
    (formed,) = [step.kernel for step in scheduler.take_steps() if step.kind == "kernel"]
    kernel = Kernel(formed.ir.name, formed.ir, formed.buffers)
    out = kiln.empty_strided(out_buf.shape, out_buf.stride, dtype=out_buf.dtype)
    tensors[id(out_buf)] = out
    ptrs = [tensors[id(b)] for b in kernel.buffers]

    def run():
        kernel.compiled(*ptrs)
        return out

    return run


def _describe(value):
    return value.describe() if isinstance(value, (Buffer, Pointwise, Reduction)) else repr(value)
