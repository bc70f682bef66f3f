"""kiln._functorch.aot_autograd: AOTAutograd, as PyTorch's functorch has it.

    compiled = aot_function(fn, fw_compiler, bw_compiler, partition_fn=default_partition)

On the first call with inputs of a given layout, `fn` is traced ahead of time into aten graphs:

1. the joint: fn on fake copies of the inputs, then kiln.autograd.grad of its differentiable
   outputs against the inputs that require grad, with one `tangents_i` input per such output,
   recorded by make_fx (the Tracing key sees the forward ops and every backward op);
2. that graph traced again through kiln.func.functionalize, with the decomposition table: no
   in-place op and no mutation remains; an input the program mutated (batch norm's running
   statistics, a user's `x.add_(1)`) ends in a copy_ epilogue, which becomes an extra output;
3. partition_fn cuts the joint into a forward graph (primals -> outputs + saved values) and a
   backward graph (saved values + tangents -> input gradients); the compilers compile each.

At run time a kiln.autograd.Function runs the compiled forward, keeps the saved values, and
runs the compiled backward on .backward(); the wrapper copies mutated inputs back and rebuilds
outputs that alias an input as views of it. Without grad (no input requires it, or grad mode
off) one functional graph goes to the inference compiler. Compiled code is cached per input
layout (sizes, strides, dtype, requires_grad) and grad mode.
"""

import contextlib
import functools
import operator
import re
import time

import kiln
from kiln import _C
from kiln._dynamo import logs
from kiln._functorch.backward_reads import (formula_masks, inputs_read_by_backward, prune_absent,
                                             saved_input_aliases, saved_inputs_recomputed_from,
                                             tangent_dependencies, tangent_masks)
from kiln._subclasses.creation_meta import as_multi_output_view, multi_output_origin
from kiln._subclasses.fake_tensor import FakeTensorMode
from kiln.fx.experimental.proxy_tensor import current_trace_node, make_fx
from kiln.func import _flatten, _unflatten, functionalize
from kiln.utils.checkpoint import annotate_region

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "AOTConfig"]


class AOTConfig:
    def __init__(self, fw_compiler, bw_compiler, inference_compiler, partition_fn, decompositions,
                 num_params_buffers=0, keep_inference_input_mutations=False):
        self.fw_compiler, self.bw_compiler, self.inference_compiler = fw_compiler, bw_compiler, inference_compiler
        self.partition_fn, self.decompositions = partition_fn, dict(decompositions or {})
        self.num_params_buffers = num_params_buffers
        self.keep_inference_input_mutations = keep_inference_input_mutations


def _call_compiled(fn, args):
    """The boxed convention (make_boxed_func): a list the callee may clear; else positional."""
    if getattr(fn, "_boxed_call", False):
        return fn(list(args))
    return fn(*args)


def _layout_key(leaves):
    key = _C._aot_layout_key(leaves)  # C++: runs on every call of a compiled function
    if key is not None:
        return key
    key = [_C.is_grad_enabled()]  # symbolic sizes (a compiled function called inside a trace)
    for x in leaves:
        if isinstance(x, kiln.Tensor):
            key.append((tuple(x.shape), tuple(x.stride()), x.storage_offset(), x.dtype, x.device, x.requires_grad))
        else:
            key.append((type(x), x))
    aliases = _aliasing(leaves)
    if aliases:
        key.append(aliases)
    return tuple(key)


def _aliasing(leaves):
    """Which arguments share a storage (Note [Aliased arguments] in python_aot_runtime.cc):
    (later, earliest, same tensor) triples, as the C++ key has them."""
    first, out = {}, []
    for i, x in enumerate(leaves):
        if isinstance(x, kiln.Tensor):
            j = first.setdefault(x._storage_id(), i)
            if j != i:
                out.append((i, j, x is leaves[j]))
    return tuple(out)


def _deduplicated(create, flat_fn, leaves, config):
    """create(flat_fn, leaves, config) for arguments without repeats: a tensor passed more than
    once (tied weights reached through two module paths) is traced as one input, so its gradient
    is the sum over its uses once, not once per position (which the engine would add up again)."""
    firsts, seen = [], {}
    for i, x in enumerate(leaves):
        firsts.append(seen.setdefault(id(x), i) if isinstance(x, kiln.Tensor) else i)
    keep = sorted(set(firsts))
    if len(keep) == len(leaves):
        return _with_synthetic_bases(create, flat_fn, leaves, config)
    position = {i: k for k, i in enumerate(keep)}
    where = [position[f] for f in firsts]

    def unique_fn(*unique):
        return flat_fn(*[unique[w] for w in where])

    inner = _with_synthetic_bases(create, unique_fn, [leaves[i] for i in keep], config)
    return lambda args: inner([args[i] for i in keep])


def _overlaps_itself(t):
    """Whether two elements of t share a memory location (an expanded dim); an empty tensor has
    no element to share."""
    return t.numel() > 0 and any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride()))


def _with_synthetic_bases(create, flat_fn, leaves, config):
    """Note [Synthetic bases]: functionalization treats every input as its own memory. That is
    wrong for an input the program mutates when its memory is shared: with another input (`a`
    and `a.t()`) or within itself (`base.expand(5, 2)`, whose rows are one row). Such a group
    of inputs is traced as one dense 1-d base over their storage (from its first element to the
    last they reach), each member rebuilt
    inside the program as an as_strided view of it; the mutation then lands on the base, which
    is copied back, and every member reads it, as eager's shared memory does (PyTorch's AOT
    does the same). When members require grad, the base is cut from the tensor they all view
    (their `_base`), so the copy-back joins its history as eager's in-place op through a view
    does and each member's gradient reaches it; members with no common base are refused."""
    groups = {}
    for i, x in enumerate(leaves):
        if isinstance(x, kiln.Tensor):
            groups.setdefault(x._storage_id(), []).append(i)
    # empty inputs share memory too: one changed in place bumps the version the others' saved
    # values are checked by (`x1.mT.abs()` then `x2.neg_()` of an empty x2 aliasing x1 raises in
    # eager's backward: fuzz seed 291, program 1051)
    suspects = [g for g in groups.values() if len(g) > 1 or leaves[g[0]].numel() > 0 and _overlaps_itself(leaves[g[0]])]
    if not suspects:
        return create(flat_fn, leaves, config)
    mode, fakes = _fakes(leaves)
    versions = [f._version if isinstance(f, kiln.Tensor) else None for f in fakes]
    layouts = [_layout(f) if isinstance(f, kiln.Tensor) else None for f in fakes]
    with mode:
        flat_fn(*fakes)
    mutated = {i for i, (f, v) in enumerate(zip(fakes, versions)) if v is not None and f._version != v}
    relaid = _restore_layouts(mode, fakes, layouts)  # `x.t_()` on a member: replayed below
    bases = [g for g in suspects if mutated.intersection(g)]
    if not bases:
        return create(flat_fn, leaves, config)
    for g in bases:
        _differentiable_root(leaves, g)  # refuses here, at compile time, when there is none
    members = {i: k for k, g in enumerate(bases) for i in g}
    # Each base spans its storage from element 0, so that its trace input starts where its
    # storage does: a base starting at its members' first element (x[1:] and x[1:].t()) was a
    # fake whose storage was too short for that offset ("setStorage ... out of bounds").
    spans = [(0, max((_extent(leaves[i]) or (0, -1))[1] for i in g)) for g in bases]
    rest = [i for i in range(len(leaves)) if i not in members]
    layouts = {i: (tuple(leaves[i].shape), tuple(leaves[i].stride()), leaves[i].storage_offset() - spans[members[i]][0])
               for i in members}
    # a member that is a split piece is rebuilt as one, so the trace raises where eager does:
    # `base.mul_(2)` then any use of the piece (Note [Multi-output views of stand-ins])
    origins = {i: multi_output_origin(leaves[i]) for i in members}

    def split(args):  # real leaves -> the other leaves, then one dense base per group
        out = [args[i] for i in rest]
        for g, (lo, hi) in zip(bases, spans):
            out.append(_differentiable_root(args, g).as_strided((hi - lo + 1,), (1,), lo))
        return out

    def based_fn(*args):
        values = [None] * len(leaves)
        for i, a in zip(rest, args):
            values[i] = a
        base_args = args[len(rest):]
        for i, k in members.items():
            size, stride, offset = layouts[i]
            values[i] = base_args[k].as_strided(size, stride, base_args[k].storage_offset() + offset)
            if origins[i] is not None:
                values[i] = as_multi_output_view(values[i], origins[i])
        return flat_fn(*values)

    inner = create(based_fn, split(leaves), config)
    relaid = {i: layout for i, layout in relaid.items() if i in members}  # the others: inner's own

    def run(args):
        def relay():  # a member is rebuilt inside: its new layout is not the inner function's
            for i, layout in relaid.items():  # business (Note [Input metadata mutations])
                args[i].as_strided_(*layout)

        if _C.is_grad_enabled():
            for i in members:  # eager's error for a split piece used after its base changed
                if args[i].requires_grad:
                    args[i].grad_fn  # noqa: B018 - reading it raises that error, as eager's first use does
        # inside the inner epilogue, before the backward's versions are read: the relaying bumps
        # the version counter every member shares with the base (Note [Versions after the epilogue])
        return inner(split(args), epilogue=relay if relaid else None)
    return run


