"""The wrapper: `call(args)`, which runs a lowered graph (GraphLowering's records: Alloc,
KernelCall, View, ExternCall, Return), with its memory planned in C++ before any kernel is
compiled (inductor/memory_plan, Note [Memory plan]). It runs as a kiln._C._inductor.WrapperProgram
(wrapper_program; Note [The wrapper program] in python/csrc/python_wrapper_program.cc); its Python
rendering (wrapper_code) is written only for those who read it:

- each buffer is deleted after its last use, and a later allocation of the same size and dtype
  reuses a dead one (`# reuse`);
- a pointwise kernel writes over an input that dies in it when it reads that input only at the
  element it stores (`# in place`; its IR is rewritten to read it through the output's pointer);
- under reduce-overhead, the intermediate buffers no output can see are allocated by the first
  call and kept (`static_buffers`);
- extern ops are bound once, at module level, to their C entry points.
"""

import math
import re

import kiln
from kiln import _C
from kiln._inductor.ir import Buffer
from kiln.fx.traceback import provenance_comments


# --- the steps GraphLowering records, in program order (graph.records) ----------------------------
class Alloc:
    """A kernel's output buffer comes to be (fresh, reused, in place or static: the plan says)."""
    __slots__ = ("buf",)

    def __init__(self, buf):
        self.buf = buf


class KernelCall:
    """A generated kernel runs over its buffers."""
    __slots__ = ("kernel",)

    def __init__(self, kernel):
        self.kernel = kernel


class View:
    """`buf` is defined as a view of `base` (its layout and storage offset)."""
    __slots__ = ("buf", "base")

    def __init__(self, buf, base):
        self.buf, self.base = buf, base


class ExternCall:
    """An eager op runs: `target(*args, **kwargs)`, its tensor results bound to `results` (None for
    a non-tensor result), unpacked when the op returns several; `stack_traces`: its node's."""
    __slots__ = ("target", "args", "kwargs", "results", "unpack", "stack_traces")

    def __init__(self, target, args, kwargs, results, unpack, stack_traces=()):
        self.target, self.args, self.kwargs = target, args, kwargs
        self.results, self.unpack, self.stack_traces = results, unpack, stack_traces

    @property
    def provenance(self):
        """`# File ...` comments: the user's lines (read only where the output code is)."""
        return provenance_comments(self.stack_traces)


class Return:
    """The graph's outputs: buffers, or constants returned as they are."""
    __slots__ = ("values",)

    def __init__(self, values):
        self.values = values


def plan_memory(graph):
    """The memory plan of graph's records, its in-place writes merged into their kernels' IR (which
    must happen before the kernels compile)."""
    plan = _memory_plan(graph)
    for i, step in enumerate(graph.records):
        source = plan[i].alloc
        if isinstance(step, Alloc) and source.kind == "in place":
            _merge_in_place(graph.records[source.kernel_step].kernel, source.victim, source.store)
    return plan


def wrapper_program(graph, plan, as_declared):
    """The wrapper as a kiln._C._inductor.WrapperProgram (Note [The wrapper program] in
    python/csrc/python_wrapper_program.cc), the steps wrapper_code renders; its kernels compiled.
    `as_declared(t, size, stride)` copies an extern's result into its declared layout."""
    slots = {}

    def slot(name):
        index = slots.get(name)
        if index is None:
            index = slots[name] = len(slots)
        return index

    def template(v):
        return _template(v, slot)

    inputs = [slot(name) for name in graph.inputs]
    allocated = {step.buf.name: step.buf for step in graph.records if isinstance(step, Alloc)}
    statics = [(slot(name), allocated[name]) for name in plan.static_buffers]
    steps = []  # (method, args), added once the number of slots is known
    for i, step in enumerate(graph.records):
        planned = plan[i]
        if isinstance(step, Alloc):
            buf, source = step.buf, planned.alloc
            if source.kind in ("in place", "reuse"):
                steps.append(("reinterpret", (slot(buf.name), slot(source.source), buf.shape, buf.stride, None)))
                steps.append(("release", ([slot(source.source)],)))
            elif source.kind == "fresh":
                steps.append(("empty", (slot(buf.name), buf.shape, buf.stride, buf.dtype)))
        elif isinstance(step, KernelCall):
            steps.append(("kernel", (step.kernel.compiled, [slot(b.name) for b in step.kernel.buffers])))
        elif isinstance(step, View):
            buf = step.buf
            steps.append(("reinterpret", (slot(buf.name), slot(step.base.name), buf.shape, buf.stride, buf.offset)))
        elif isinstance(step, ExternCall):
            fn = getattr(step.target, "_op", step.target)
            results = [slot(b.name) if b is not None else -1 for b in step.results]
            steps.append(("extern", (fn, template(list(step.args)), {k: template(v) for k, v in step.kwargs.items()},
                                     results, step.unpack)))
            if _returns_fresh(step.target):  # Note [Extern results in the declared layout]
                for b in step.results:
                    if b is not None and list(b.stride) != _contiguous_strides(b.shape):
                        steps.append(("as_declared", (slot(b.name), b.shape, b.stride, as_declared)))
        elif isinstance(step, Return):
            steps.append(("ret", ([template(b) if isinstance(b, Buffer) else b for b in step.values],)))
        if planned.dies:
            steps.append(("release", ([slot(name) for name in planned.dies],)))
    program = _C._inductor.WrapperProgram(len(slots), inputs)
    for index, buf in statics:
        program.static(index, buf.shape, buf.stride, buf.dtype)
    for method, args in steps:
        getattr(program, method)(*args)
    return program


