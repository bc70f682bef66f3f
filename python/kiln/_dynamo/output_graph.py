"""OutputGraph: the FX graph a translation builds, its inputs, guards and compilation.

Graph inputs are the tensors the frame reaches (arguments, globals, module parameters), each a
placeholder named after its source (`l_x_`, `l_self_modules_fc_parameters_weight_`) with a fake
tensor as example value; ops run on the fakes while they are recorded, which gives every node its
example output. compile_subgraph closes the graph over the values that must outlive it and hands
it to the backend; the compiled function is installed in the frame's globals (`__compiled_fn_N`).
"""

import functools
import itertools
import logging
import operator
import weakref

import kiln
from kiln import _C
from kiln._guards import current_compile_id
from kiln._dynamo import config
from kiln._dynamo.codegen import install_global
from kiln._dynamo.exc import BackendCompilerFailed, SpecializeShapes, Unsupported, is_user_file, unimplemented
from kiln._dynamo.side_effects import SideEffects
from kiln._dynamo.source import GlobalSource, Source, graph_input_name
from kiln._dynamo.symbolic_layouts import LayoutShadow
from kiln._dynamo.variables.base import ConstantVariable, VariableTracker
from kiln._dynamo.variables.dicts import ConstDictVariable
from kiln._dynamo.variables.lists import (BaseListVariable, ListVariable, NamedTupleVariable, TupleVariable,
                                         is_structseq_type)
from kiln._dynamo.variables.tensor import SymNodeVariable, TensorVariable
from kiln._logging import getArtifactLogger, trace_structured
from kiln._logging._metrics import counters, dynamo_timed
from kiln._subclasses.fake_tensor import FakeTensorMode, stride_derivation, unset_fake_temporarily
from kiln._symbolic import SymBool, SymFloat, SymInt
from kiln.fx.experimental.symbolic_shapes import ShapeEnv, hint_int

graph_code_log = getArtifactLogger(__name__, "graph_code")
_compiled_ids = itertools.count()


class ForeignGlobalSource(Source):
    """A global of another module than the frame's (reached while inlining a function defined
    there): guarded through a lambda over that module's dict."""

    def __init__(self, module_globals, global_name):
        self.module_globals, self.global_name = module_globals, global_name

    def name(self):
        return f"G[{self.module_globals.get('__name__', '?')!r}][{self.global_name!r}]"

    def expr(self, codegen):
        return f"{codegen.object_expr(self.module_globals)}[{self.global_name!r}]"

    def guard_manager(self, builder):
        raise AssertionError("unreachable source")

    def reachable(self):
        return False  # GuardBuilder checks it with a lambda guard


class GraphArg:
    __slots__ = ("source", "example", "fake", "node")

    def __init__(self, source, example, fake, node):
        self.source, self.example, self.fake, self.node = source, example, fake, node


class GuardSet:
    """The guards recorded during one translation: (source, kind, argument, origin), deduplicated."""

    def __init__(self, output):
        self.output = output
        self.entries = {}

    def add(self, source, kind, arg):
        key = (source.name(), kind)
        if key not in self.entries:
            tx = self.output.current_tx
            origin = _user_location(tx) if tx is not None else ""
            self.entries[key] = (source, kind, arg, origin)


def _user_location(tx):
    """`file:line in fn` of the innermost frame of the user's own code the translator is in (a guard
    made inside an inlined kiln module names the user's line that called it). Kept per instruction:
    an instruction adds its guards in a burst (a module's attribute, its parameters), and the
    frames above a translator stay where they are while it runs."""
    cached = tx.__dict__.get("_user_location")
    if cached is not None and cached[0] is tx.current:
        return cached[1]
    frames = [f for f in tx.frame_summaries() if is_user_file(f[0])]
    if not frames:
        location = tx.location()
    else:
        filename, line, name = frames[-1]
        location = f"{filename}:{line} in {name}"
    tx._user_location = (tx.current, location)
    return location