def _differentiable_root(args, group):
    """The tensor a synthetic base is cut from: any member when none requires grad; else the one
    tensor every member views or is (Tensor._base), whose history reaches them all."""
    if not any(args[i].requires_grad for i in group):
        return args[group[0]]
    roots = [args[i] if args[i]._base is None else args[i]._base for i in group]
    if any(r is not roots[0] for r in roots):
        raise NotImplementedError(
            f"aot_function: inputs {list(group)} share memory, are mutated in place, and require grad, but are "
            "not views of one tensor; kiln's compiled functions support that only for views of one tensor "
            "(clone them first)")
    return roots[0]


# --- tracing ---------------------------------------------------------------------------------------
class _Traced:
    """What tracing learned: the functional graph and how its outputs map back."""

    def __init__(self, graph, mutated_inputs, num_outputs, output_aliases, out_requires_grad,
                 mutation_differentiable=None, constants=(), new_layouts=None):
        self.graph = graph
        # input index -> (sizes, strides, offset) the program left it with (`x.t_()`)
        self.new_layouts = dict(new_layouts or {})
        self.deferred_errors = {}  # input index -> the error a backward through its mutation raises
        self.deferred_outputs = {}  # output index -> the error a backward through it raises
        self.num_mutations = len(mutated_inputs)   # graph outputs 0..num_mutations-1: new input values
        self.mutated_inputs = mutated_inputs        # their input indices
        # per mutation: copied back with grad (a non-leaf input that requires grad, so the copy_
        # joins its history as eager's in-place op does) or under no_grad
        self.mutation_differentiable = list(mutation_differentiable or [False] * len(mutated_inputs))
        self.num_outputs = num_outputs              # the user's outputs, after the mutations
        self.output_aliases = output_aliases        # per output: an _Alias or None
        self.out_requires_grad = out_requires_grad
        self.constants = list(constants)            # tensors the program made: trailing graph inputs
        # (primal position, tangent bitmask): inputs eager's backward formulas unpack, and the
        # tangents whose presence runs them (Note [Inputs eager would have saved])
        self.saved_reads = []
        # per input gradient: the tangents whose formulas made part of it from no gradient
        # (Note [Gradients made from no gradient] in backward_reads.py)
        self.formula_masks = []
        self.hidden_outputs = 0  # trailing outputs the caller does not see (Note [Pieces of intermediates])


class _Alias:
    """An output that views an input or another output: rebuilt at run time as that view, with
    the sizes, strides and offset the traced (fake) output had, so a compiled function returns
    views exactly where eager does (`x[0].mul_(2)`, `(y, y.t())`)."""

    __slots__ = ("index", "size", "stride", "offset", "base_layout", "chain", "origin")

    def __init__(self, index, view, base_layout=None):
        self.index = index  # the input's index, or the output's it views
        self.size, self.stride, self.offset = tuple(view.shape), tuple(view.stride()), view.storage_offset()
        self.base_layout = base_layout  # an output's: its traced (sizes, strides, offset)
        self.chain = None  # an input's view ops, replayed so autograd sees them (_view_chains)
        # a split piece stays one (Note [Multi-output views of stand-ins]): `x.t_()` then
        # `x.split(1, -1)[-1]` returned, rebuilt by as_strided, took `v[:1] = 0` that eager refuses
        # (fuzz seed 421, program 52)
        self.origin = multi_output_origin(view) if view.requires_grad else None

    def rebuild(self, leaves, outs):
        view = self._rebuild(leaves, outs)
        if view is not None and self.origin is not None and view.requires_grad and _C.is_grad_enabled() and \
                multi_output_origin(view) is None:
            view = as_multi_output_view(view, self.origin)
        return view

    def _rebuild(self, leaves, outs):
        if self.base_layout is None:
            if self.chain is not None:
                # the traced shape too: where a dim has size 1, strides alone do not tell (6, 1) from (1, 6)
                view = _replay(leaves[self.index], self.chain)
                if tuple(view.shape) == self.size and tuple(view.stride()) == self.stride and \
                        view.storage_offset() == self.offset and _aliases(view, leaves[self.index]):
                    return view
            return leaves[self.index].as_strided(self.size, self.stride, self.offset)
        base = outs[self.index]
        size, stride, offset = self.base_layout
        # (a dim of size 1 has no stride to keep: Inductor's contiguous one is as good)
        same_layout = tuple(base.shape) == size and _same_strides(base, size, stride)
        if self.chain is not None and (same_layout or _logical(self.chain)):
            # view ops that pick elements by index (not as_strided) view the compiled output
            # whatever its layout: `v3[0]` of a scatter whose result Inductor laid out
            # contiguously, where eager's kept its input's transposed strides (fuzz seed 111,
            # program 1439: returned as a separate tensor)
            try:
                view = _replay(base, self.chain)
            except RuntimeError:  # `view` of a layout it cannot view
                view = None
            if view is not None and tuple(view.shape) == self.size and _aliases(view, base):
                return view
        if not same_layout:
            return None  # the compiled output has another layout: keep the separate result
        return base.as_strided(self.size, self.stride, base.storage_offset() + self.offset - offset)


def _replay(base, chain):
    for op, args, kwargs in chain:
        base = op(base, *args, **kwargs)
    return base


def _aliases(view, base):
    """Whether a replayed chain gave a view (a maybe-view op such as reshape may have copied)."""
    return view._storage_id() == base._storage_id()


def _same_strides(view, size, stride):
    return all(n == 1 or a == b for n, a, b in zip(size, view.stride(), stride))


def _logical(chain):
    """Every op of a view chain picks elements by index, so it means the same on any layout
    (`view` too, where the layout allows it: else it raises)."""
    return all(op is not kiln.ops.aten.as_strided.default for op, _, _ in chain)


def _views_first_argument(target):
    """An op whose result views its first argument: tagged `view`, or a schema that says so
    (`t(Tensor(a) self) -> Tensor(a)`): t, narrow, movedim and the like carry no `view` tag, and a
    chain through them was cut, so `x.chunk(2)[0].t()` came back as an as_strided view that let an
    in-place change through where eager refuses (fuzz seed 171, program 23127). A maybe-view
    (reshape, contiguous) is replayed too; _Alias.rebuild keeps its result only if it aliases."""
    if "view" in getattr(target, "tags", ()):
        return True
    schema = str(getattr(target, "_schema", ""))
    return re.fullmatch(r"\S+\(Tensor\(a\) self\b.*\) -> Tensor\(a\)", schema) is not None


def _returns_views(target):
    """An op returning a list of views of its input (split, chunk): `Tensor(a)[]`."""
    schema = getattr(target, "_schema", None)
    return schema is not None and str(schema).endswith("-> Tensor(a)[]")


class _Piece:
    """One output of a multi-output view op, as a view op of its own: _Piece(split, 2)(x, 1)."""

    def __init__(self, op, index):
        self.op, self.index = op, index

    def __call__(self, t, *args, **kwargs):
        return self.op(t, *args, **kwargs)[self.index]


def _walk_views(node, target=None):
    """From an output's node back through the view ops that made it, to `target` or as far as
    view ops go: (the node reached, the view ops from it to the output, in order)."""
    chain = []
    while node is not target and getattr(node, "op", None) == "call_function":
        if node.target is operator.getitem and _returns_views(getattr(node.args[0], "target", None)):
            # a piece of split/chunk: replayed as that op and the item, so the output is one of
            # its multi-output views as in eager (which refuse in-place changes under autograd)
            piece = node.args[0]
            if any(isinstance(a, kiln.fx.Node) for a in (*piece.args[1:], *piece.kwargs.values())):
                break
            chain.append((_Piece(piece.target, node.args[1]), piece.args[1:], dict(piece.kwargs)))
            node = piece.args[0]
            continue
        if not _views_first_argument(node.target) or \
                any(isinstance(a, kiln.fx.Node) for a in (*node.args[1:], *node.kwargs.values())):
            break
        chain.append((node.target, node.args[1:], dict(node.kwargs)))
        node = node.args[0]
    return node, chain[::-1]


