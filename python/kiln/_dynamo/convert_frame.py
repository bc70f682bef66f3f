"""The frame callback: from a frame at entry to a cache entry (guard, code), or to eager.

For each new frame the hook cannot serve from its cache, _compile_frame translates the code
(symbolic_convert.py). A whole-frame translation returns one graph. At the first instruction the
interpreter cannot model, translation restarts and stops cleanly before it (so no half-done
inlining leaks into the graph); the graph so far is compiled, and the replacement code runs the
breaking call, subscript or branch in Python and continues in a resume function, which the hook will capture
in turn. Graph breaks inside with-blocks or try-blocks, or in functions with cell variables,
cannot be split that way: such frames run eagerly (the reason is logged and counted).
"""

import logging
import os
import re
import sys
import time
import types
import warnings
import weakref

import kiln
from kiln import _C
from kiln._guards import compile_context, next_compile_id
from kiln._dynamo import compile_events, config
from kiln._dynamo.break_warnings import warn_costly_break
from kiln._dynamo.cache_size import exceeds_recompile_limit, warn_recompile_limit
from kiln._dynamo.codegen import FrameCodegen, install_global, make_function
from kiln._dynamo.dynamic_ints import remember_ints
from kiln._dynamo.exc import BackendCompilerFailed, SpecializeShapes, Unsupported, is_user_file
from kiln._dynamo.guards import build_guards
from kiln._dynamo.output_graph import OutputGraph
from kiln._dynamo.symbolic_convert import BreakRequest, InstructionTranslator
from kiln._dynamo.user_errors import show_kiln_frames, without_kiln_frames
from kiln._dynamo.variables.misc import NullVariable
from kiln._logging import getArtifactLogger

log = logging.getLogger(__name__)
graph_breaks_log = getArtifactLogger(__name__, "graph_breaks")
recompiles_log = getArtifactLogger(__name__, "recompiles")
bytecode_log = getArtifactLogger(__name__, "bytecode")

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TRACEABLE_KILN_DIRS = (os.path.join(_KILN_DIR, "nn", "modules"),)
_CALLS = {"CALL", "CALL_FUNCTION_EX"}
_STORES = {"STORE_SUBSCR", "STORE_SLICE"}
_BRANCHES = {"POP_JUMP_IF_FALSE": False, "POP_JUMP_IF_TRUE": True, "POP_JUMP_FORWARD_IF_FALSE": False,
             "POP_JUMP_FORWARD_IF_TRUE": True, "POP_JUMP_BACKWARD_IF_FALSE": False,
             "POP_JUMP_BACKWARD_IF_TRUE": True}
_resume_ids = iter(range(1, 1 << 62))
_resume_cache = weakref.WeakKeyDictionary()  # original code -> {key: resume code}
frame_states = weakref.WeakKeyDictionary()   # code -> {source name: sizes seen (None: varied)}
static_frames = weakref.WeakKeyDictionary()  # code -> why its symbolic trace was wrong (SpecializeShapes)
seen_codes = weakref.WeakSet()               # every code object the callback was asked about


class SkipFrame(Exception):
    """This frame runs eagerly (as written). `permanent`: the reason lies in the code itself (a
    break inside a try block, cell variables), so every later call would translate it again only
    to run it eagerly: the code is marked skip (when it has no compiled entries to keep)."""

    def __init__(self, message, permanent=False):
        super().__init__(message)
        self.permanent = permanent


class CompileContext:
    """What one kiln.compile(...) asked for: the backend, fullgraph, dynamic, and observers."""

    def __init__(self, compiler_fn, fullgraph=False, dynamic=None, on_break=None, on_graph=None, on_compiled=None):
        self.compiler_fn, self.fullgraph, self.dynamic = compiler_fn, fullgraph, dynamic
        self.on_break, self.on_graph = on_break, on_graph
        self.on_compiled = on_compiled  # (code, guard tree, milliseconds) after each translation

    def __call__(self, code, f_locals, f_globals, f_builtins, function):
        try:
            return compile_frame(self, code, f_locals, f_globals)
        except Exception as e:  # fullgraph=True's graph break, or an internal error not suppressed
            if show_kiln_frames():
                raise
            error = e  # raised outside the handler: no "During handling of the above exception"
        raise without_kiln_frames(error) from None  # the user's call chain; KILN_LOGS=+dynamo shows kiln's frames