def _template(v, slot):
    """An extern argument with each Buffer replaced by its Slot (module level: a recursive closure
    is a reference cycle)."""
    if isinstance(v, Buffer):
        return _C._inductor.Slot(slot(v.name))
    if isinstance(v, (list, tuple)):
        return type(v)(_template(x, slot) for x in v)
    return v


def wrapper_code(graph, plan):
    """Python source of `call(args)`, the wrapper_program's steps as Python: what logs and
    run_and_get_code show, and KILN_COMPILE_DEBUG's output_code.py runs."""
    externs = {}  # extern targets, bound once to their C entry points (no Python call layer)
    for step in graph.records:
        if isinstance(step, ExternCall):
            externs.setdefault(_extern_name(step.target), step.target)
    lines = [f"{name} = {_op_expr(target)}{'._op' if hasattr(target, '_op') else ''}"
             for name, target in externs.items()]
    static = plan.static_buffers
    if static:
        lines.append("static_buffers = []  # reduce-overhead: allocated by the first call, kept")
    lines += ["", "", "def call(args):"] if lines else ["def call(args):"]
    if graph.inputs:
        lines.append(f"    {', '.join(graph.inputs)}{',' if len(graph.inputs) == 1 else ''} = args")
        lines.append("    args.clear()")
    if static:
        allocated = {step.buf.name: step.buf for step in graph.records if isinstance(step, Alloc)}
        lines.append("    if not static_buffers:")
        for buf in (allocated[name] for name in static):
            lines.append(f"        static_buffers.append(empty_strided({tuple(buf.shape)}, {tuple(buf.stride)}, "
                         f"dtype={buf.dtype}))")
        lines.append(f"    {', '.join(static)}{',' if len(static) == 1 else ''} = static_buffers")
    for i, step in enumerate(graph.records):
        planned = plan[i]
        # source provenance: the user's lines a kernel or extern call computes (kiln/fx/traceback.py)
        if isinstance(step, KernelCall):
            lines.extend(f"    {comment}" for comment in step.kernel.provenance)
        elif isinstance(step, ExternCall):
            lines.extend(f"    {comment}" for comment in step.provenance)
        if isinstance(step, Alloc):
            buf, source = step.buf, planned.alloc
            if source.kind in ("in place", "reuse"):
                lines.append(f"    {buf.name} = reinterpret_tensor({source.source}, {tuple(buf.shape)}, "
                             f"{tuple(buf.stride)})  # {source.kind}")
                lines.append(f"    del {source.source}")
            elif source.kind == "fresh":
                lines.append(f"    {buf.name} = empty_strided({tuple(buf.shape)}, {tuple(buf.stride)}, "
                             f"dtype={buf.dtype})")
            # static: bound at the top from static_buffers
        elif isinstance(step, KernelCall):
            k = step.kernel
            lines.append(f"    {k.name}({', '.join(b.name for b in k.buffers)})")
        elif isinstance(step, View):
            buf = step.buf
            lines.append(f"    {buf.name} = reinterpret_tensor({step.base.name}, {tuple(buf.shape)}, "
                         f"{tuple(buf.stride)}, {buf.offset})")
        elif isinstance(step, ExternCall):
            text = _extern_name(step.target) + "(" + ", ".join(
                [_arg_text(a) for a in step.args] + [f"{k}={_arg_text(v)}" for k, v in step.kwargs.items()]) + ")"
            named = [b.name if b is not None else "_" for b in step.results]
            if not step.results:
                lines.append(f"    {text}")
            elif step.unpack:
                lines.append(f"    {', '.join(named)}{',' if len(named) == 1 else ''} = {text}")
            else:
                lines.append(f"    {named[0]} = {text}")
            if _returns_fresh(step.target):  # Note [Extern results in the declared layout]
                for b in step.results:
                    if b is not None and list(b.stride) != _contiguous_strides(b.shape):
                        lines.append(f"    {b.name} = as_declared({b.name}, {tuple(b.shape)}, {tuple(b.stride)})")
        elif isinstance(step, Return):
            vals = [b.name if isinstance(b, Buffer) else repr(b) for b in step.values]
            lines.append(f"    return ({''.join(v + ', ' for v in vals)})")
        lines.extend(f"    del {name}" for name in planned.dies)
    return "\n".join(lines) + "\n"