def _view_chains(traced):
    """Note [Replaying output views]: an output that views an unmutated input is rebuilt by the
    graph's own view ops (select, slice, permute, ...) applied to the real input, found by
    walking from the graph output back to the input's placeholder through view-tagged ops. An
    as_strided view says the same thing about memory but not to autograd: its backward scatters
    into the input's storage, which double-counts an expanded input (three rows of one row got
    three times the gradient). Without such a chain (the input was re-laid by `t_()`, or the
    output came from a scatter) the as_strided view stays. An output that views another output,
    or a mutated input, is replayed from that output's result or that input's new value."""
    graph = traced.graph.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    results = graph.output_node().args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    for k, alias in enumerate(traced.output_aliases):
        if alias is None or alias.base_layout is None and alias.index in traced.new_layouts:
            continue
        # an output that views another output is replayed from it the same way (`v0.chunk(2)[0]`
        # returned with v0 is a split piece of it, which eager refuses to change in place); one
        # that views a mutated input, from the input's new value (the graph's leading output for
        # it), which the runtime copies back before rebuilding the views
        if alias.base_layout is not None:
            target = results[traced.num_mutations + alias.index]
        elif alias.index in traced.mutated_inputs:
            target = results[traced.mutated_inputs.index(alias.index)]
        else:
            target = placeholders[alias.index]
        node, chain = _walk_views(results[traced.num_mutations + k], target)
        if node is target:
            alias.chain = chain


def _extent(t):
    """The storage elements a tensor's view can touch: [first, last]."""
    if t.numel() == 0:
        return None
    last = t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if n > 0)
    return t.storage_offset(), last


def _dense(t):
    """Every storage element in the tensor's extent is one of its elements, once."""
    dims = [(st, n) for n, st in zip(t.shape, t.stride()) if n != 1]
    if not all(isinstance(v, int) for d in dims for v in d):
        return False
    expected = 1
    for st, n in sorted(dims):
        if st != expected:
            return False
        expected *= n
    return True


def _alias_root(outs, members):
    """The output (position) that the others sharing its storage are rebuilt as views of: a dense
    one with the largest extent, or None. Of equal extents, one that is no view: a split piece as
    large as its base (`v.split(1)[0]` of a one-element v, with v a hidden output, Note [Pieces of
    intermediates]) is then rebuilt from v as the multi-output view it is, not v from it (fuzz
    seed 211, program 5597)."""
    best, best_key = None, None
    for k in members:
        extent = _extent(outs[k])
        if extent is not None and _dense(outs[k]):
            key = (extent[1] - extent[0], outs[k]._base is None)
            if best_key is None or key > best_key:
                best, best_key = k, key
    if best is None:  # all empty: the one that is no view (a hidden base), so its pieces stay pieces
        best = next((k for k in members if outs[k]._base is None), None)
    return best


def _fakes(leaves):
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    fakes = [mode.from_tensor(x, static_shapes=True) if isinstance(x, kiln.Tensor) else x for x in leaves]
    return mode, fakes