def _stride_guards(value, fake, stride_dims):
    """TENSOR_MATCH's strides for an input: ints where the fake's are; None (the contiguous
    stride) for a contiguous input's symbolic ones; otherwise a stride symbol's name, or
    ('stride*size', j) where the layout writes it as dim j's stride times its size."""
    if value.is_contiguous():
        return [s if isinstance(s, int) else None for s in fake.stride()]
    derivation = stride_derivation(list(value.shape), list(value.stride()), stride_dims or ())
    return [s if isinstance(s, int) else how if isinstance(how, tuple) else _size_spec(s)
            for s, how in zip(fake.stride(), derivation)]


def _size_spec(s):
    """TENSOR_MATCH's entry for a size or stride of a fake input: the int, or the name of the
    symbol it is (bound at check time), read from its expression tree; one that is an expression
    of symbols (a fresh input's never is) is checked at its value now."""
    if isinstance(s, int):
        return s
    name = s.node.symbol_name()
    return name if name is not None else hint_int(s)


class OutputGraph:
    def __init__(self, code, f_globals, compiler_fn, frame_state, dynamic=None, fullgraph=False):
        self.code, self.root_globals, self.compiler_fn = code, f_globals, compiler_fn
        self.frame_state, self.dynamic, self.fullgraph = frame_state, dynamic, fullgraph
        self.graph = kiln.fx.Graph()
        self.shape_env = ShapeEnv()
        self.fake_mode = FakeTensorMode(shape_env=self.shape_env)
        self.graphargs = []
        self.inputs_by_source = {}
        self.globals_cache = {}
        self.guards = GuardSet(self)
        self.initial_grad_enabled = _C.is_grad_enabled()
        self.initial_autocast_state = _C._get_autocast_state()
        self.current_tx = None
        self.dynamic_sources = {}  # source name -> (dims, stride dims) made symbolic (for frame_state)
        self.layout_shadow = LayoutShadow()  # Note [Symbolic layouts checked at the hints]
        self.input_layouts = {}    # source name -> the real input's (sizes, strides) (for frame_state)
        self.compiled_graphs = []  # GraphModules handed to the backend
        self.side_effects = SideEffects()  # attribute writes replayed after the graph
        self.int_values = {}       # int argument's source name -> its value (dynamic_ints.py)
        self.int_inputs = {}       # source name -> the SymNodeVariable of an int compiled as a symbol
        self.int_symbols = {}      # source name -> (source, its symbol's name), for its guard

    # --- inputs -----------------------------------------------------------------------------
    def wrap_global(self, tx, f_globals, name):
        from kiln._dynamo.variables.builder import wrap

        hit = self.globals_cache.get(name)
        if hit is None:
            hit = wrap(tx, f_globals[name], GlobalSource(name))
            self.globals_cache[name] = hit
        return hit

    def wrap_foreign_global(self, tx, f_globals, name):
        from kiln._dynamo.variables.builder import wrap

        module = f_globals.get("__name__", "") or ""
        if module == "kiln" or module.startswith("kiln."):
            return wrap(tx, f_globals[name], None)  # kiln's own module globals are not guarded
        return wrap(tx, f_globals[name], ForeignGlobalSource(f_globals, name))

    def _dynamic_dims(self, source, value):
        """(dims whose sizes get symbols, dims whose strides may), or (None, None) for a static
        input. Automatic dynamic shapes: a size or stride that differs from an earlier compile's
        (frame_state) becomes symbolic, as PyTorch's frame state does for both."""
        if self.dynamic is False or value.dim() == 0:
            return None, None
        dims = set(getattr(value, "_dynamo_dynamic_indices", ()) or ())
        strides = set()
        if self.dynamic is True:
            dims = strides = set(range(value.dim()))
        elif config.automatic_dynamic_shapes:
            seen = self.frame_state.get(source.name())
            if seen is not None:
                seen_sizes, seen_strides = seen
                if len(seen_sizes) != value.dim():
                    dims = strides = set(range(value.dim()))
                else:
                    dims |= {d for d, s in enumerate(seen_sizes) if s is None or s != value.shape[d]}
                    strides = {d for d, s in enumerate(seen_strides) if s is None or s != value.stride()[d]}
        if not dims and not strides:
            return None, None
        return dims, strides

    def add_graph_input(self, tx, source, value):
        key = source.name()
        hit = self.inputs_by_source.get(key)
        if hit is not None:
            return hit
        dims, stride_dims = self._dynamic_dims(source, value)
        self.input_layouts[key] = (list(value.shape), list(value.stride()))
        fake = self.fake_mode.from_tensor(value, source=graph_input_name(source).rstrip("_"),
                                          static_shapes=dims is None, dynamic_dims=dims, dynamic_strides=stride_dims)
        name = graph_input_name(source)
        node = self._placeholder(name)
        node.meta["example_value"] = fake
        node.meta["source"] = key
        self.graphargs.append(GraphArg(source, value, fake, node))
        sizes = [_size_spec(s) for s in fake.shape]
        self.guards.add(source, "TENSOR_MATCH", (value, sizes, _stride_guards(value, fake, stride_dims)))
        if dims is not None:
            self.dynamic_sources[key] = (dims, stride_dims)
        var = TensorVariable(node, fake, source)
        self.inputs_by_source[key] = var
        return var

    def _placeholder(self, name):
        """A new graph input, placed ahead of every op (placeholders come first): after the last
        one this made while it is still the last (every placeholder is made here), else before
        the first op (a scan of the graph, once per input, made tracing quadratic in its size)."""
        graph, last = getattr(self, "_last_placeholder", (None, None))
        if graph is self.graph and not last._erased and (last.next is None or last.next.op != "placeholder"):
            with self.graph.inserting_after(last):
                node = self.graph.placeholder(name)
        else:
            first_op = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
            if first_op is None:
                node = self.graph.placeholder(name)
            else:
                with self.graph.inserting_before(first_op):
                    node = self.graph.placeholder(name)
        self._last_placeholder = (self.graph, node)
        return node

    def add_int_input(self, tx, source, value):
        """An int argument as a symbol (automatic dynamic ints, dynamic_ints.py): a graph input
        whose example is a SymInt with `value` as its hint."""
        key = source.name()
        hit = self.int_inputs.get(key)
        if hit is not None:
            return hit
        name = graph_input_name(source)
        sym = self.shape_env.create_symbol(value, name.rstrip("_"))
        node = self._placeholder(name)
        node.meta["example_value"] = sym
        node.meta["source"] = key
        self.graphargs.append(GraphArg(source, value, sym, node))
        self.guards.add(source, "TYPE_MATCH", int)
        var = SymNodeVariable(node, sym)
        self.int_inputs[key] = var
        self.int_symbols[key] = (source, sym.node.symbol_name())  # named now: a guard may replace it by a number later
        return var

    # --- ops ----------------------------------------------------------------------------------
    def call(self, tx, kind, target, args, kwargs):
        """Records `target(*args, **kwargs)` (trackers) as a node and returns the result's tracker."""
        node_args = tuple(_proxy(a) for a in args)
        node_kwargs = {k: _proxy(v) for k, v in kwargs.items()}
        fake = _fake_scalar_free if _is_tensor_scalar_arithmetic(kind, target, [*args, *kwargs.values()]) else _fake
        fake_args = tuple(fake(a) for a in args)
        fake_kwargs = {k: fake(v) for k, v in kwargs.items()}
        result = self._run_fake(kind, target, fake_args, fake_kwargs)
        if self.dynamic_sources:  # symbols come from dynamic inputs only (or are unbacked: unchecked)
            disagreement = self.layout_shadow.disagreement(kind, target, fake_args, fake_kwargs, result)
            if disagreement is not None:
                name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
                raise SpecializeShapes(f"{name} at {tx.location()}: {disagreement}")
        if kind == "call_method" and not target.endswith("_") and fake_args and result is fake_args[0] and \
                isinstance(args[0], TensorVariable):
            # `x.float()` of a float tensor, `x.contiguous()` of a contiguous one: eager returns x
            # itself, so later in-place ops (`v0.t_()`) must change x; a node for it would be a
            # separate tensor (fuzz seed 131, program 701)
            return args[0]
        unavailable = _unavailable_device(result)
        if unavailable is not None:  # fake tensors exist on any device; real ones only where kiln runs
            name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
            unimplemented(f"{name} makes a tensor on {unavailable[0]}, where eager raises "
                          f"{type(unavailable[1]).__name__}: {unavailable[1]}",
                          "the call runs eagerly, which raises the same error")
        if not config.capture_dynamic_output_shape_ops:
            # new unbacked sizes of result tensors (an item() under capture_scalar_outputs makes a
            # scalar symbol, which is that option's business)
            new = _unbacked_symbols(result, tensor_sizes_only=True) - _unbacked_symbols((fake_args, fake_kwargs))
            if new:
                name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
                unimplemented(f"{name}: its output shape depends on the input's data (dynamic output shape, size "
                              f"{', '.join(sorted(new))})",
                              "it runs eagerly; set kiln._dynamo.config.capture_dynamic_output_shape_ops = True "
                              "to keep it in the graph")
        node = self.graph.create_node(kind, target, node_args, node_kwargs)
        node.meta["example_value"] = result
        node.meta["stack_trace"] = tx.stack_trace()  # provenance: kiln/fx/traceback.py
        return self.wrap_result(tx, node, result)

    def call_raw(self, tx, kind, target, node_args, node_kwargs, example=None):
        """A node over FX arguments whose example value is known (size reads, SymInt arithmetic)."""
        node = self.graph.create_node(kind, target, tuple(node_args), dict(node_kwargs))
        node.meta["example_value"] = example
        return node

    def _run_fake(self, kind, target, args, kwargs):
        name = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
        try:
            with self.fake_mode:
                if kind == "call_method":
                    return getattr(args[0], target)(*args[1:], **kwargs)
                return target(*args, **kwargs)
        except Unsupported:
            raise
        except Exception as e:
            from kiln.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

            if isinstance(e, GuardOnDataDependentSymNode):
                unimplemented(f"{name}: the result depends on tensor data ({e})",
                              "keep data-dependent values in tensors")
            unimplemented(f"{name} raised {type(e).__name__} while tracing: {e}",
                          "the same call raises when run eagerly, or it does not support fake tensors")

    def wrap_result(self, tx, node, result):
        if isinstance(result, kiln.Tensor):
            return TensorVariable(node, result)
        if isinstance(result, (SymInt, SymFloat, SymBool)):
            return SymNodeVariable(node, result)
        if isinstance(result, (tuple, list)):
            items = []
            for i, item in enumerate(result):
                sub = self.graph.create_node("call_function", operator.getitem, (node, i), {})
                sub.meta["example_value"] = item
                items.append(self.wrap_result(tx, sub, item))
            if is_structseq_type(type(result)):
                return NamedTupleVariable(items, type(result))
            return (ListVariable if isinstance(result, list) else TupleVariable)(items)
        if result is None or isinstance(result, (bool, int, float, str, _C.dtype)):
            if not node.users and not _has_side_effects(node):
                self.graph.erase_node(node)
            return ConstantVariable(result)
        unimplemented(f"an op returned a {type(result).__name__}, which the graph cannot carry")

    def set_grad_enabled(self, tx, mode):
        if _C.is_grad_enabled() != mode:
            _C._set_grad_enabled(mode)
            self.graph.create_node("call_function", _C._set_grad_enabled, (mode,), {})

    def set_autocast_state(self, tx, state):
        if _C._get_autocast_state() != tuple(state):
            _C._set_autocast_state(*state)
            self.graph.create_node("call_function", _C._set_autocast_state, tuple(state), {})

    def restore_global_state(self):
        _C._set_grad_enabled(self.initial_grad_enabled)
        _C._set_autocast_state(*self.initial_autocast_state)

    def detach(self):
        """The translation is over: drops the references back to this output graph from its
        translator and its guards, so the translation's state is freed by reference counting
        (cycles waited for the collector: 5,400 objects after a 16-layer GPT's translation)."""
        self.current_tx = None
        self.guards.output = None

    # --- compilation --------------------------------------------------------------------------
    def count_calls(self):
        return sum(1 for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module"))

    def compile_subgraph(self, tx, values):
        """Compiles the graph with every tensor/symbolic value in `values` as an output.
        Returns (compiled function name or None, {node: output index})."""
        outputs, index = [], {}
        seen = set()

        # depth first, in order (a work list, not a recursive closure: that is a reference cycle)
        todo = list(reversed(values))
        while todo:
            v = todo.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, (TensorVariable, SymNodeVariable)):
                if v.node.op != "placeholder" and v.node not in index:
                    index[v.node] = len(outputs)
                    outputs.append(v.node)
                continue
            if isinstance(v, VariableTracker):  # containers, bound methods, cells, iterators ...
                todo.extend(reversed(list(vars(v).values())))
            elif isinstance(v, (list, tuple)):
                todo.extend(reversed(v))
            elif isinstance(v, dict):
                todo.extend(reversed(list(v.values())))
        # grad mode: the graph leaves the mode as eager would have it at this point
        self.graph.output(tuple(outputs))
        self.graph.eliminate_dead_code(_has_side_effects)
        self._prune_unused_inputs()
        if self.count_calls() == 0 and not outputs:
            return None, index
        gm = kiln.fx.GraphModule(kiln.nn.Module(), self.graph)
        # the frame and fullgraph: a backend that compiles at the first call (AOT) reports its
        # errors as convert_frame does (Note [Internal errors at the first call]); the code by a
        # weak reference, as its cache entries hold the compiled graph (a cycle through C++)
        gm.meta = {"dynamo_flat_name_to_original_fqn": {}, "kiln_code": weakref.ref(self.code),
                   "kiln_fullgraph": self.fullgraph, "kiln_compile_id": current_compile_id()}
        self.compiled_graphs.append(gm)
        counters["stats"]["calls_captured"] += self.count_calls()
        counters["stats"]["unique_graphs"] += 1
        trace_structured("dynamo_graph", {"function": self.code.co_name, "file": self.code.co_filename},
                         lambda: gm.print_readable(print_output=False))
        if graph_code_log.isEnabledFor(logging.DEBUG):
            graph_code_log.debug("TRACED GRAPH %s (%s)\n%s", self.code.co_name, self.code.co_filename,
                                 gm.print_readable(print_output=False))
        example_inputs = [ga.example for ga in self.graphargs]
        try:
            with dynamo_timed("OutputGraph.call_user_compiler"):
                compiled = self.compiler_fn(gm, example_inputs)
        except Exception as e:
            raise BackendCompilerFailed(getattr(self.compiler_fn, "__name__", repr(self.compiler_fn)), e) from e
        if compiled is None:
            raise BackendCompilerFailed(repr(self.compiler_fn), TypeError("the backend returned None"))
        name = f"__compiled_fn_{next(_compiled_ids)}"
        install_global(self.root_globals, self.code, name, _disable_wrapper(compiled, gm))
        return name, index

    def _prune_unused_inputs(self):
        keep = []
        for ga in self.graphargs:
            if ga.node.users:
                keep.append(ga)
            else:
                self.graph.erase_node(ga.node)
        self.graphargs = keep

    def input_exprs(self, codegen):
        return [ga.source.expr(codegen) for ga in self.graphargs]


