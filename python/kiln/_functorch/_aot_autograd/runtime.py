"""AOTAutograd's run time (kiln._functorch.aot_autograd): the compiled forward and backward run
inside a kiln.autograd.Function, mutated inputs copied back, outputs that alias an input rebuilt
as views of it, saved values checked for in-place changes as eager checks them."""

import kiln
from kiln import _C
from kiln._functorch._aot_autograd.input_aliasing import _overlaps_itself
from kiln._functorch._aot_autograd.joint import _RaiseInBackward


def _call_compiled(fn, args):
    """The boxed convention (make_boxed_func): a list the callee may clear; else positional."""
    if getattr(fn, "_boxed_call", False):
        return fn(list(args))
    return fn(*args)


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
        # a new value whose backward raises still requires grad when the input does or when it
        # was made from inputs that do (`x3[0] = x3 % x2`, x2 requiring grad: x3 does after the
        # copy, and so does a view of it the function returned; fuzz seed 1121, program 228)
        anchors = [x for x in leaves if isinstance(x, kiln.Tensor) and x.requires_grad] if deferred else []
        for i, value, with_grad in zip(traced.mutated_inputs, new_values, traced.mutation_differentiable):
            if i in deferred and grad_enabled:
                value = _RaiseInBackward.apply(value, deferred[i], leaves[i], *anchors)
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
                    (alias.found.view.size, alias.found.view.stride, alias.found.view.offset) == traced.new_layouts[alias.index]:
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
# (Note [Synthetic bases] in input_aliasing.py): `x1.t_()` on an input that aliases x2 re-lays x1 there, which bumps the
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
    # saved as clones of their old value, and their overwriting is Note [Backward errors of mutated inputs] in joint.py
    # (primals past the inputs are the function's tensor constants)
    # (position among inputs_read's, leaf index): a mutated input counts through its new value
    num_primals = num_inputs + len(traced.constants)
    read_by_full_backward = inputs_read(0)
    watched = [(p, p) if p < num_inputs else (p, mutated_inputs[p - num_primals]) for p in read_by_full_backward
               if p < num_inputs and p not in set(mutated_inputs) or num_primals <= p < num_primals + n_mut]
    # (position among inputs_read's, output index): Note [Outputs eager would have saved] in backward_reads.py
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
            if recomputed_from:  # Note [Inputs saved only to recompute from] in backward_reads.py
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
