"""The wrapper: `def call(args)`, the Python source that runs a lowered graph (GraphLowering's
records: alloc, kernel, view, extern, return) with its memory planned:

- each buffer is deleted after its last use, and a later allocation of the same size and dtype
  reuses a dead one (`# reuse`);
- a pointwise kernel writes over an input that dies in it when it reads that input only at the
  element it stores (`# in place`; the kernel is recompiled to read it through the output's
  pointer);
- under reduce-overhead, the intermediate buffers no output can see are allocated by the first
  call and kept (`static_buffers`);
- extern ops are bound once, at module level, to their C entry points.
"""

import math
import re

import kiln
from kiln._inductor.ir import Buffer


def wrapper_code(graph):
    """Python source of `call(args)`, with buffer lifetimes planned."""
    last_use = {}
    for i, rec in enumerate(graph.records):
        for name in _names_in(rec):
            last_use[name] = i
    outputs = {b.name for b in graph.records[-1][1] if isinstance(b, Buffer)} if graph.records and \
        graph.records[-1][0] == "return" else set()
    externs = {}  # extern targets, bound once to their C entry points (no Python call layer)
    for rec in graph.records:
        if rec[0] == "extern":
            externs.setdefault(_extern_name(rec[1]), rec[1])
    lines = [f"{name} = {_op_expr(target)}{'._op' if hasattr(target, '_op') else ''}"
             for name, target in externs.items()]
    static = _static_buffers(graph, outputs) if graph.config.get("static_memory") else []
    if static:
        lines.append("static_buffers = []  # reduce-overhead: allocated by the first call, kept")
    lines += ["", "", "def call(args):"] if lines else ["def call(args):"]
    if graph.inputs:
        lines.append(f"    {', '.join(graph.inputs)}{',' if len(graph.inputs) == 1 else ''} = args")
        lines.append("    args.clear()")
    if static:
        lines.append("    if not static_buffers:")
        for buf in static:
            lines.append(f"        static_buffers.append(empty_strided({tuple(buf.shape)}, {tuple(buf.stride)}, "
                         f"dtype={buf.dtype}))")
        names = [b.name for b in static]
        lines.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = static_buffers")
    static = {b.name for b in static}
    pool, bases = {}, {}
    aliased = {rec[2].name for rec in graph.records if rec[0] == "view"}  # bases of views: never reused
    view_last = {}  # base name -> the last record using one of its views (or their views)
    for rec in reversed(graph.records):  # later views first, so chains of views add up
        if rec[0] == "view":
            views, bases_of = [rec[1].name], [rec[2].name]
        elif rec[0] == "extern" and not _returns_fresh(rec[1]):
            # A fallback view (as_strided, a view op without a lowering) returns a tensor over its
            # input's memory: the input is a view base too. Pooled once its own name died, it was
            # overwritten while the view was still to be read.
            views = [b.name for b in rec[4] if b is not None]
            bases_of = [n for n in dict.fromkeys(_names_in(rec)) if n not in views]
            aliased.update(bases_of)
        else:
            continue
        end = max([max(last_use.get(v, -1), view_last.get(v, -1)) for v in views], default=-1)
        for name in bases_of:
            view_last[name] = max(view_last.get(name, -1), end)
    owned = {}  # buffers the wrapper made (kernel outputs, fresh extern results): name -> (bytes, dtype)
    for rec in graph.records:
        bufs = [rec[1]] if rec[0] == "alloc" else \
            [b for b in rec[4] if b is not None] if rec[0] == "extern" and _returns_fresh(rec[1]) else []
        for b in bufs:
            owned[b.name] = (_nbytes(b), b.dtype)
    overwritable = {name: v for name, v in owned.items() if name not in static}  # once: planning is linear
    for i, rec in enumerate(graph.records):
        kind = rec[0]
        # source provenance: the user's lines a kernel or extern call computes (kiln/fx/traceback.py)
        provenance = rec[1].provenance if kind == "kernel" else graph.extern_provenance.get(id(rec), ())
        lines.extend(f"    {comment}" for comment in provenance)
        if kind == "alloc" and rec[1].name in static:
            pass  # bound at the top from static_buffers
        elif kind == "alloc":
            buf = rec[1]
            nbytes = _nbytes(buf)
            reuse = pool.get((nbytes, buf.dtype))
            victim = None if buf.name in outputs else _in_place_victim(
                graph, i, buf, last_use, overwritable, view_last)
            if victim is not None:
                lines.append(f"    {buf.name} = reinterpret_tensor({victim}, {tuple(buf.shape)}, "
                             f"{tuple(buf.stride)})  # in place")
                lines.append(f"    del {victim}")
                aliased.add(victim)  # its memory is buf's now: never pooled
            elif reuse and buf.name not in outputs:
                old = reuse.pop()
                lines.append(f"    {buf.name} = reinterpret_tensor({old}, {tuple(buf.shape)}, {tuple(buf.stride)})"
                             f"  # reuse")
                lines.append(f"    del {old}")
            else:
                lines.append(f"    {buf.name} = empty_strided({tuple(buf.shape)}, {tuple(buf.stride)}, "
                             f"dtype={buf.dtype})")
            bases[buf.name] = (nbytes, buf.dtype)
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
        for name in dict.fromkeys(_names_in(rec)):  # once each: `clamp(x, lo, x)` names x twice
            if last_use.get(name) == i and name not in outputs and kind != "return" and name not in static:
                if name in bases and name not in aliased:  # kept for reuse (deleted when reused)
                    pool.setdefault(bases[name], []).append(name)
                else:
                    lines.append(f"    del {name}")
    return "\n".join(lines) + "\n"