def _disable_wrapper(compiled, gm):
    """The backend's callable runs with the frame hook off, so the compiler never captures its
    own code. A graph run as written (gm.forward) whose calls are all kiln's, operator's or
    builtins skips the wrapper: its own frame is marked skip, and every frame it can start is
    kiln's (never captured), so the hook is off for it in effect, one call cheaper."""
    from kiln._dynamo.eval_frame import disable

    if getattr(compiled, "__self__", None) is gm and getattr(compiled, "__func__", None) is type(gm).forward:
        if all(n.op != "call_function" or _runs_no_user_frames(n.target) for n in gm.graph.nodes):
            _C._dynamo.skip_code(type(gm).forward.__code__)
            return compiled
    return disable(compiled)


def _runs_no_user_frames(target):
    if isinstance(target, _C._OpFunction):
        return target._namespace == "aten"  # an operator defined in Python runs the user's functions
    module = getattr(target, "__module__", None) or ""
    return module in ("_operator", "builtins", "math") or module == "kiln" or module.startswith("kiln.")


def _makes_tensor(value):
    if isinstance(value, kiln.Tensor):
        return True
    return isinstance(value, (list, tuple)) and any(isinstance(v, kiln.Tensor) for v in value)


_MUTATING_FUNCTIONS = {operator.setitem, operator.delitem, operator.iadd, operator.isub, operator.imul,
                       operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul,
                       operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift}