# Module.__call__'s own frames run as written (hooks outside the graph, as in PyTorch), so the
# captured frame is the module's forward; they are still inlined when traced code calls a module.
_MODULE_CALL_CODES = frozenset({kiln.nn.Module._wrapped_call_impl.__code__, kiln.nn.Module._call_impl.__code__})
# Module's own machinery (__setattr__, __getattr__, register_buffer, ...) is never a frame of its
# own: the attribute writes that generated code replays (side_effects.py) call __setattr__.
_MODULE_FILE = os.path.abspath(kiln.nn.modules.module.__file__)


def _skipped_file(filename):
    if filename.startswith(_KILN_DIR):
        return not filename.startswith(_TRACEABLE_KILN_DIRS)
    return filename.startswith("<frozen") or "/lib/python3." in filename and "site-packages" not in filename


def _uses_zero_arg_super(code):
    """Under 3.12 a frame that calls zero-argument super() (its `__class__` cell) and is replaced
    by compiled code bound super() to the wrong class, and `nn.CrossEntropyLoss()` made inside a
    compiled step recursed in __init__ until RecursionError. Such frames run as written (their
    callees are still captured); inlined calls to them are traced as before."""
    return sys.version_info >= (3, 12) and "__class__" in code.co_freevars


def compile_frame(ctx, code, f_locals, f_globals):
    seen_codes.add(code)
    if (_skipped_file(code.co_filename) or code.co_name == "<module>" or code in _MODULE_CALL_CODES
            or code.co_filename == _MODULE_FILE or _uses_zero_arg_super(code)):
        _C._dynamo.skip_code(code)
        return None
    with compile_context(next_compile_id(code)), compile_events.frame_compile(code, display_name(code)) as outcome:
        outcome.result = _compile_with_id(ctx, code, f_locals, f_globals)  # every log line names the compile
        return outcome.result


def _compile_with_id(ctx, code, f_locals, f_globals):
    entries = _C._dynamo._debug_get_cache_entry_list(code)
    if entries:
        compile_events.recompile(code, display_name(code), [_failed_guard(g, f_locals) for g, _ in entries],
                                 limit_hit=exceeds_recompile_limit(entries))
        if exceeds_recompile_limit(entries):
            warn_recompile_limit(code, display_name(code), _failed_guard(entries[0][0], f_locals),
                                 frame_states.get(code, {}), ctx.dynamic, static_frames.get(code))
            _C._dynamo.skip_code(code)
            return None
        if recompiles_log.isEnabledFor(logging.DEBUG):
            recompiles_log.debug(f"Recompiling function {code.co_name} in {code.co_filename}:{code.co_firstlineno}\n"
                     f"    triggered by the following guard failure(s):\n"
                     + "\n".join(f"    - {_failed_guard(g, f_locals)}" for g, _ in entries))
    try:
        return _translate(ctx, code, f_locals, f_globals)
    except SkipFrame as e:
        compile_events.runs_eagerly(str(e))
        log.debug(f"skipping {code.co_name} ({code.co_filename}:{code.co_firstlineno}): {e}")
        if e.permanent and not _C._dynamo._debug_get_cache_entry_list(code):
            _C._dynamo.skip_code(code)
        return None
    except Unsupported as e:  # only fullgraph=True lets a graph break out of _translate
        if ctx.fullgraph:
            raise
        compile_events.graph_break(e, whole_frame="the whole frame runs eagerly")
        warn_costly_break(e)
        graph_breaks_log.debug(f"Graph break: the whole frame {display_name(code)} runs eagerly: {e}")
        return None
    except Exception as e:
        # Note [Internal errors]: an exception from kiln's own compiler (the interpreter, codegen,
        # the backend: AOT, Inductor) must not reach the user, who asked for a faster version of a
        # program that works eagerly: the frame runs eagerly from now on, with one warning that
        # names the user's code and the reason (PyTorch's suppress_errors). A user's own error
        # (a shape mismatch) never gets here: tracing turns it into a graph break, and running
        # the call eagerly raises it exactly as eager does. fullgraph=True asks for the error.
        if ctx.fullgraph or not config.suppress_errors:
            raise
        _warn_internal_error(code, e)
        _C._dynamo.skip_code(code)
        return None


