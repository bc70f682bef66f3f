"""Symbolic layouts checked at the example sizes: does an op's meta function over symbolic sizes lay
its result out as it does over the sizes the symbols stand for?

Note [Symbolic layouts checked at the hints]: a meta function decides strides, and whether the
result is its input or a view, from sizes and strides. Over symbolic sizes some C++ meta functions
give up on a decision and answer "row-major": LayoutOfInputs (tensor/ops/common.cc, the memory order
of an elementwise result), EmptyLikeOp's preserve_format (tensor/ops/creation.cc, so clone and the
*_like factories). Eager lays `x.t() + 1` out transposed; the symbolic trace called it contiguous,
so a later `.contiguous()` returned it unchanged and the compiled program returned an alias of a
transposed tensor (fuzz seed 181, program 16118; with every backend, as the node was never
recorded). Every later decision in the graph (contiguous, reshape's view-or-copy, Inductor's output
layouts) reads the wrong strides, so no single op can be patched.

So while Dynamo records an op over tensors with symbolic sizes, `layout_disagreement` runs it again
in a static FakeTensorMode over fakes laid out at the symbols' example values (the "hints") and
compares: strides of every tensor output (dimensions longer than 1), whether an output is an input
itself, and whether it shares storage with an input (view or copy). A difference means the
symbolic trace lies about layouts; translation restarts with static shapes for that frame
(convert_frame.SpecializeShapes), correct at the price of a compile per size. When the C++ meta
functions decide layouts over SymInts (comparisons on the hints, guarded, as PyTorch's
compute_elementwise_output_strides), the check finds nothing and costs one meta call per op.
"""

import kiln
from kiln import _C
from kiln._subclasses.fake_tensor import FakeTensorMode
from kiln._symbolic import SymBool, SymFloat, SymInt, _SymNumber

_static_mode = None  # one FakeTensorMode without a ShapeEnv, made on first use


def _static():
    global _static_mode
    if _static_mode is None:
        _static_mode = FakeTensorMode()
    return _static_mode


def _hint(value):
    """The example value of a SymInt/SymFloat/SymBool (None when it has none: an unbacked value)."""
    hint = value.node.hint()
    if hint is None:
        return None
    if isinstance(value, SymBool):
        return bool(hint)
    return float(hint) if isinstance(value, SymFloat) else int(hint)


def _has_symbols(value):
    if isinstance(value, kiln.Tensor):
        return any(isinstance(s, SymInt) for s in (*value.shape, *value.stride(), value.storage_offset()))
    if isinstance(value, (list, tuple)):
        return any(_has_symbols(v) for v in value)
    if isinstance(value, dict):
        return any(_has_symbols(v) for v in value.values())
    return isinstance(value, _SymNumber)


class _NoHint(Exception):
    """A symbol without an example value (data-dependent): nothing to compare against."""


def _concrete(value, memo):
    """`value` with every fake tensor re-made at its hints in the static mode (one per fake, so an
    argument passed twice stays one tensor) and every symbolic number replaced by its hint."""
    if isinstance(value, kiln.Tensor):
        hit = memo.get(id(value))
        if hit is None:
            layout = [_concrete(list(value.shape), memo), _concrete(list(value.stride()), memo),
                      _concrete(value.storage_offset(), memo)]
            hit = _C._fake_from_tensor(_static()._cmode, value, *layout)
            memo[id(value)] = hit
        return hit
    if isinstance(value, _SymNumber):
        hint = _hint(value)
        if hint is None:
            raise _NoHint()
        return hint
    if isinstance(value, kiln.Size):
        return kiln.Size(_concrete(list(value), memo))
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_concrete(v, memo) for v in value)
    if isinstance(value, dict):
        return {k: _concrete(v, memo) for k, v in value.items()}
    return value


def _tensors(value):
    if isinstance(value, kiln.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _describe(tensor, hinted=False):
    def show(values):
        return tuple(_hint(v) if hinted and isinstance(v, SymInt) else v for v in values)

    return f"size {show(tensor.shape)}, strides {show(tensor.stride())}"


def layout_disagreement(kind, target, fake_args, fake_kwargs, result):
    """Why the symbolic result's layout differs from the op's result at the hints (None: it does
    not, nothing is symbolic, or the comparison cannot be made)."""
    if not (_has_symbols(fake_args) or _has_symbols(fake_kwargs)):
        return None
    memo = {}
    try:
        args, kwargs = _concrete(fake_args, memo), _concrete(fake_kwargs, memo)
    except _NoHint:
        return None
    try:
        with _static(), kiln.no_grad():
            expected = getattr(args[0], target)(*args[1:], **kwargs) if kind == "call_method" else \
                target(*args, **kwargs)
    except Exception:  # e.g. a data-dependent op: the static mode has no ShapeEnv to name its size
        return None
    got_tensors, want_tensors = _tensors(result), _tensors(expected)
    if len(got_tensors) != len(want_tensors):
        return None
    arg_tensors = _tensors(list(fake_args) + list(fake_kwargs.values()))
    concrete_args = [memo[id(t)] for t in arg_tensors]
    for i, (got, want) in enumerate(zip(got_tensors, want_tensors)):
        if _has_symbols(got) and any(_hint(s) is None for s in (*got.shape, *got.stride()) if isinstance(s, SymInt)):
            continue  # an unbacked size
        sizes = [_hint(s) if isinstance(s, SymInt) else s for s in got.shape]
        if sizes != list(want.shape) or want.numel() == 0:
            continue
        strides = [_hint(s) if isinstance(s, SymInt) else s for s in got.stride()]
        if any(n > 1 and a != b for n, a, b in zip(sizes, strides, want.stride())):
            return (f"output {i}: {_describe(got)} over symbolic sizes is {_describe(got, hinted=True)} at the "
                    f"example sizes, where the op itself gives strides {tuple(want.stride())}")
        is_input = [got is a for a in arg_tensors]
        if is_input != [want is a for a in concrete_args]:
            return f"output {i} is {'not ' if not any(is_input) else ''}an input itself over symbolic sizes, " \
                   f"unlike at the example sizes"
        shares = any(got._storage_id() == a._storage_id() for a in arg_tensors)
        if shares != any(want._storage_id() == a._storage_id() for a in concrete_args):
            return f"output {i} is {'a view' if shares else 'a copy'} of an input over symbolic sizes and " \
                   f"{'a copy' if shares else 'a view'} at the example sizes"
    return None