def _has_side_effects(node):
    """Nodes dead-code elimination must keep although nothing reads them: in-place tensor ops
    (`x.add_(1)`, `x[0] = 0`, `x += y`, `F.relu(x, inplace=True)`), grad-mode switches, and every
    op that makes a tensor. Dynamo keeps the user's tensor ops as written, as PyTorch's does: the
    "eager" backend runs them all, so a dead op's error (an integer division by zero) is still
    raised; AOT and Inductor drop dead code, as torch.compile's do. Only bookkeeping dies here
    (a tuple's unused item, an unread size)."""
    if node.op in ("call_function", "call_method", "call_module") and _makes_tensor(node.meta.get("example_value")):
        # `x[i]` is a tensor op; an item of split's result is bookkeeping
        source = node.args[0] if node.target is operator.getitem and node.args else None
        if source is None or isinstance(getattr(source, "meta", {}).get("example_value"), kiln.Tensor):
            return True
    if node.op == "call_method":
        name = node.target
        return name.endswith("_") and not name.endswith("__") or name in ("__setitem__", "__iadd__", "__imul__")
    if node.op == "call_function":
        target = node.target
        if target in _MUTATING_FUNCTIONS or node.kwargs.get("inplace") is True:
            return True
        if isinstance(target, _C._OpFunction) and getattr(target, "__name__", "").endswith("_"):
            return True
    return node.is_impure()


