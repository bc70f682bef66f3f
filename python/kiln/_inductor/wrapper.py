"""The wrapper: `def call(args)`, the Python source that runs a lowered graph (GraphLowering's
records: alloc, kernel, view, extern, return), with its memory planned in C++ before any kernel is
compiled (inductor/memory_plan, Note [Memory plan]):

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


def wrapper_code(graph):
    """Python source of `call(args)`, with buffer lifetimes planned."""
    plan = _memory_plan(graph)
    externs = {}  # extern targets, bound once to their C entry points (no Python call layer)
    for rec in graph.records:
        if rec[0] == "extern":
            externs.setdefault(_extern_name(rec[1]), rec[1])
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
        allocated = {rec[1].name: rec[1] for rec in graph.records if rec[0] == "alloc"}
        lines.append("    if not static_buffers:")
        for buf in (allocated[name] for name in static):
            lines.append(f"        static_buffers.append(empty_strided({tuple(buf.shape)}, {tuple(buf.stride)}, "
                         f"dtype={buf.dtype}))")
        lines.append(f"    {', '.join(static)}{',' if len(static) == 1 else ''} = static_buffers")
    for i, rec in enumerate(graph.records):
        kind, step = rec[0], plan[i]
        # source provenance: the user's lines a kernel or extern call computes (kiln/fx/traceback.py)
        provenance = rec[1].provenance if kind == "kernel" else graph.extern_provenance.get(id(rec), ())
        lines.extend(f"    {comment}" for comment in provenance)
        if kind == "alloc":
            buf, source = rec[1], step.alloc
            if source.kind == "in place":
                _merge_in_place(graph.records[source.kernel_step][1], source.victim, source.store)
                lines.append(f"    {buf.name} = reinterpret_tensor({source.source}, {tuple(buf.shape)}, "
                             f"{tuple(buf.stride)})  # in place")
                lines.append(f"    del {source.source}")
            elif source.kind == "reuse":
                lines.append(f"    {buf.name} = reinterpret_tensor({source.source}, {tuple(buf.shape)}, "
                             f"{tuple(buf.stride)})  # reuse")
                lines.append(f"    del {source.source}")
            elif source.kind == "fresh":
                lines.append(f"    {buf.name} = empty_strided({tuple(buf.shape)}, {tuple(buf.stride)}, "
                             f"dtype={buf.dtype})")
            # static: bound at the top from static_buffers
        elif kind == "kernel":
            k = rec[1]
            lines.append(f"    {k.name}({', '.join(b.name for b in k.buffers)})")
        elif kind == "view":
            buf, base = rec[1], rec[2]
            lines.append(f"    {buf.name} = reinterpret_tensor({base.name}, {tuple(buf.shape)}, "
                         f"{tuple(buf.stride)}, {buf.offset})")
        elif kind == "extern":
            _, target, args, kwargs, results, unpack = rec
            text = _extern_name(target) + "(" + ", ".join([_arg_text(a) for a in args] +
                                                       [f"{k}={_arg_text(v)}" for k, v in kwargs.items()]) + ")"
            named = [b.name if b is not None else "_" for b in results]
            if not results:
                lines.append(f"    {text}")
            elif unpack:
                lines.append(f"    {', '.join(named)}{',' if len(named) == 1 else ''} = {text}")
            else:
                lines.append(f"    {named[0]} = {text}")
            if _returns_fresh(target):  # Note [Extern results in the declared layout]
                for b in results:
                    if b is not None and list(b.stride) != _contiguous_strides(b.shape):
                        lines.append(f"    {b.name} = as_declared({b.name}, {tuple(b.shape)}, {tuple(b.stride)})")
        elif kind == "return":
            vals = [b.name if isinstance(b, Buffer) else repr(b) for b in rec[1]]
            lines.append(f"    return ({''.join(v + ', ' for v in vals)})")
        lines.extend(f"    del {name}" for name in step.dies)
    return "\n".join(lines) + "\n"


def _memory_plan(graph):
    """The graph's records as the C++ planner's typed steps, and its plan (one entry per record)."""
    planner = _C._inductor.MemoryPlanner(bool(graph.config.get("static_memory")))

    def declare(buf):
        planner.declare(buf.name, buf.shape, buf.stride, buf.dtype.itemsize, str(buf.dtype))

    for rec in graph.records:
        kind = rec[0]
        if kind == "alloc":
            declare(rec[1])
            planner.alloc(rec[1].name)
        elif kind == "kernel":
            planner.kernel([b.name for b in rec[1].buffers], rec[1].ir)
        elif kind == "view":
            planner.view(rec[1].name, rec[2].name)
        elif kind == "extern":
            fresh = _returns_fresh(rec[1])
            results = [b for b in rec[4] if b is not None]
            if fresh:
                for b in results:
                    declare(b)
            planner.extern(_buffer_names((rec[2], rec[3])), [b.name for b in results], fresh)
        elif kind == "return":
            planner.ret([b.name for b in rec[1] if isinstance(b, Buffer)])
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