def _warn_internal_error(code, error):
    compile_events.internal_error(error)
    location = getattr(error, "kiln_user_location", None) or (code.co_filename, code.co_firstlineno)
    inner = error.inner_exception if isinstance(error, BackendCompilerFailed) else error
    what = (f"the backend {error.backend_name!r} failed" if isinstance(error, BackendCompilerFailed)
            else "kiln's compiler failed")
    message = (f"kiln.compile: {what} on {display_name(code)} ({location[0]}:{location[1]}): "
               f"{type(inner).__name__}: {inner}. This function runs eagerly from now on "
               f"(fullgraph=True raises the error instead; KILN_LOGS=+dynamo shows the steps).")
    log.info("%s", message)
    warnings.warn_explicit(message, RuntimeWarning, location[0], location[1], module="kiln._dynamo")


def _failed_guard(guard, f_locals):
    try:
        ok, reason = guard.check_verbose(f_locals)
        return reason if not ok else "(guards pass)"
    except Exception as e:  # a Python-callable guard
        return f"guard raised {type(e).__name__}: {e}"


def _translate(ctx, code, f_locals, f_globals):
    start = time.perf_counter()
    state = frame_states.setdefault(code, {})
    break_at, error = None, None
    for _ in range(4):  # a restart at a break, one with static shapes, a last one
        dynamic = False if code in static_frames else ctx.dynamic
        output = OutputGraph(code, f_globals, ctx.compiler_fn, state, dynamic, ctx.fullgraph)
        tx = InstructionTranslator(output, code, f_locals, f_globals, break_at)
        output.current_tx = tx
        try:
            try:
                value = tx.run()
            except SpecializeShapes as request:
                # Note [Symbolic layouts checked at the hints]: later calls of this code compile
                # for static shapes too (each size its own entry, up to the cache limit)
                static_frames[code] = request.reason
                log.info(f"{display_name(code)} compiles with static shapes: the trace over "
                         f"symbolic sizes lays a result out unlike eager: {request.reason}")
                continue
            except BreakRequest as request:
                if request.error is not None:  # discovered: start over, stopping before it
                    error = request.error
                    if ctx.fullgraph:
                        raise error
                    break_at = request.index
                    continue
                try:
                    result = _emit_break(ctx, tx, output, code, f_globals, request.index, error)
                except Unsupported as e:  # a live value the replacement code cannot rebuild
                    raise SkipFrame(f"{error.reason if error else 'graph break'}; then: {e.reason}") from e
                break
            else:
                result = _emit_return(ctx, tx, output, code, f_globals, value)
                break
        except (BreakRequest, SkipFrame, Unsupported):
            raise
        except Exception as e:  # internal: remember the user's line being translated (Note [Internal errors])
            if getattr(e, "kiln_user_location", None) is None:
                where = output.current_tx or tx
                line = where.current.line if where.current is not None else where.code.co_firstlineno
                try:
                    e.kiln_user_location = (where.code.co_filename, line)
                    e.kiln_user_frames = [f for f in where.frame_summaries() if is_user_file(f[0])]
                except AttributeError:  # an exception type without a __dict__
                    pass
            raise
        finally:
            output.restore_global_state()
            output.detach()
    else:
        raise SkipFrame("translation did not settle")
    _remember_layouts(state, output)
    remember_ints(state, output)
    elapsed = (time.perf_counter() - start) * 1e3
    log.info(f"compiled {code.co_name} ({code.co_filename}:{code.co_firstlineno}) in {elapsed:.1f} ms")
    if ctx.on_compiled:
        ctx.on_compiled(code, result[0], elapsed)
    return result