# Note [Symbolic scalars in arithmetic]: `x * x.shape[0]` or `x + y.sum().item()` multiplies a
# tensor by a SymInt/SymFloat. Passing the symbol to the op would turn it into a concrete Scalar,
# guarding on its value (or failing, for data-dependent ones). An elementwise op's result metadata
# cannot depend on the scalar's value, only on its type, so the fake run gets a stand-in of the same
# type while the node keeps the symbolic value: the graph stays general and no guard is added.
# Which calls are elementwise the registry says: the op's `pointwise` tag, the op found from the
# call (a kiln function or Tensor method is the op's _OpFunction; a Python operator runs the op
# kiln._C._tensor_operators names for its special method, Note [Tensor operators]). Others (a
# view's size, a Python function) get the symbol itself.
def _is_tensor_scalar_arithmetic(kind, target, args):
    """args: the call's positional and keyword arguments (`x.clamp(min=n / 4)`)."""
    if not (any(isinstance(a, TensorVariable) for a in args) and any(isinstance(a, SymNodeVariable) for a in args)):
        return False
    if kind == "call_method":
        return _method_is_pointwise(target)
    if kind == "call_function":
        if isinstance(target, _C._OpFunction):
            return _op_is_pointwise(target.__name__)
        if getattr(target, "__module__", "") == "_operator":  # operator.mul(x, s): x.__mul__ or s.__rmul__
            name = target.__name__.strip("_")
            return _method_is_pointwise(f"__{name}__") and _method_is_pointwise(f"__r{name}__")
    return False