def _static_buffers(graph, outputs):
    """reduce-overhead: the kernel outputs that can live across calls, allocated once: those
    no output can see (not returned, not the base of a returned view, not handed to an extern
    op whose result may alias it). Nothing else reads them between calls."""
    escaping = set(outputs)
    for rec in reversed(graph.records):  # views and aliasing externs pass escape on to their bases
        if rec[0] == "view" and rec[1].name in escaping:
            escaping.add(rec[2].name)
        elif rec[0] == "extern" and not _returns_fresh(rec[1]):
            escaping.update(_names_in(rec))
    return [rec[1] for rec in graph.records if rec[0] == "alloc" and rec[1].name not in escaping]

def _nbytes(buf):
    """The bytes a buffer's layout spans: its numel's for a dense one, more for one with gaps (a
    functionalized copy keeps a strided input's layout, [2, 2] with strides (4, 1) spans 6
    elements; pooled by its numel it reused a 4-element buffer: fuzz seed 81, program 1501)."""
    if buf.numel() == 0:
        return 0
    return (1 + sum((n - 1) * abs(st) for n, st in zip(buf.shape, buf.stride))) * buf.dtype.itemsize


def _in_place_victim(graph, i, buf, last_use, bases, view_last):
    """A buffer the kernel writing `buf` (the next kernel record) can overwrite: one of its
    inputs that dies in that kernel, has buf's size and dtype, has no view read there or later,
    and is read only at the element being stored (a pointwise kernel: each element is read
    before its own store, and no other element is read). Its memory then holds buf, no
    allocation. A view read by the kernel itself counts: `v.diagonal() - v` read the extern
    diagonal of v (other elements of v's memory) while storing over v, and read the stored
    differences back (fuzz seed 171, program 27596)."""
    j = next((j for j in range(i + 1, len(graph.records)) if graph.records[j][0] == "kernel"), None)
    if j is None:
        return None
    kernel = graph.records[j][1]
    if len(kernel.ir["loops"]) != 1 or len(kernel.ir["loops"][0]["stmts"]) != 1:
        return None
    kind, out_pos, out_index, expr = kernel.ir["loops"][0]["stmts"][0]
    if kind != "store" or kernel.buffers[out_pos] is not buf:
        return None
    for pos, b in enumerate(kernel.buffers):
        if b is buf or b.name not in bases or last_use.get(b.name) != j or view_last.get(b.name, -1) >= j:
            continue
        if bases[b.name] != (_nbytes(buf), buf.dtype):
            continue
        if _loads_only_at(expr, pos, out_index):
            _merge_in_place(kernel, pos, out_pos)
            return b.name
    return None

def _returns_fresh(target):
    """Whether an extern op's results are new tensors (its schema's returns carry no alias
    annotation such as `Tensor(a)`): only those may be overwritten in place."""
    schema = getattr(target, "_schema", None)
    return schema is not None and all(r.alias_info is None for r in schema.returns)


def _merge_in_place(kernel, victim, out):
    """Recompiles `kernel` with its input `victim` read through the output's pointer. With two
    pointers to one array, LLVM's vectoriser guards the vector loop with an overlap check that
    then always fails (the scalar loop ran 4x slower); one pointer read and written at the same
    element is the plain in-place loop it vectorises."""
    def remap(i):
        i = out if i == victim else i
        return i - 1 if i > victim else i

    def walk(e):
        if not isinstance(e, tuple):
            return e
        if e[0] == "load":
            return ("load", remap(e[1]), e[2])
        if e[0] in ("const", "acc", "index"):
            return e
        if e[0] == "cast":
            return ("cast", walk(e[1]), e[2])
        return (e[0],) + tuple(walk(x) for x in e[1:])

    ir = dict(kernel.ir)
    ir["loops"] = [{"extent": loop["extent"], "stmts": [
        ("store", remap(st[1]), st[2], walk(st[3])) if st[0] == "store" else st[:-1] + (walk(st[-1]),)
        for st in loop["stmts"]]} for loop in kernel.ir["loops"]]
    ir["buffers"] = [b for k, b in enumerate(kernel.ir["buffers"]) if k != victim]
    kernel.rewrite(ir, [b for k, b in enumerate(kernel.buffers) if k != victim])


def _loads_only_at(expr, pos, index):
    """Whether every load of buffer `pos` in expr reads exactly `index` (and there is one)."""
    found = []

    def walk(e):
        if not isinstance(e, tuple):
            return True
        if e[0] == "load":
            if e[1] == pos:
                found.append(e[2])
            return True
        if e[0] in ("const", "acc", "index"):
            return True
        return all(walk(x) for x in e[1:])

    walk(expr)
    return bool(found) and all(_same_index(f, index) for f in found)


def _same_index(a, b):
    return a[0] == b[0] and list(a[1]) == list(b[1]) and a[2] == b[2]


def _names_in(rec):
    kind = rec[0]
    if kind == "alloc":
        return [rec[1].name]
    if kind == "kernel":
        return [b.name for b in rec[1].buffers]
    if kind == "view":
        return [rec[1].name, rec[2].name]
    if kind == "extern":
        names = []

        def walk(v):
            if isinstance(v, Buffer):
                names.append(v.name)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)

        walk(rec[2])
        walk(rec[3])
        names.extend(b.name for b in rec[4] if b is not None)
        return names
    if kind == "return":
        return [b.name for b in rec[1] if isinstance(b, Buffer)]
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