def _remember_layouts(state, output):
    """frame_state: per input, its sizes and strides, None where compiles saw them differ or made
    them symbolic (automatic dynamic shapes reads it: OutputGraph._dynamic_dims)."""
    for key, (sizes, strides) in output.input_layouts.items():
        seen = state.get(key)
        if seen is None or len(seen[0]) != len(sizes):
            state[key] = (sizes, strides)
        else:
            state[key] = tuple([s if s == t else None for s, t in zip(old, new)]
                               for old, new in zip(seen, (sizes, strides)))
    for key, (dims, stride_dims) in output.dynamic_sources.items():
        seen = state.get(key)
        if seen is not None:
            state[key] = ([None if d in dims else s for d, s in enumerate(seen[0])],
                          [None if d in stride_dims else s for d, s in enumerate(seen[1])])


def _finish(ctx, output, code, f_globals, codegen):
    guard = build_guards(output, f_globals)
    new_code, source = codegen.build()
    _C._dynamo.skip_code(new_code)  # the replacement runs as written; resume functions are captured
    bytecode_log.debug("code for %s:\n%s", code.co_name, source)
    return guard, new_code


def _emit_return(ctx, tx, output, code, f_globals, value):
    if output.count_calls() == 0 and not output.graphargs:
        raise SkipFrame("no tensor ops")
    cg = _graph_then_codegen(ctx, tx, output, code, f_globals, [value])
    result = value.reconstruct(cg)
    if output.side_effects:  # the return value is read before the writes (it may be an old attribute)
        result = cg.hold(result)
        output.side_effects.codegen(cg)
    cg.emit(f"return {result}")
    return _finish(ctx, output, code, f_globals, cg)


def _emit_break(ctx, tx, output, code, f_globals, index, error):
    inst = tx.instructions[index]
    reason = error.reason if error is not None else "graph break"
    if ctx.on_break:
        ctx.on_break(error)
    whole_frame = None
    if code.co_cellvars:
        whole_frame = "a function with cell variables (a local captured by a lambda or inner function)"
    elif _C._dynamo._in_try_block(tx.code, inst.offset):  # dynamo/bytecode_analysis.h
        whole_frame = "a graph break inside a try block"
    compile_events.graph_break(error, whole_frame)
    warn_costly_break(error)  # `.item()`, an unknown C function: warned even without KILN_LOGS
    if whole_frame is not None:  # logged like every break: the user must see why it runs eagerly
        graph_breaks_log.debug(f"Graph break: {error}\n  the whole frame {display_name(code)} "
                 f"({code.co_filename}:{code.co_firstlineno}) runs eagerly: resume code cannot continue {whole_frame}")
        raise SkipFrame(f"graph break in {whole_frame} ({reason})", permanent=True)
    graph_breaks_log.debug(f"Graph break: {error}")
    stack = list(tx.stack)
    # Only locals the rest of the function reads leave the graph: a dead one as an output that
    # requires grad joined the backward with a zero tangent, and zero times its NaN local
    # derivative (`v2 = sqrt(negative)`, unused) put NaN in gradients eager leaves finite.
    live = set(_C._dynamo._live_locals(code, inst.offset))
    live_values = stack + [v for name, v in tx.symbolic_locals.items() if name in live and not _is_lazy(v)]
    if inst.opname in _CALLS or inst.opname == "BINARY_SUBSCR":
        return _emit_call_break(ctx, tx, output, code, f_globals, index, inst, stack, live_values)
    if inst.opname in _STORES:
        return _emit_store_break(ctx, tx, output, code, f_globals, index, inst, stack, live_values)
    if inst.opname in _BRANCHES:
        return _emit_branch_break(ctx, tx, output, code, f_globals, index, inst, stack, live_values)
    if output.count_calls() == 0:
        raise SkipFrame(f"{reason} before any tensor op")
    cg = _graph_then_codegen(ctx, tx, output, code, f_globals, live_values)
    resume = _resume_call(cg, tx, code, f_globals, inst.offset, stack, hold=_holder(cg, output))
    output.side_effects.codegen(cg)
    cg.emit("return " + resume)
    return _finish(ctx, output, code, f_globals, cg)


def _is_lazy(v):
    from kiln._dynamo.variables.base import LazyVariable

    return isinstance(v, LazyVariable)