def _layout(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def _restore_layouts(mode, fakes, layouts):
    """Gives fakes a traced program re-laid (`x.t_()`) their `layouts` back; returns the layouts
    it had left them with, by input index."""
    changed = {}
    for i, (f, before) in enumerate(zip(fakes, layouts)):
        if before is not None and _layout(f) != before:
            changed[i] = _layout(f)
            with mode, kiln.no_grad():
                f.as_strided_(*before)
    return changed


def _analyze_outputs(flat_fn, mode, fakes):
    """Output metadata from one fake run: which outputs require grad, which view an input or
    another output (an _Alias each), which inputs the program mutated (version counters), and
    the new layout of each input whose metadata it changed (Note [Input metadata mutations]); the
    fakes get their layouts back for the traces that follow."""
    versions = [f._version if isinstance(f, kiln.Tensor) else None for f in fakes]
    layouts = [_layout(f) if isinstance(f, kiln.Tensor) else None for f in fakes]
    with mode:
        outs = flat_fn(*fakes)
    mutated = [i for i, (f, v) in enumerate(zip(fakes, versions)) if v is not None and f._version != v]
    # an input that did not require grad does after a write from one that does (x0.copy_(x2))
    differentiable_after = {i for i in mutated if fakes[i].requires_grad}
    input_storages, output_storages = {}, {}
    for i, f in enumerate(fakes):
        if isinstance(f, kiln.Tensor):
            input_storages.setdefault(f._storage_id(), i)
    aliases = [None] * len(outs)
    for k, o in enumerate(outs):
        if isinstance(o, kiln.Tensor):
            sid = o._storage_id()
            if sid in input_storages:
                aliases[k] = _Alias(input_storages[sid], o)
            else:
                output_storages.setdefault(sid, []).append(k)
    # Outputs sharing a storage of their own are rebuilt as views of one of them, whose gradient
    # then takes theirs through as_strided: it must hold every element they hold. `v[::2]`
    # returned before `v` was its base once, and v's rows between lost their gradient (silently).
    for members in output_storages.values():
        root = _alias_root(outs, members)
        if root is None:
            continue
        base, outer = outs[root], _extent(outs[root])
        for k in members:
            inner = _extent(outs[k])
            # an empty output holds no element to lose: `v.split(1)[-1]` of an empty v is rebuilt
            # from v as the split piece it is (fuzz seed 291, program 3209)
            if k != root and (inner is None or outer is not None and outer[0] <= inner[0] and inner[1] <= outer[1]):
                aliases[k] = _Alias(root, outs[k], _layout(base))
    requires = [isinstance(o, kiln.Tensor) and o.requires_grad for o in outs]
    # only now: an output may be a relaid input itself (`x1.t_(); return x1.contiguous()`), whose
    # alias must keep the program's layout, not the restored one (fuzz seed 331, program 5452)
    new_layouts = _restore_layouts(mode, fakes, layouts)
    return outs, aliases, requires, mutated, new_layouts, differentiable_after


def _mutations_to_outputs(gm, num_inputs):
    """Turns make_fx(functionalize(f))'s copy_ epilogue (an input mutated) into leading outputs.
    The epilogue's in-place view ops on inputs (`x.t_()` replayed) are dropped: the runtime
    replays an input's new layout itself (Note [Input metadata mutations])."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    relaid = set()
    for node in list(graph.nodes):
        if node.op == "call_function" and "inplace_view" in getattr(node.target, "tags", ()) and \
                (node.args[0] in placeholders or node.args[0] in relaid):
            relaid.add(node.args[0])
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    mutated, values = [], []
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is kiln.ops.aten.copy_.default and \
                node.args[0] in placeholders and not node.users:
            mutated.append(placeholders.index(node.args[0]))
            values.append(node.args[1])
            graph.erase_node(node)
    out = graph.output_node()
    results = out.args[0]
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    out.args = (tuple(values + results),)
    graph.eliminate_dead_code()
    gm.recompile()
    return mutated


def _lift_constants(gm, mode, before=None):
    """The tensors a traced program made itself (`x + kiln.tensor([1., 2.])`, recorded by make_fx
    as get_attr constants) become placeholders, inserted before `before` (the first tangent) or
    after the last input. The retrace then sees fake tensors only, and the compiled graphs take
    the real constants as trailing inputs. Returns (their fakes, the real tensors)."""
    graph = gm.graph
    attrs = [n for n in graph.nodes if n.op == "get_attr" and isinstance(getattr(gm, n.target, None), kiln.Tensor)]
    if not attrs:
        return [], []
    anchor = before or next(n for n in graph.nodes if n.op != "placeholder")
    reals, fakes = [], []
    with graph.inserting_before(anchor):
        for node in attrs:
            real = getattr(gm, node.target)
            placeholder = graph.placeholder(f"_lifted{node.target}")
            fake = mode.from_tensor(real, static_shapes=True)
            placeholder.meta.update(node.meta)
            placeholder.meta["val"] = fake
            node.replace_all_uses_with(placeholder)
            graph.erase_node(node)
            reals.append(real)
            fakes.append(fake)
    gm.recompile()
    return fakes, reals


def _drop_constant_mutations(gm, slots):
    """A program that mutates a tensor it made (`t = kiln.tensor(...); t.add_(1)`) makes it anew on
    every call: its copy_ epilogue must not write the lifted constant back."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    constants = {placeholders[i] for i in slots}
    dropped = False
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is kiln.ops.aten.copy_.default and \
                node.args[0] in constants and not node.users:
            graph.erase_node(node)
            dropped = True
    if dropped:
        graph.eliminate_dead_code()
        gm.recompile()


def _functional_graph(fn, example_inputs, decompositions, mode, names=None, keep_raw=None):
    """make_fx of fn (fake tensors as inputs), then again through functionalize with the
    decompositions: an aten graph without in-place ops. Tensor constants the program made are
    lifted to inputs after the program's own (primal) inputs; returns (graph, the constants).
    `keep_raw`, a list, gets the first trace's module, which the caller's records of its nodes
    need alive."""
    layouts = [_layout(t) if isinstance(t, kiln.Tensor) else None for t in _flat(example_inputs)]
    # `x.t_()` re-laid the example inputs; given back even when the trace raised, since the joint
    # is traced again after a backward-only error (Note [Backward errors of mutated inputs]): a
    # retrace that saw x transposed made x.flatten() a copy, and the index_select that saved it
    # lost eager's version error (fuzz seed 181, program 12912)
    try:
        raw = make_fx(fn, tracing_mode="real")(*example_inputs)
    finally:
        _restore_layouts(mode, _flat(example_inputs), layouts)
    if keep_raw is not None:
        keep_raw.append(raw)
    if names is None:
        fakes, constants = _lift_constants(raw, mode)
        first = len(example_inputs)
        example_inputs = [*example_inputs, *fakes]
    else:
        tangent = next((n for n in raw.graph.nodes if n.op == "placeholder" and n.name.startswith("tangents")), None)
        fakes, constants = _lift_constants(raw, mode, before=tangent)
        primals, tangents = example_inputs
        first = len(primals)
        example_inputs = ([*primals, *fakes], tangents)
    detached = _detached(example_inputs)
    layouts = [_layout(t) if isinstance(t, kiln.Tensor) else None for t in _flat(detached)]
    try:
        gm = make_fx(functionalize(_named(raw, names)), decomposition_table=decompositions,
                     tracing_mode="real")(*detached)
    finally:
        _restore_layouts(mode, _flat(detached), layouts)  # the placeholders' fakes: the epilogue re-laid them
    _drop_constant_mutations(gm, range(first, first + len(constants)))
    return gm, constants


def _flat(values):
    """The example inputs, with the joint's (primals, tangents) lists opened."""
    return [t for v in values for t in (v if isinstance(v, (list, tuple)) else [v])]


def _detached(values):
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.append(type(v)(_detached(v)))
        elif isinstance(v, kiln.Tensor):
            out.append(v.detach())
        else:
            out.append(v)
    return out


def _named(gm, names):
    """gm as a function of (primals, tangents) lists, so make_fx names its inputs primals_1...,
    tangents_1... as PyTorch's joint graphs are named (arg0_1... for inference graphs)."""
    run = replay(gm)
    if names is None:
        return lambda *args: run(*args)

    def joint(primals, tangents):
        return run(*primals, *tangents)

    return joint


class _AnnotatingInterpreter(kiln.fx.Interpreter):
    """Runs a graph node by node under an active make_fx; the nodes recorded while running an
    annotated node inherit its activation-checkpointing annotation: meta["recompute"] as is, or
    meta["ac_policy"] (a selective policy) applied to each recorded op."""

    def run_node(self, n):
        from kiln.fx.experimental.proxy_tensor import current_trace_graph

        graph = current_trace_graph()
        recompute, policy = n.meta.get("recompute"), n.meta.get("ac_policy")
        if graph is None or (recompute is None and policy is None):
            return super().run_node(n)
        before = set(graph.nodes)
        result = super().run_node(n)
        if policy is None:
            def policy(ctx, op, *args, **kwargs):
                return recompute
        annotate_region(graph, before, policy)
        return result


def replay(gm):
    """A callable running gm: its generated code, or the annotating interpreter when some node
    carries an activation-checkpointing annotation (so a retrace keeps them)."""
    if any("recompute" in n.meta or "ac_policy" in n.meta for n in gm.graph.nodes):
        return _AnnotatingInterpreter(gm).run
    return gm.forward


def trace_inference(flat_fn, leaves, config):
    mode, fakes = _fakes(leaves)
    with kiln.no_grad():
        outs, aliases, _, _, layouts, _ = _analyze_outputs(flat_fn, mode, fakes)
        with mode:
            gm, constants = _functional_graph(lambda *a: tuple(flat_fn(*a)), fakes, config.decompositions, mode)
    no_grad = [False] * len(outs)
    if config.keep_inference_input_mutations:  # the copy_ epilogue stays in the graph
        return _Traced(gm, [], len(outs), aliases, no_grad, constants=constants)
    mutated = _mutations_to_outputs(gm, len(leaves))
    traced = _Traced(gm, mutated, len(outs), aliases, no_grad, constants=constants, new_layouts=layouts)
    _view_chains(traced)
    return traced


def _clone_keeping_layout(t):
    """A copy of t with t's strides, so the program sees the layout it was given: a contiguous
    clone of a strided input made `x.contiguous()` return the input itself, and the program's
    later `x.relu_()` then changed that result too (fuzz seed 71, program 2602). An input that
    repeats elements (expanded) cannot be copied into its own layout and is cloned contiguous."""
    if _overlaps_itself(t):
        return t.clone()
    out = kiln.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(t)


def trace_joint(flat_fn, leaves, config):
    """The joint graph, with the bases of split pieces among the outputs as hidden outputs
    (Note [Pieces of intermediates])."""
    traced = _trace_joint(flat_fn, leaves, config)
    pieces = _pieces_of_intermediates(traced)
    if not pieces:
        return traced
    hidden = []

    def with_bases(*args):
        outs = list(flat_fn(*args))
        bases = []
        for k in pieces:
            base = outs[k]._base
            if base is not None and all(base is not b for b in bases):
                bases.append(base)
        hidden[:] = [len(bases)]
        return (*outs, *bases)

    traced = _trace_joint(with_bases, leaves, config)
    traced.hidden_outputs = hidden[0]
    return traced


# Note [Pieces of intermediates]
# `p = x.log().chunk(2)[0]; p.sub_(1)` raises in eager: p is one of several views split returned,
# which autograd refuses to change in place. Returned by a compiled graph (a graph break before
# the sub_), p was a tensor of its own and the sub_ went through. Such an output, a piece (or a
# view of one) of a value the graph computed without returning it, makes the graph return that
# value too, as a hidden last output; the piece is then rebuilt from it by replaying the split
# (_Alias, Note [Replaying output views]), a multi-output view as in eager. PyTorch's AOT hides
# the aliasing instead (its Dynamo raises while tracing, before any graph break). Only
# differentiable pieces: without autograd an in-place change of a piece is allowed.


def _pieces_of_intermediates(traced):
    """The outputs (positions) that are differentiable split/chunk pieces, or views of one, of a
    value the graph computed but does not return."""
    results = _outputs(traced.graph)
    found = []
    for k, alias in enumerate(traced.output_aliases):
        # an output whose backward raises (deferred: an input it needs changed later) is still
        # differentiable to eager: its piece-ness refuses an in-place change before any backward
        # (fuzz seed 241, program 5573)
        if alias is not None or not (traced.out_requires_grad[k] or k in traced.deferred_outputs):
            continue
        node, chain = _walk_views(results[traced.num_mutations + k])
        if node.op == "call_function" and any(isinstance(op, _Piece) for op, _, _ in chain):
            found.append(k)
    return found


def _trace_joint(flat_fn, leaves, config):
    """The joint graph. An input that requires grad and is mutated (Note [Mutated inputs that
    require grad]) is traced through a clone, whose final value becomes an extra output."""
    # the analysis runs on fakes of its own: its in-place ops leave autograd history on the fakes
    # it mutates (a CopySlices on a non-leaf input's base), which the joint's gradients then went
    # through a second time (`x1.add_(x0)` gave x0 twice its gradient)
    outs, aliases, requires, mutated, layouts, differentiable_after = _analyze_outputs(flat_fn, *_fakes(leaves))
    mode, fakes = _fakes(leaves)
    diff_inputs = [i for i, f in enumerate(fakes) if isinstance(f, kiln.Tensor) and f.requires_grad]
    # inputs that require grad, and those that do once the program wrote a value that does into
    # them (x0.copy_(x2)): their new value is differentiable, its copy-back joins their history
    mutated_diff = [i for i in mutated if i in diff_inputs or i in differentiable_after]
    # a leaf that requires grad can only have been mutated under no_grad (else the fake run
    # raised, as eager does)
    copies_with_grad = [not (leaves[i].is_leaf and leaves[i].requires_grad) and i in differentiable_after
                        for i in mutated_diff]

    unpacked = []  # (primal position, the raw graph's nodes of the unpacking node's gradients)
    unpacked_outputs = []  # (output number, those nodes): results a formula unpacks
    # The raw graph those nodes belong to, alive until saved_reads() has read them: a node's graph
    # is None once its graph is freed, which happened or not as the garbage collector ran, so an
    # input amax's backward unpacks counted as read (mask 0) in a backward without amax's tangent,
    # and a later change to it raised where eager trains on (fuzz seed 41, program 1029, in the
    # stored regressions' run only).
    raw_graphs = []
    made = []  # (the raw graph's node of a gradient a formula returned, those of the ones it was given)

    def record_formula(grad_inputs, grad_outputs):
        sources = [n for n in (current_trace_node(g) for g in grad_outputs if g is not None) if n is not None]
        for g in grad_inputs:
            n = current_trace_node(g) if isinstance(g, kiln.Tensor) else None
            if n is not None:
                made.append((n, sources))

    def joint(primals, tangents):
        args = list(primals)
        for i in mutated_diff:  # primals[i] stays the value autograd differentiates against
            args[i] = _clone_keeping_layout(primals[i])
        outs = flat_fn(*args)
        new_values = [args[i] for i in mutated_diff]
        diff_outs = [o for o, r in zip(outs, requires) if r]
        diff_outs += [v for v, d in zip(new_values, copies_with_grad) if d]
        # an input a formula unpacks (or a view of it) counts as read even when the formula's
        # graph does not use it (div with a rounding mode): eager's check raises there too
        storages = {p._storage_id(): i for i, p in enumerate(primals)
                    if isinstance(p, kiln.Tensor) and i not in mutated_diff}
        # an output a formula unpacks (prod's result, Note [Outputs eager would have saved]) is
        # read too: `v = x.prod()` returned across a graph break, then `v.masked_fill_(...)`,
        # raised in eager's backward and not compiled, where x is 0-d and the graph reads no v
        # (fuzz seed 261, program 1499)
        out_storages = {}
        for k, o in enumerate(outs):
            if isinstance(o, kiln.Tensor) and o._storage_id() not in storages:
                out_storages.setdefault(o._storage_id(), k)

        def observe(saved, grads):
            nodes = [current_trace_node(g) for g in grads if g is not None]
            nodes = [n for n in nodes if n is not None]
            i = storages.get(saved._storage_id())
            if i is not None:
                unpacked.append((i, nodes))
            elif saved._storage_id() in out_storages:
                unpacked_outputs.append((out_storages[saved._storage_id()], nodes))

        with _observing_saved_inputs(observe), _observing_formulas(diff_outs, record_formula):
            grads = kiln.autograd.grad(diff_outs, [primals[i] for i in diff_inputs], grad_outputs=list(tangents),
                                       allow_unused=True) if diff_outs else [None] * len(diff_inputs)
        by_input = dict(zip(diff_inputs, grads))
        return (*new_values, *outs, *[by_input.get(i) for i in range(len(primals))])

    def trace():
        unpacked.clear()
        unpacked_outputs.clear()
        made.clear()
        raw_graphs.clear()
        with mode:
            tangents = [kiln.empty(tuple(o.shape), dtype=o.dtype, device=o.device) for o, r in zip(outs, requires) if r]
            # a mutated input's new value has the shape the program left it with (`x.t_()`)
            tangents += [kiln.empty(layouts[i][0], dtype=fakes[i].dtype, device=fakes[i].device) if i in layouts
                         else kiln.empty_like(fakes[i], memory_format=kiln.contiguous_format)
                         for i, d in zip(mutated_diff, copies_with_grad) if d]
            gm, constants = _functional_graph(joint, ([*fakes], tangents), config.decompositions, mode, names=True,
                                              keep_raw=raw_graphs)
        return gm, constants, tangents

    def saved_reads():
        masks = {}
        # an output's position among the graph's: after its primals (constants included) and the
        # new values of mutated inputs (inputs_read_by_backward)
        first_output = sum(n.op == "placeholder" and not n.name.startswith("tangents") for n in gm.graph.nodes) + \
            len(mutated) + len(mutated_diff)
        # a node dead code elimination erased after the trace (its graph is None) says nothing
        # about the tangents: it is left out, as a gradient the tracer had no node for
        unpacked_live = [(i, [n for n in nodes if n.graph is not None])
                         for i, nodes in unpacked + [(first_output + k, ns) for k, ns in unpacked_outputs]]
        for _, nodes in unpacked_live:
            for n in nodes:
                if n not in masks:
                    masks.update(tangent_masks(n.graph))
        return sorted({(i, _or(masks.get(n, 0) for n in nodes)) for i, nodes in unpacked_live})

    deferred, deferred_outputs = {}, {}  # Note [Backward errors of mutated inputs]
    try:
        gm, constants, tangents = trace()
    except (RuntimeError, NotImplementedError) as e:
        if not _backward_only_error(e):
            raise
        # which differentiated values raise on their own: each is traced alone
        candidates = [(copies_with_grad, k) for k, d in enumerate(copies_with_grad) if d] + \
                     [(requires, k) for k, r in enumerate(requires) if r]
        kept = [list(copies_with_grad), list(requires)]
        failing = {}
        for flags, k in candidates:
            copies_with_grad[:] = [False] * len(copies_with_grad)
            requires[:] = [False] * len(requires)
            flags[k] = True
            try:
                trace()
            except (RuntimeError, NotImplementedError) as alone:
                if not _backward_only_error(alone):
                    raise
                failing[(flags is requires, k)] = str(alone)
        copies_with_grad[:], requires[:] = kept
        for (is_output, k), message in failing.items():
            if is_output:
                requires[k] = False
                deferred_outputs[k] = message
            else:
                copies_with_grad[k] = False
                deferred[mutated_diff[k]] = message
        gm, constants, tangents = trace()  # raises again if only a combination failed
    mutated = _mutations_to_outputs(gm, len(leaves) + len(constants) + len(tangents))
    traced = _Traced(gm, mutated + mutated_diff, len(outs), aliases, requires,
                     [False] * len(mutated) + copies_with_grad, constants, layouts)
    traced.deferred_errors, traced.deferred_outputs = deferred, deferred_outputs
    traced.saved_reads = saved_reads()
    traced.formula_masks = formula_masks(made, len(leaves))
    raw_graphs.clear()
    _view_chains(traced)
    return traced


@contextlib.contextmanager
def _observing_saved_inputs(observe):
    """observe(saved, grads) is called with each saved input a backward formula unpacks (and the
    gradients of its node's outputs) while the block runs, on this thread."""
    previous = _C._set_saved_input_observer(observe)
    try:
        yield
    finally:
        _C._set_saved_input_observer(previous)


@contextlib.contextmanager
def _observing_formulas(roots, observe):
    """observe(grad_inputs, grad_outputs) after each formula of the autograd graph behind
    `roots` runs while the block runs (a post hook on every node)."""
    handles, seen = [], set()
    stack = [r.grad_fn for r in roots if isinstance(r, kiln.Tensor) and r.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            handles.append(node.register_hook(observe))
            stack.extend(fn for fn, _ in node.next_functions if fn is not None)
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _or(masks):
    out = 0
    for m in masks:
        out |= m
    return out


# Note [Backward errors of mutated inputs]
# `v = x.clamp_max(1); x.copy_(v)` on an input that requires grad: clamp_max saved x, which the
# copy_ overwrote, so differentiating x's new value raises, in eager too, but only if a backward
# reaches it. The joint graph differentiates every output at once, so its trace raised for
# programs whose loss never reads x. Such a mutation is traced without its gradient, and its
# copy-back joins x's history through a node that raises eager's error if a gradient does reach
# it (_RaiseInBackward), so the program runs as it does eagerly. The same holds for an op with
# no derivative (floor_divide's backward raises in eager too). An output whose own gradient
# raises (`x1 * 1` after that copy_) is returned through such a node too. Each differentiated
# value is traced alone to find which raise.


def _backward_only_error(e):
    """An error eager raises only when a backward runs through the op: an input it saved was
    overwritten, the op has no derivative (floor_divide), or it wrote through an expanded view
    (its gradient would be written into memory that repeats elements)."""
    text = str(e)
    return isinstance(e, (RuntimeError, NotImplementedError)) and (
        "modified by an inplace operation" in text or ("derivative for" in text and "not implemented" in text)
        or "more than one element of the written-to tensor refers to a single memory location" in text)


class _RaiseInBackward(kiln.autograd.Function):
    """value, as an output of a node that raises `message` in backward; `anchors`, the inputs
    whose history the gradient would have reached, make it require grad."""

    @staticmethod
    def forward(ctx, value, message, *anchors):
        ctx.message = message
        # a view made below autograd, as the compiled op's own output: not one made under the
        # Function's no_grad, which an in-place op of the program may not change (Note [View
        # creation] in tensor/empty.cc; fuzz seed 341, program 5292: `v1.masked_fill_` refused)
        return _C._inductor.reinterpret_tensor(value, tuple(value.shape), value.stride(), value.storage_offset())

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(ctx.message)


# Note [Input metadata mutations]
# `x.t_()` (transpose_, as_strided_) on an input changes its sizes and strides, not its data.
# Functionalization turns it into the view `t(x)` of the same storage (FunctionalizeInplaceView in
# aot/functionalize.cc), so the graph computes with the new layout; the layout the input must be
# left with is read off the analysis run on fakes, whose inputs then get their old layouts back,
# and the runtime gives it to the real input with as_strided_ before any copy-back of values (a
# mutated value has the new shape), as PyTorch's AOT does. An output that is the re-laid input
# is returned as that input. Committed as a value instead, `x.t_()` raised "output with shape
# [4, 1] doesn't match the broadcast shape [1, 4]", or silently returned transposed values.


# --- run time ------------------------------------------------------------------------------------
def _distinct_elements(dst, value):
    """dst and value narrowed to one element along each dim where dst repeats its memory (an
    expanded input): copy_ refuses to write a repeated element (Note [Overlapping writes]), and a
    copy-back writes each memory location once, from the first element that reaches it. An empty
    dst is written whole: narrowed, the copy went into a view kiln's autograd does not track (a
    view of a tensor that does not require grad), so dst never joined the value's history and an
    empty expanded input came back requires_grad=False (fuzz seed 171, program 4054)."""
    if not _overlaps_itself(dst):
        return dst, value
    for d, (n, st) in enumerate(zip(dst.shape, dst.stride())):
        if st == 0 and n > 1:
            dst, value = dst.narrow(d, 0, 1), value.narrow(d, 0, 1)
    return dst, value


def _restore_outputs(traced, leaves, results):
    """Copies mutated inputs back and rebuilds outputs that view an input or another output as
    those views."""
    new_values, outs = results[:traced.num_mutations], list(results[traced.num_mutations:])
    for i, layout in traced.new_layouts.items():  # before the values: they have the new shape
        leaves[i].as_strided_(*layout)
    if new_values:
        grad_enabled = _C.is_grad_enabled()
        deferred = traced.deferred_errors
        for i, value, with_grad in zip(traced.mutated_inputs, new_values, traced.mutation_differentiable):
            if i in deferred and grad_enabled:
                value = _RaiseInBackward.apply(value, deferred[i], leaves[i])
            dst, value = _distinct_elements(leaves[i], value)
            if (with_grad or i in deferred) and grad_enabled:
                dst.copy_(value)
            else:
                with kiln.no_grad():
                    dst.copy_(value)
    if traced.deferred_outputs and _C.is_grad_enabled():
        anchors = [x for x in leaves if isinstance(x, kiln.Tensor) and x.requires_grad]
        for k, message in traced.deferred_outputs.items():
            outs[k] = _RaiseInBackward.apply(outs[k], message, *anchors)
    for k, alias in enumerate(traced.output_aliases):
        if alias is not None and isinstance(outs[k], kiln.Tensor):
            if alias.index in traced.new_layouts and alias.base_layout is None and \
                    (alias.size, alias.stride, alias.offset) == traced.new_layouts[alias.index]:
                outs[k] = leaves[alias.index]  # `x.t_(); return x`: the input itself, as in eager
                continue
            view = alias.rebuild(leaves, outs)
            if view is not None:
                outs[k] = view
    return outs


def _needs_restore(traced):
    return traced.num_mutations > 0 or bool(traced.new_layouts) or bool(traced.deferred_outputs) or \
        any(a is not None for a in traced.output_aliases)


def _with_constants(compiled, constants):
    """compiled, called with the lifted constants (_lift_constants) after the caller's inputs."""
    if not constants:
        return compiled
    if getattr(compiled, "_boxed_call", False):
        def run_boxed(args):
            return compiled(list(args) + constants)

        run_boxed._boxed_call = True
        return run_boxed
    return lambda *args: compiled(*args, *constants)


class _InferenceRuntime:
    def __init__(self, traced, compiled):
        self.traced, self.compiled = traced, compiled
        self.boxed = getattr(compiled, "_boxed_call", False)
        self.restore = _needs_restore(traced)

    def __call__(self, leaves, epilogue=None):
        results = self.compiled(list(leaves)) if self.boxed else self.compiled(*leaves)
        outs = _restore_outputs(self.traced, leaves, list(results)) if self.restore else list(results)
        if epilogue is not None:
            epilogue()
        return outs


def _modified_since_forward(t, version):
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{t.dtype} {list(t.shape)}] is at version {t._version}; expected version {version} instead. (It was "
        "saved by a compiled function's forward for its backward.)")


class _SavedContext:
    """The backward node's context (what kiln.autograd.Function's ctx is to its node): the
    forward's saved values, with the versions their tensors had, and the compiled backward."""

    __slots__ = ("saved", "versions", "backward", "inputs", "_node", "saved_unread", "watched", "inputs_read")
    # Outputs that got no gradient arrive as None: an input's gradient that depends only on
    # those is None, as in eager, not zeros (Note [Gradients of absent tangents]).
    _materialize_grads = False

    def _do_backward(self, *grads):
        if self.saved is None:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.")
        missing = [i for i, g in enumerate(grads) if g is None]
        unread = self.saved_unread(missing) if missing else ()
        for i, (t, v) in enumerate(zip(self.saved, self.versions)):
            if v is not None and t._version != v and i not in unread:
                raise _modified_since_forward(t, v)
        # inputs eager would have saved, whichever values the partitioner saved instead
        read = self.inputs_read(missing)
        for i, t, v in self.watched:
            if t._version != v and i in read:
                raise _modified_since_forward(t, v)
        if missing:
            grads = [self._node._zeros_for_output(i) if g is None else g for i, g in enumerate(grads)]
        if not _C.is_grad_enabled():
            return self.backward(self.saved, grads, missing)
        # create_graph: the compiled backward records nothing, so its gradients get a node whose
        # own backward refuses (as PyTorch's compiled functions do), not a silently missing history
        with kiln.no_grad():
            result = self.backward(self.saved, grads, missing)
        tensors = [r for r in result if isinstance(r, kiln.Tensor)]
        marked = iter(_NoDoubleBackward.apply(len(tensors), *tensors, *self.inputs, *grads)) if tensors else iter(())
        return tuple(next(marked) if isinstance(r, kiln.Tensor) else r for r in result)

    def _free_saved(self):
        self.saved = self.inputs = None


class _NoDoubleBackward(kiln.autograd.Function):
    """Gradients of a compiled backward under create_graph: they pass through; differentiating
    them again raises."""

    @staticmethod
    def forward(ctx, count, *args):  # args: the gradients, then what they depend on (for the edges)
        return tuple(t.clone() for t in args[:count])

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("kiln.compile with aot_autograd does not currently support double backward")


# Note [Gradients of absent tangents]
# One node stands for the whole compiled function, so every input that requires grad is an edge
# of it, and the backward returns a gradient for each. In eager, an input reached only through
# outputs the loss never used gets no gradient at all: `x.mul_(2)` on a non-leaf input whose new
# value nothing reads leaves its leaf's .grad None, and a zero there would differ (and make an
# optimizer with weight decay move the weight). So the node asks for None in place of absent
# output gradients, and an input gradient whose every dependency among the tangents is absent
# (`tangent_dependencies`, read off the backward graph) is returned as None. The rest of the
# backward runs specialised to the absent tangents (backward_reads.py): zeros fed through the
# full graph gave NaN gradients (0 / 0 in log's backward) and read saved tensors eager never reads.


# Note [Versions after the epilogue]
# The epilogue (_restore_outputs) replays on the real inputs what the program did to them inside:
# `x.t_()` becomes x.as_strided_(...), which bumps x's version, and the forward's saved values
# that view x (`x0 / x` saved x.t()) share that counter. Eager bumped it at the t_(), before the
# op saved x, so its backward runs; versions taken before the epilogue made the compiled backward
# raise (fuzz seed 171, programs 17248 and 29538). The joint trace already ran eager's checks
# against the program's own in-place ops (a value saved before the t_() fails there: Note
# [Backward errors of mutated inputs]), so only changes after the call may count: versions are
# read once the epilogue is done. (Copied-back values never touch saved tensors: those sharing a
# mutated input's storage are saved as clones.) That includes the synthetic-base wrapper's epilogue
# (Note [Synthetic bases]): `x1.t_()` on an input that aliases x2 re-lays x1 there, which bumps the
# counter of the base both share, so it runs inside the runtime's (`epilogue=`); relaid after the
# versions were read, `x1.t_(); return x2 * x2` raised (fuzz seed 181, programs 2555, 5645, 17136).


def _training_runtime(traced, compiled_fw, compiled_bw, saved_order, num_inputs, grad_dependencies, specialise,
                      inputs_read, input_aliases=frozenset(), recomputed_from=frozenset()):
    """run(leaves): the compiled forward without grad, then one backward node (the C++ node a
    kiln.autograd.Function records) whose backward runs the compiled backward. This is
    Function.apply specialised to what AOT knows ahead of time, for a lean per-call path."""
    n_mut, n_out = traced.num_mutations, traced.num_outputs
    n_fw = n_mut + n_out
    requires = traced.out_requires_grad
    mutation_grads = traced.mutation_differentiable
    mutated_inputs = traced.mutated_inputs
    fw_boxed = getattr(compiled_fw, "_boxed_call", False)
    bw_boxed = getattr(compiled_bw, "_boxed_call", False)
    restore = _needs_restore(traced)
    hidden = traced.hidden_outputs
    # outputs that need no grad, and new values of inputs copied back under no_grad, are not
    # differentiable; the joint's tangents are the user's outputs', then the mutations'
    differentiable_out = list(mutation_grads) + list(requires)
    # outputs that view an input are rebuilt from it (_restore_outputs) and get their gradient
    # through that view; the node records a detached stand-in, never a view of an input (whose
    # autograd history the node must not take over)
    views_input = [False] * n_mut + [a is not None and a.base_layout is None for a in traced.output_aliases]

    # the position in the node's gradients of each tangent of the backward graph
    tangent_of_grad = ([n_mut + k for k, r in enumerate(requires) if r] +
                       [k for k, d in enumerate(mutation_grads) if d])

    # Note [Inputs eager would have saved] in backward_reads.py; inputs the function mutates are
    # saved as clones of their old value, and their overwriting is Note [Backward errors of mutated inputs]
    # (primals past the inputs are the function's tensor constants)
    # (position among inputs_read's, leaf index): a mutated input counts through its new value
    num_primals = num_inputs + len(traced.constants)
    read_by_full_backward = inputs_read(0)
    watched = [(p, p) if p < num_inputs else (p, mutated_inputs[p - num_primals]) for p in read_by_full_backward
               if p < num_inputs and p not in set(mutated_inputs) or num_primals <= p < num_primals + n_mut]
    # (position among inputs_read's, output index): Note [Outputs eager would have saved]
    watched_outputs = [(p, p - num_primals - n_mut) for p in read_by_full_backward if p >= num_primals + n_mut]

    def inputs_read_when(missing):
        return set(inputs_read(absent_tangents(missing) if missing else 0))

    def absent_tangents(missing):
        return sum(1 << t for t, i in enumerate(tangent_of_grad) if i in missing)

    # the backward specialised to each set of absent tangents (backward_reads.py), made on first
    # use: (compiled, boxed, the forward's saved values it does not read), or None
    variants = {}

    def variant(missing):
        absent = absent_tangents(missing)
        if absent not in variants:
            variants[absent] = specialise(absent)
        return variants[absent]

    def saved_unread(missing):
        v = variant(missing)
        return v[2] if v else ()

    def backward(saved, grads, missing):
        saved = [saved[i] for i in saved_order]
        tangents = [grads[i] for i in tangent_of_grad]
        tangents = [g.contiguous() if isinstance(g, kiln.Tensor) else g for g in tangents]
        bw, boxed = compiled_bw, bw_boxed
        if missing and (v := variant(missing)) is not None:
            bw, boxed = v[0], v[1]
        result = bw(saved + tangents) if boxed else bw(*saved, *tangents)
        result = tuple(result)[:num_inputs]
        if not missing:
            return result
        absent = absent_tangents(missing)
        return tuple(None if deps and not deps & ~absent else r for r, deps in zip(result, grad_dependencies))

    def run(leaves, epilogue=None):  # epilogue(): the caller's own (a synthetic base's members re-laid)
        grad_enabled = _C.is_grad_enabled()
        _C._set_grad_enabled(False)
        # under grad mode the graph's views are the compiled op's own outputs, which the program
        # may change in place, not views made under no_grad (Note [View creation] in
        # tensor/empty.cc; fuzz seed 341, program 9880); under the caller's no_grad they are
        below = _C._set_below_autograd(grad_enabled)
        try:
            results = compiled_fw(list(leaves)) if fw_boxed else compiled_fw(*leaves)
        finally:
            _C._set_below_autograd(below)
            _C._set_grad_enabled(grad_enabled)
        outs = list(results[:n_fw])
        saved = list(results[n_fw:])
        if grad_enabled:
            tensor_outs, differentiable = [], []
            for k, o in enumerate(outs):
                if isinstance(o, kiln.Tensor):
                    if views_input[k]:  # an input itself or a view of one: rebuilt from it below
                        o = outs[k] = o.detach()
                    tensor_outs.append(o)
                    differentiable.append(differentiable_out[k])
            ctx = _SavedContext()
            ctx.backward = backward
            ctx.saved_unread = saved_unread
            ctx.inputs_read = inputs_read_when
            ctx.inputs = [x for x in leaves if x.requires_grad]  # a create_graph backward's dependencies
            _C._record_function(ctx, "CompiledFunctionBackward", list(leaves), tensor_outs, differentiable)
            # A saved output would hold its grad_fn, which holds ctx: a cycle through C++ that the
            # GC cannot see. Keep a detached alias (same storage and version counter) instead.
            out_ids = {id(o) for o in tensor_outs if o.requires_grad}
            if out_ids:
                saved = [s.detach() if id(s) in out_ids else s for s in saved]
            if n_mut:  # an input saved for backward keeps the value it had before the copy-back
                mutated_storages = {leaves[i]._storage_id() for i in mutated_inputs}
                saved = [s.clone() if isinstance(s, kiln.Tensor) and s._storage_id() in mutated_storages else s
                         for s in saved]
            if recomputed_from:  # Note [Inputs saved only to recompute from]
                saved = [s.clone() if k in recomputed_from and isinstance(s, kiln.Tensor) else s
                         for k, s in enumerate(saved)]
            ctx.saved = saved
        if restore:
            outs = _restore_outputs(traced, leaves, outs)
        if epilogue is not None:
            epilogue()
        if grad_enabled:
            # after the epilogue (Note [Versions after the epilogue]): the versions eager left
            # (saved values sharing an input's memory: checked as inputs eager would have saved)
            ctx.versions = [s._version if isinstance(s, kiln.Tensor) and k not in input_aliases else None
                            for k, s in enumerate(ctx.saved)]
            ctx.watched = [(p, leaves[i], leaves[i]._version) for p, i in watched]
            # a detached alias shares the output's version counter without holding ctx in a cycle
            ctx.watched += [(p, o, o._version) for p, o in
                            ((p, outs[k].detach()) for p, k in watched_outputs if isinstance(outs[k], kiln.Tensor))]
        return outs[:len(outs) - hidden] if hidden else outs

    return run


def _log_graph(title, gm):
    if logs.enabled("aot_graphs"):
        logs.log("aot_graphs", f"{title}:\n" + gm.print_readable(print_output=False))


def create_runtime(flat_fn, leaves, config):
    """Traces, partitions and compiles flat_fn for inputs like `leaves`; returns run(leaves)."""
    needs_grad = _C.is_grad_enabled() and any(isinstance(x, kiln.Tensor) and x.requires_grad for x in leaves)
    start = time.perf_counter()
    if not needs_grad:
        traced = trace_inference(flat_fn, leaves, config)
        _log_graph("Inference graph", traced.graph)
        compiled = _with_constants(config.inference_compiler(traced.graph, _fake_examples(traced.graph)),
                                   traced.constants)
        logs.log("aot_graphs", f"traced in {(time.perf_counter() - start) * 1e3:.1f} ms")
        return _InferenceRuntime(traced, compiled)
    traced = trace_joint(flat_fn, leaves, config)
    _log_graph("Joint graph", traced.graph)
    num_fwd_outputs = traced.num_mutations + traced.num_outputs
    fw_module, bw_module = config.partition_fn(traced.graph, None, num_fwd_outputs=num_fwd_outputs)
    _log_graph("Forward graph", fw_module)
    _log_graph("Backward graph", bw_module)
    saved_order = _saved_order(fw_module, bw_module, num_fwd_outputs)
    compiled_fw = _with_constants(config.fw_compiler(fw_module, _fake_examples(fw_module)), traced.constants)
    compiled_bw = config.bw_compiler(bw_module, _fake_examples(bw_module))
    logs.log("aot_graphs", f"traced and partitioned in {(time.perf_counter() - start) * 1e3:.1f} ms")

    def specialise(absent):  # the backward for calls where the tangents in `absent` are None
        pruned = prune_absent(bw_module, absent)
        if pruned is None:
            return None
        module, unread = pruned
        _log_graph(f"Backward graph without tangents {absent:b}", module)
        compiled = config.bw_compiler(module, _fake_examples(module))
        return compiled, getattr(compiled, "_boxed_call", False), {saved_order[j] for j in unread}

    aliases = saved_input_aliases(fw_module, num_fwd_outputs)
    return _training_runtime(traced, compiled_fw, compiled_bw, saved_order, len(leaves),
                             tangent_dependencies(bw_module, traced.formula_masks), specialise,
                             inputs_read_by_backward(traced.graph, num_fwd_outputs, traced.saved_reads), aliases,
                             saved_inputs_recomputed_from(fw_module, bw_module, saved_order, aliases))


def _saved_order(fw_module, bw_module, num_fwd_outputs):
    """Positions, among the forward's saved outputs, of the backward's non-tangent inputs (the
    partitioner may order them differently, e.g. size symbols first); matched by node name."""
    saved = [getattr(v, "name", None) for v in _outputs(fw_module)[num_fwd_outputs:]]
    wanted = [n.name for n in bw_module.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    return [saved.index(name) for name in wanted]


def _outputs(gm):
    out = gm.graph.output_node().args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _fake_examples(gm):
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def _default_partition():
    from kiln._functorch.partitioners import default_partition

    return default_partition


# --- entry points ----------------------------------------------------------------------------------
def aot_function(fn, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None, num_params_buffers=0,
                 keep_inference_input_mutations=False, inference_compiler=None, *, dynamic=False):
    """fn compiled ahead of time into forward and backward aten graphs (see the module docstring).
    fn takes and returns tensors (in tuples, lists and dicts); the compilers get GraphModules.
    num_params_buffers (the leading inputs that are parameters and buffers) is kept on the
    config for compilers; keep_inference_input_mutations leaves inference graphs' copy_
    epilogue in the graph instead of returning the new values."""
    if dynamic:
        raise NotImplementedError("aot_function(dynamic=True): kiln traces static shapes and retraces per input "
                                  "layout; symbolic tracing here is not built yet")
    if not callable(fw_compiler):
        raise TypeError(f"aot_function(): fw_compiler must be callable, got {type(fw_compiler).__name__}")
    partition_fn = partition_fn or _default_partition()
    config = AOTConfig(fw_compiler, bw_compiler or fw_compiler, inference_compiler or fw_compiler, partition_fn,
                       decompositions, num_params_buffers, keep_inference_input_mutations)
    cache = {}

    @functools.wraps(fn)
    def compiled(*args, **kwargs):
        leaves = []
        builder = _flatten((args, kwargs), leaves)
        key = _layout_key(leaves)
        entry = cache.get(key)
        if entry is None:
            tensor_slots = [i for i, x in enumerate(leaves) if isinstance(x, kiln.Tensor)]
            constants = list(leaves)
            out_spec = []

            def flat_fn(*tensors):
                values = list(constants)
                for i, t in zip(tensor_slots, tensors):
                    values[i] = t
                f_args, f_kwargs = _unflatten(builder, values)
                out_leaves = []
                out_spec[:] = [_flatten(fn(*f_args, **f_kwargs), out_leaves)]
                return out_leaves

            runtime = _deduplicated(create_runtime, flat_fn, [leaves[i] for i in tensor_slots], config)
            entry = cache[key] = (runtime, tensor_slots, out_spec)
        runtime, tensor_slots, out_spec = entry
        outs = runtime([leaves[i] for i in tensor_slots])
        return _unflatten(out_spec[0], outs)

    compiled._kiln_aot_cache = cache
    return compiled


def aot_module(mod, fw_compiler, bw_compiler=None, partition_fn=None, decompositions=None, inference_compiler=None):
    """mod compiled ahead of time: its parameters and buffers are graph inputs (functional_call),
    so training updates them in place as usual and buffers mutated by forward are written back."""
    from kiln.func import functional_call

    names = [n for n, _ in mod.named_parameters()] + [n for n, _ in mod.named_buffers()]

    def functional(state, *args, **kwargs):
        return functional_call(mod, dict(zip(names, state)), args, kwargs)

    compiled = aot_function(functional, fw_compiler, bw_compiler, partition_fn, decompositions,
                            num_params_buffers=len(names), inference_compiler=inference_compiler)

    class AOTModule(kiln.nn.Module):
        def __init__(self):
            super().__init__()
            self.orig_module = mod

        def forward(self, *args, **kwargs):
            state = [t for _, t in mod.named_parameters()] + [t for _, t in mod.named_buffers()]
            return compiled(state, *args, **kwargs)

    return AOTModule()


def aot_module_simplified(gm, example_inputs, fw_compiler, bw_compiler=None, partition_fn=None,
                          decompositions=None, inference_compiler=None, keep_inference_input_mutations=False,
                          on_trace_error=None):
    """The Dynamo entry: gm's flat inputs in, its flat outputs out (a tuple). `on_trace_error(gm,
    e, run_eagerly)` (kiln's Dynamo bridge) handles an error while tracing or compiling for a new
    input layout: it raises, or returns run_eagerly()'s outputs, and the layout runs gm as
    written from then on (Note [Internal errors at the first call] in _dynamo/backends/common.py)."""
    run_graph = replay(gm)
    config = AOTConfig(fw_compiler, bw_compiler or fw_compiler, inference_compiler or fw_compiler,
                       partition_fn or _default_partition(), decompositions,
                       keep_inference_input_mutations=keep_inference_input_mutations)
    runtimes = {}

    def flat_fn(*args):
        return list(run_graph(*args))

    def _entry(args):
        slots = [i for i, a in enumerate(args) if isinstance(a, kiln.Tensor)]
        if len(slots) == len(args):
            return _deduplicated(create_runtime, flat_fn, list(args), config), None
        constants = list(args)

        def bound(*tensors):
            values = list(constants)
            for i, t in zip(slots, tensors):
                values[i] = t
            return list(run_graph(*values))

        return _deduplicated(create_runtime, bound, [args[i] for i in slots], config), slots

    def run(*args):
        # Dynamo's inputs are already flat, so the layout key picks the runtime directly, with
        # none of aot_function's pytree work. Sizes passed as ints (dynamic shapes) are part of
        # the key and baked into that runtime's trace, as aot_function does.
        key = _layout_key(args)
        entry = runtimes.get(key)
        if entry is None:
            try:
                entry = runtimes[key] = _entry(args)
            except Exception as e:  # noqa: BLE001 - the handler decides who sees it
                if on_trace_error is None:
                    raise
                outs = on_trace_error(gm, e, lambda: list(run_graph(*args)))
                runtimes[key] = (lambda leaves: list(run_graph(*leaves)), None)
                return outs
        runtime, slots = entry
        return runtime(args if slots is None else [args[i] for i in slots])

    run._boxed_call = False
    return run
