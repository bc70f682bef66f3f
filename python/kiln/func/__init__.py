"""kiln.func: function transforms, as torch.func. `functionalize(f)` runs f with in-place ops and
views replaced by functional ops (aot/functionalize.h, Note [Functionalization]); inputs that f
mutates are updated at the end with copy_, so callers see the same mutations."""

import functools

from kiln import _C
from kiln._tensor import Tensor

__all__ = ["functionalize", "functional_call"]


def _flatten(tree, leaves):
    """Leaves of nested tuples/lists/dicts, in order; returns a rebuild function."""
    if isinstance(tree, (tuple, list)):
        builders = [_flatten(x, leaves) for x in tree]
        kind = type(tree)
        if kind in (tuple, list):
            return lambda it: kind(b(it) for b in builders)
        return lambda it: kind(*[b(it) for b in builders])  # namedtuples
    if isinstance(tree, dict):
        keys = list(tree.keys())
        builders = [_flatten(tree[k], leaves) for k in keys]
        return lambda it: {k: b(it) for k, b in zip(keys, builders)}
    leaves.append(tree)
    return lambda it: next(it)


def _unflatten(builder, leaves):
    return builder(iter(leaves))


def functionalize(func, *, remove="mutations"):
    """A function computing what ``func`` does, with every mutation and view replaced by
    functional ops below this call (so tracers such as make_fx record no in-place op).

    remove: "mutations" (views stay views) or "mutations_and_views" (as "mutations" here: view
    ops are recorded as views; kiln has no *_copy ops yet).
    """
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(
            f"functionalize: got an invalid value for remove: {remove!r}; "
            "expected 'mutations' or 'mutations_and_views'")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        leaves = []
        builder = _flatten((args, kwargs), leaves)
        inner = [_C._to_functional_tensor(x) if isinstance(x, Tensor) else x for x in leaves]
        f_args, f_kwargs = _unflatten(builder, inner)
        prev = _C._enable_functionalization(True)
        try:
            out = func(*f_args, **f_kwargs)
        finally:
            _C._enable_functionalization(prev)
        # Epilogue: inputs f mutated take their final layout (in-place view ops such as t_,
        # replayed), then their final values.
        for orig, wrapped_arg in zip(leaves, inner):
            if not isinstance(orig, Tensor):
                continue
            for method, margs in _C._functionalize_metadata_mutations(wrapped_arg):
                getattr(orig, method)(*margs)
            if _C._functionalize_has_data_mutation(wrapped_arg):
                orig.copy_(_C._from_functional_tensor(wrapped_arg))
        out_leaves = []
        out_builder = _flatten(out, out_leaves)
        out_leaves = [_C._from_functional_output(x) if isinstance(x, Tensor) else x for x in out_leaves]
        return _unflatten(out_builder, out_leaves)

    return wrapped


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """Calls ``module`` with its parameters and buffers replaced by the given tensors (by
    qualified name), as torch.func.functional_call; the module is unchanged afterwards."""
    if isinstance(parameter_and_buffer_dicts, (tuple, list)):
        merged = {}
        for d in parameter_and_buffer_dicts:
            for k, v in d.items():
                if k in merged:
                    raise ValueError(f"{k} appeared in multiple dictionaries; behavior of functional call is ambiguous")
                merged[k] = v
        parameter_and_buffer_dicts = merged
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = kwargs or {}
    known = {name for name, _ in module.named_parameters()} | {name for name, _ in module.named_buffers()}
    if strict:
        missing = sorted(known - set(parameter_and_buffer_dicts))
        unexpected = sorted(set(parameter_and_buffer_dicts) - known)
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
    saved = []
    try:
        for name, value in parameter_and_buffer_dicts.items():
            owner_path, _, leaf = name.rpartition(".")
            owner = module.get_submodule(owner_path) if owner_path else module
            for slot in ("_parameters", "_buffers"):
                table = owner.__dict__[slot]
                if leaf in table:
                    saved.append((table, leaf, table[leaf]))
                    table[leaf] = value
                    break
            else:
                raise AttributeError(f"{type(module).__name__} has no parameter or buffer named '{name}'")
        return module(*args, **kwargs)
    finally:
        for table, leaf, old in reversed(saved):
            table[leaf] = old