def _holder(cg, output):
    """With attribute writes to replay, every value the rest of the code passes on is read into a
    temporary before the writes (as the original code had read it before its STORE_ATTRs); with
    none, expressions stay inline."""
    return cg.hold if output.side_effects else (lambda expr: expr)


def _graph_then_codegen(ctx, tx, output, code, f_globals, live_values):
    """Compiles the graph so far (outputs: the tensors among live_values and among the values of
    pending attribute writes) and starts the replacement code with its call."""
    name, out_index = output.compile_subgraph(tx, list(live_values) + output.side_effects.values())
    if ctx.on_graph and name:
        ctx.on_graph(output)
    cg = FrameCodegen(code, f_globals, out_index)
    if name:
        cg.emit(f"___out = {name}({', '.join(output.input_exprs(cg))})")
    return cg


def _emit_call_break(ctx, tx, output, code, f_globals, index, inst, stack, live_values):
    cg = _graph_then_codegen(ctx, tx, output, code, f_globals, live_values)
    hold = _holder(cg, output)
    if inst.opname == "CALL":
        n = inst.arg
        callee = stack[len(stack) - n - 2:]
        rest = stack[:len(stack) - n - 2]
        below, fn, args = callee[0], callee[1], callee[2:]
        if not isinstance(below, NullVariable):
            fn, args = below, [callee[1]] + args
        kw_names = tx.kw_names or ()
        positional = args[:len(args) - len(kw_names)]
        keywords = dict(zip(kw_names, args[len(args) - len(kw_names):]))
        parts = [hold(a.reconstruct(cg)) for a in positional] + [f"{k}={hold(v.reconstruct(cg))}"
                                                                   for k, v in keywords.items()]
        call = f"___r = {hold(fn.reconstruct(cg))}({', '.join(parts)})"
    elif inst.opname == "BINARY_SUBSCR":  # x[mask]: the subscript runs in Python like a call
        rest = stack[:-2]
        call = f"___r = {hold(stack[-2].reconstruct(cg))}[{hold(stack[-1].reconstruct(cg))}]"
    else:  # CALL_FUNCTION_EX
        has_kwargs = inst.arg & 1
        count = 4 if has_kwargs else 3
        callee = stack[len(stack) - count:]
        rest = stack[:len(stack) - count]
        fn, args = callee[1], callee[2]
        text = f"{hold(fn.reconstruct(cg))}(*{hold(args.reconstruct(cg))}"
        if has_kwargs:
            text += f", **{hold(callee[3].reconstruct(cg))}"
        call = f"___r = {text})"
    next_offset = tx.instructions[index + 1].offset
    resume = _resume_call(cg, tx, code, f_globals, next_offset, rest, extra_top="___r", hold=hold)
    output.side_effects.codegen(cg)  # the writes precede the call, as in the original code
    cg.emit(call)
    cg.emit("return " + resume)
    return _finish(ctx, output, code, f_globals, cg)


def _emit_store_break(ctx, tx, output, code, f_globals, index, inst, stack, live_values):
    """`x[i] = v` that broke the graph runs in Python, as a breaking call does, and the code
    resumes after it. Resumed at the store instead, it was traced again in the resume function,
    whose inputs are plain tensors: a split piece that eager refuses to change in place
    (`x.split(1)[0][..., 0] = 0.5`) was written through its synthetic base there (fuzz seed 171,
    program 27365)."""
    cg = _graph_then_codegen(ctx, tx, output, code, f_globals, live_values)
    hold = _holder(cg, output)
    if inst.opname == "STORE_SUBSCR":  # stack: value, container, index
        rest, (value, container, key) = stack[:-3], stack[-3:]
        target = f"{hold(container.reconstruct(cg))}[{hold(key.reconstruct(cg))}]"
    else:  # STORE_SLICE (3.12): value, container, start, stop
        rest, (value, container, start, stop) = stack[:-4], stack[-4:]
        target = (f"{hold(container.reconstruct(cg))}"
                  f"[{hold(start.reconstruct(cg))}:{hold(stop.reconstruct(cg))}]")
    value_expr = hold(value.reconstruct(cg))
    resume = _resume_call(cg, tx, code, f_globals, tx.instructions[index + 1].offset, rest, hold=hold)
    output.side_effects.codegen(cg)  # the writes precede the store, as in the original code
    cg.emit(f"{target} = {value_expr}")
    cg.emit("return " + resume)
    return _finish(ctx, output, code, f_globals, cg)


