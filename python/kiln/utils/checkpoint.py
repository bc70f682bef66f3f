"""kiln.utils.checkpoint: activation checkpointing, as torch.utils.checkpoint.

``checkpoint(fn, *args)`` trades memory for compute: eagerly, fn runs without keeping its
activations and runs again during the backward (the reentrant scheme: parameters used inside fn
get their gradients accumulated by that inner backward; the RNG state is restored so dropout
draws the same masks). Under tracing (AOTAutograd's make_fx, Dynamo's capture) fn is traced
inline and the nodes it creates are annotated ``node.meta["recompute"]`` with a
``CheckpointPolicy``: PREFER_RECOMPUTE for all of them, or what a selective policy says per op
(``context_fn=functools.partial(create_selective_checkpoint_contexts, policy_fn_or_ops)``).
``min_cut_rematerialization_partition`` honours them (aot/partition.h): MUST_SAVE/PREFER_SAVE
values are saved, MUST_RECOMPUTE/PREFER_RECOMPUTE values are recomputed in the backward.
"""

import enum

import kiln
from kiln import _C

__all__ = ["CheckpointPolicy", "checkpoint", "create_selective_checkpoint_contexts", "noop_context_fn",
           "SelectiveCheckpointContext"]


class CheckpointPolicy(enum.Enum):
    """Whether an op's output is saved for the backward or recomputed there."""

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3


class SelectiveCheckpointContext:
    """What a selective policy function receives first (PyTorch's name); is_recompute is False
    when the policy is consulted while tracing the forward."""

    def __init__(self, *, is_recompute):
        self.is_recompute = is_recompute


class _PolicyContexts(tuple):
    """The pair create_selective_checkpoint_contexts returns (forward and recompute contexts);
    kiln reads the policy from it."""

    policy = None


def noop_context_fn():
    return _PolicyContexts((None, None))


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """Selective checkpointing: `policy_fn(ctx, op, *args, **kwargs) -> CheckpointPolicy`, or a
    list of ops to save (everything else is recomputed)."""
    if isinstance(policy_fn_or_list, (list, tuple, set)):
        saved = set(policy_fn_or_list)

        def policy_fn(ctx, op, *args, **kwargs):
            packet = getattr(op, "overloadpacket", None)
            keep = op in saved or (packet is not None and packet in saved)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    elif callable(policy_fn_or_list):
        policy_fn = policy_fn_or_list
    else:
        raise TypeError("create_selective_checkpoint_contexts(): expected a policy function or a list of ops, "
                        f"got {type(policy_fn_or_list).__name__}")
    contexts = _PolicyContexts((None, None))
    contexts.policy = policy_fn
    return contexts


def annotate_region(graph, before, policy):
    """Marks the call nodes of `graph` that are not in `before` with their recompute policy."""
    ctx = SelectiveCheckpointContext(is_recompute=False)
    for node in graph.nodes:
        if node.op == "call_function" and node not in before and "recompute" not in node.meta:
            if policy is None:
                node.meta["recompute"] = CheckpointPolicy.PREFER_RECOMPUTE
            else:
                decision = policy(ctx, node.target, *node.args, **node.kwargs)
                if not isinstance(decision, CheckpointPolicy):
                    raise TypeError(f"checkpoint policy returned {decision!r}, expected a CheckpointPolicy")
                node.meta["recompute"] = decision


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), with its activations recomputed in the backward (see the module
    docstring)."""
    contexts = context_fn()
    policy = getattr(contexts, "policy", None)
    from kiln.fx.experimental.proxy_tensor import current_trace_graph

    graph = current_trace_graph()
    if graph is not None:  # under make_fx: inline, and annotate what the region records
        before = set(graph.nodes)
        out = function(*args, **kwargs)
        annotate_region(graph, before, policy)
        return out
    if not _C.is_grad_enabled():
        return function(*args, **kwargs)
    if kwargs:
        raise ValueError("checkpoint(): keyword arguments are only supported under tracing; pass them positionally")
    # An empty tensor that requires grad makes the output require grad even when no argument
    # does, so the backward runs for the parameters fn uses.
    anchor = kiln.empty(0, requires_grad=True)
    return _Checkpoint.apply(function, preserve_rng_state, anchor, *args)


class _Checkpoint(kiln.autograd.Function):
    @staticmethod
    def forward(ctx, function, preserve_rng_state, anchor, *args):
        ctx.function = function
        ctx.rng_state = kiln.get_rng_state() if preserve_rng_state else None
        ctx.tensor_slots = [i for i, a in enumerate(args) if isinstance(a, kiln.Tensor)]
        ctx.others = [None if isinstance(a, kiln.Tensor) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_slots])
        with kiln.no_grad():
            return function(*args)

    @staticmethod
    def backward(ctx, *grads):
        values = list(ctx.others)
        detached = []
        for i, t in zip(ctx.tensor_slots, ctx.saved_tensors):
            d = t.detach().requires_grad_(t.requires_grad)
            values[i] = d
            detached.append(d)
        current = kiln.get_rng_state()
        if ctx.rng_state is not None:
            kiln.set_rng_state(ctx.rng_state)
        try:
            with kiln.enable_grad():
                outs = ctx.function(*values)
        finally:
            kiln.set_rng_state(current)
        outs = outs if isinstance(outs, tuple) else (outs,)
        pairs = [(o, g) for o, g in zip(outs, grads) if isinstance(o, kiln.Tensor) and o.requires_grad and g is not None]
        if pairs:
            kiln.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        input_grads = [None] * len(values)
        for i, d in zip(ctx.tensor_slots, detached):
            input_grads[i] = d.grad
        return (None, None, None, *input_grads)