@functools.lru_cache(maxsize=None)
def _method_is_pointwise(name):
    op = _C._tensor_operators.get(name)
    if op is None:
        method = getattr(kiln.Tensor, name, None)
        op = method.__name__ if isinstance(method, _C._OpFunction) else None
    return op is not None and _op_is_pointwise(op)


@functools.lru_cache(maxsize=None)
def _op_is_pointwise(name):
    packet = getattr(kiln.ops.aten, name, None)
    return packet is not None and any(kiln.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())


def _fake_scalar_free(v):
    if isinstance(v, SymNodeVariable):
        return {int: 2, float: 2.0, bool: True}.get(v.python_type(), v.value)
    return _fake(v)


_device_errors = {}  # device type -> the exception eager raises allocating there (None: it works)


def _unavailable_device(value):
    """(device, error) for the first tensor in `value` on a device kiln cannot allocate on (a
    CPU-only build asked for "cuda"), else None. The fake run succeeds there; eager does not."""
    tensors = [v for v in (value if isinstance(value, (tuple, list)) else [value]) if isinstance(v, kiln.Tensor)]
    for t in tensors:
        device = t.device
        if device.type in ("cpu", "meta"):
            continue
        if device.type not in _device_errors:
            try:
                with unset_fake_temporarily():
                    kiln.empty(0, device=device)
                _device_errors[device.type] = None
            except Exception as e:
                _device_errors[device.type] = e
        if _device_errors[device.type] is not None:
            return device, _device_errors[device.type]
    return None