def _emit_branch_break(ctx, tx, output, code, f_globals, index, inst, stack, live_values):
    cg = _graph_then_codegen(ctx, tx, output, code, f_globals, live_values)
    cond, rest = stack[-1], stack[:-1]
    jump_if = _BRANCHES[inst.opname]
    target = tx.instructions[inst.target].offset
    fallthrough = tx.instructions[index + 1].offset
    hold = _holder(cg, output)
    test = hold(cond.reconstruct(cg))
    taken = _resume_call(cg, tx, code, f_globals, target, rest, hold=hold)
    not_taken = _resume_call(cg, tx, code, f_globals, fallthrough, rest, hold=hold)
    output.side_effects.codegen(cg)
    cg.emit(f"if {'' if jump_if else 'not '}{test}:")
    cg.emit("    return " + taken)
    cg.emit("return " + not_taken)
    return _finish(ctx, output, code, f_globals, cg)


def _resume_call(cg, tx, code, f_globals, offset, stack, extra_top=None, hold=lambda expr: expr):
    """`__resume_at_N(locals..., (stack...))` continuing `code` at `offset` (`hold` evaluates the
    arguments' expressions now, see _holder)."""
    live = set(_C._dynamo._live_locals(code, offset))
    null_mask, values = [], []
    for v in stack:
        null_mask.append(isinstance(v, NullVariable))
        if not isinstance(v, NullVariable):
            values.append(hold(v.reconstruct(cg)))
    if extra_top is not None:
        null_mask.append(False)
        values.append(extra_top)
    args, dead = [], []
    for name in code.co_varnames:
        value = tx.symbolic_locals.get(name)
        if value is None or name not in live:
            args.append("None")
            dead.append(name)
        elif _is_lazy(value):
            args.append(name)  # untouched argument: pass it through
        else:
            args.append(hold(value.reconstruct(cg)))
    resume = _resume_code(code, offset, tuple(null_mask), tuple(dead))
    if code.co_freevars:
        fn = (f"{cg.object_expr(make_function)}({cg.object_expr(resume)}, globals(), "
              f"(lambda: ({', '.join(code.co_freevars)},)).__closure__)")
    else:
        fn = _install_resume_function(f_globals, code, resume)
    stack_tuple = "(" + "".join(v + ", " for v in values) + ")"
    return f"{fn}({', '.join(args + [stack_tuple])})"


def _resume_code(code, offset, null_mask, dead):
    per_code = _resume_cache.setdefault(code, {})
    key = (offset, null_mask, dead)
    hit = per_code.get(key)
    if hit is None:
        base = code
        if "___stack" in code.co_varnames:  # a resume function resumed again: keep names unique
            # (a fresh name, not one per resume point: a resume of a resume of a resume already
            # holds the renamed stacks of its ancestors, and a repeated name is a SyntaxError)
            renamed = next(f"___stack{k}_" for k in range(len(code.co_varnames) + 1)
                           if f"___stack{k}_" not in code.co_varnames)
            base = code.replace(co_varnames=tuple(n if n != "___stack" else renamed for n in code.co_varnames))
            dead = tuple(n if n != "___stack" else renamed for n in dead)
        # an identifier: the replacement code calls it by name (a lambda's co_name is "<lambda>")
        name = f"__resume_in_{re.sub(r'[^0-9A-Za-z_]', '_', display_name(code))}_at_{offset}_{next(_resume_ids)}"
        hit = _C._dynamo._make_resume_code(base, offset, list(null_mask), list(dead), name)
        per_code[key] = hit
    return hit


def display_name(code):
    """The user's function name for a code object (a resume function names its original)."""
    name = code.co_name
    if name.startswith("__resume_in_"):
        name = name[len("__resume_in_"):].rsplit("_at_", 1)[0]
    return name


def _install_resume_function(f_globals, code, resume):
    name = resume.co_name
    if name not in f_globals:
        install_global(f_globals, code, name, types.FunctionType(resume, f_globals, name))
    return name