def _memory_plan(graph):
    """The graph's records as the C++ planner's typed steps, and its plan (one entry per record)."""
    planner = _C._inductor.MemoryPlanner(bool(graph.config.get("static_memory")))

    def declare(buf):
        planner.declare(buf.name, buf.shape, buf.stride, buf.dtype.itemsize, str(buf.dtype))

    for step in graph.records:
        if isinstance(step, Alloc):
            declare(step.buf)
            planner.alloc(step.buf.name)
        elif isinstance(step, KernelCall):
            planner.kernel([b.name for b in step.kernel.buffers], step.kernel.ir)
        elif isinstance(step, View):
            planner.view(step.buf.name, step.base.name)
        elif isinstance(step, ExternCall):
            fresh = _returns_fresh(step.target)
            results = [b for b in step.results if b is not None]
            if fresh:
                for b in results:
                    declare(b)
            planner.extern(_buffer_names((step.args, step.kwargs)), [b.name for b in results], fresh)
        elif isinstance(step, Return):
            planner.ret([b.name for b in step.values if isinstance(b, Buffer)])
    return planner.plan()


def _returns_fresh(target):
    """Whether an extern op's results are new tensors (its schema's returns carry no alias
    annotation such as `Tensor(a)`): only those may be overwritten in place."""
    schema = getattr(target, "_schema", None)
    return schema is not None and all(r.alias_info is None for r in schema.returns)


def _merge_in_place(kernel, victim, out):
    """Rewrites `kernel`'s IR (not compiled yet) to read its input `victim` through the output's
    pointer, as the memory plan decided (Note [Memory plan]; inductor/memory_plan's
    ReadThroughStore says why one pointer)."""
    ir = _C._inductor.read_through_store(kernel.ir, victim, out)
    kernel.rewrite(ir, [b for k, b in enumerate(kernel.buffers) if k != victim])


def _buffer_names(value):
    """The names of the Buffers in an extern call's arguments (nested lists, tuples, dicts), in order."""
    if isinstance(value, Buffer):
        return [value.name]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [name for v in value for name in _buffer_names(v)]
    return []


def _arg_text(v):
    if isinstance(v, Buffer):
        return v.name
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_arg_text(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, kiln.dtype):
        return f"kiln.{str(v).split('.')[-1]}"
    if isinstance(v, kiln.device):
        return f"kiln.device({str(v)!r})"
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    return repr(v)  # numbers, strings, None, kiln's enums (their repr is their kiln.<name>)


# Note [Extern results in the declared layout]: the kernels after an extern op index its result by
# the strides of the node's meta value. The op's kernel lays its result out by its inputs' actual
# layouts, which differ from their meta layouts when one was a strided view with gaps (realized
# compactly): `v = (x.t() * s)[::2]; v.copy_(v)` returned a row-major copy that the next kernel
# read by the view's strides (fuzz program 141-0080). A result whose declared layout is not
# row-major is copied into that layout when its strides differ (as_declared, compile_fx.py).
def _contiguous_strides(shape):
    strides, step = [], 1
    for n in reversed(list(shape)):
        strides.append(step)
        step *= max(n, 1)
    return strides[::-1]


def _extern_name(target):
    return "extern_" + re.sub(r"\W", "_", str(target).split("aten.")[-1])


def _op_expr(target):
    text = str(target)
    return text if text.startswith("kiln.") else f"kiln.ops.{text}"