def _unbacked_in(sym):
    """The unbacked symbols (ShapeEnv names them u0, u1, ...) among a symbolic value's free symbols."""
    return [name for name in sym.node.free_symbols() if name.startswith("u")]



def _unbacked_symbols(value, tensor_sizes_only=False):
    """Names of the unbacked symbols (u0, u1: sizes known only from data) in the sizes of the
    tensors and (unless tensor_sizes_only) the SymInts inside `value` (nested tuples, lists, dicts)."""
    found = set()
    todo = [value]  # a work list, not a recursive closure (a reference cycle per call)
    while todo:
        v = todo.pop()
        if isinstance(v, kiln.Tensor):
            for s in v.shape:
                if isinstance(s, SymInt):
                    found.update(_unbacked_in(s))
        elif isinstance(v, (SymInt, SymFloat, SymBool)) and not tensor_sizes_only:
            found.update(_unbacked_in(v))
        elif isinstance(v, (tuple, list)):
            todo.extend(v)
        elif isinstance(v, dict):
            todo.extend(v.values())
    return found


def _proxy(v):
    if isinstance(v, VariableTracker):
        return v.as_proxy()
    return v


def _fake(v):
    if isinstance(v, TensorVariable):
        return v.example
    if isinstance(v, SymNodeVariable):
        return v.value
    if isinstance(v, BaseListVariable):
        return v.kind(_fake(i) for i in v.items) if v.kind is not kiln.Size else tuple(_fake(i) for i in v.items)
    if isinstance(v, ConstDictVariable):
        return {k: _fake(i) for k, i in v.items.items()}
    if isinstance(v, VariableTracker):
        from kiln._dynamo.variables.lists import SliceVariable

        if isinstance(v, SliceVariable):
            return slice(*(_fake(p) for p in v.parts))
        return v.as_python_constant()
    return v


kiln.fx.node._side_effectful_functions.add(_C._set_grad_enabled)
kiln.fx.node._side_effectful_functions.add(_C._set_autocast_state)
