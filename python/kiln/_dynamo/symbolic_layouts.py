"""Symbolic layouts checked at the example sizes: does an op's meta function over symbolic sizes lay
its result out as it does over the sizes the symbols stand for?

Note [Symbolic layouts checked at the hints]: a meta function decides strides, and whether the
result is its input or a view, from sizes and strides. Over symbolic sizes C++ meta functions used
to give up on a decision and answer "row-major": LayoutOfInputs (tensor/ops/common.cc, the memory
order of an elementwise result) and EmptyLikeOp's preserve_format (tensor/ops/creation.cc, so clone
and the *_like factories). Eager lays `x.t() + 1` out transposed; the symbolic trace called it
contiguous, so a later `.contiguous()` returned it unchanged and the compiled program returned an
alias of a transposed tensor (fuzz seed 181, program 16118; with every backend, as the node was
never recorded). Every later decision in the graph (contiguous, reshape's view-or-copy, Inductor's
output layouts) reads the wrong strides, so no single op can be patched. Those two now decide over
SymInts with guards, as PyTorch does; others still answer conservatively over symbols
(MayOverlapItself in tensor/tensor_impl.cc, PreservesLayout in tensor/ops/view_scatter.cc), and this
check keeps any such meta from laying out a compiled result otherwise than eager.

So while Dynamo records an op over tensors with symbolic sizes, `LayoutShadow.disagreement` runs it
again in a static FakeTensorMode over the arguments' twins: fakes laid out at the symbols' example
values (the "hints"), each the output of the same op one step before (a graph input's is made from
its layout). It compares strides of every tensor output (dimensions longer than 1), whether an
output is an input itself, and whether it shares storage with an input (view or copy). A difference means the
symbolic trace lies about layouts; translation restarts with static shapes for that frame
(convert_frame.SpecializeShapes), correct at the price of a compile per size. Where the C++ meta
functions decide layouts over SymInts (comparisons on the hints, guarded, as PyTorch's
compute_elementwise_output_strides), the check finds nothing and costs one meta call per op.
"""

import kiln
from kiln import _C
from kiln._subclasses.fake_tensor import FakeTensorMode
from kiln._symbolic import SymBool, SymFloat, _SymNumber


def _hint(value):
    """The example value of a SymInt/SymFloat/SymBool (None when it has none: an unbacked value)."""
    hint = value.node.hint()
    if hint is None:
        return None
    if isinstance(value, SymBool):
        return bool(hint)
    return float(hint) if isinstance(value, SymFloat) else int(hint)


def _hints(values):
    """Plain ints for a tuple of ints and SymInts (None when one has no hint)."""
    out = [v if type(v) is int else _hint(v) for v in values]
    return None if None in out else out


class _NoHint(Exception):
    """A symbol without an example value (data-dependent): nothing to compare against."""


def _tensors(value):
    if isinstance(value, kiln.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


class LayoutShadow:
    """The static twin of one trace: for each fake tensor with symbolic sizes, a fake laid out at
    the hints, made by running the same ops (so views and in-place ops keep their twins' storage
    and layout as eager would). One per OutputGraph."""

    def __init__(self):
        self.mode = FakeTensorMode()
        self.twins = {}  # id(symbolic fake) -> (symbolic fake, its twin): the pair keeps the id unique

    def _twin(self, tensor):
        hit = self.twins.get(id(tensor))
        if hit is not None and hit[0] is tensor:
            return hit[1]
        sizes, strides = _hints(tensor.shape), _hints(tensor.stride())
        offset = _hints((tensor.storage_offset(),))
        if sizes is None or strides is None or offset is None:
            raise _NoHint()
        twin = _C._fake_from_tensor(self.mode._cmode, tensor, sizes, strides, offset[0])
        self.twins[id(tensor)] = (tensor, twin)
        return twin

    def _concrete(self, value):
        """`value` with every fake tensor replaced by its twin and every symbolic number by its hint."""
        if isinstance(value, kiln.Tensor):
            return self._twin(value)
        if isinstance(value, _SymNumber):
            hint = _hint(value)
            if hint is None:
                raise _NoHint()
            return hint
        if isinstance(value, kiln.Size):
            return kiln.Size(self._concrete(list(value)))
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return type(value)(self._concrete(v) for v in value)
        if isinstance(value, dict):
            return {k: self._concrete(v) for k, v in value.items()}
        if isinstance(value, slice):  # x[:, :t]: a symbolic bound left in would guard t == its hint
            return slice(self._concrete(value.start), self._concrete(value.stop), self._concrete(value.step))
        return value

    def disagreement(self, kind, target, fake_args, fake_kwargs, result):
        """Why the symbolic result's layout differs from the op's result at the hints (None: it
        does not, or the comparison cannot be made)."""
        try:
            args, kwargs = self._concrete(fake_args), self._concrete(fake_kwargs)
        except _NoHint:
            return None
        try:
            with self.mode, kiln.no_grad():
                expected = getattr(args[0], target)(*args[1:], **kwargs) if kind == "call_method" else \
                    target(*args, **kwargs)
        except Exception:  # e.g. a data-dependent op: the static mode has no ShapeEnv to name its size
            return None
        got_tensors, want_tensors = _tensors(result), _tensors(expected)
        if len(got_tensors) != len(want_tensors):
            return None
        arg_tensors = _tensors(list(fake_args) + list(fake_kwargs.values()))
        twins = [self._twin(t) for t in arg_tensors]
        for i, (got, want) in enumerate(zip(got_tensors, want_tensors)):
            sizes, strides = _hints(got.shape), _hints(got.stride())
            if sizes is None or strides is None or sizes != list(want.shape):
                continue  # an unbacked size, or sizes that differ (not a layout question)
            if want.numel() and any(n > 1 and a != b for n, a, b in zip(sizes, strides, want.stride())):
                return (f"output {i} of size {tuple(got.shape)} has strides {tuple(got.stride())} over symbolic "
                        f"sizes, {tuple(strides)} at the example sizes {tuple(sizes)}, where the op itself gives "
                        f"strides {tuple(want.stride())}")
            is_input = [got is a for a in arg_tensors]
            if is_input != [want is a for a in twins]:
                return f"output {i} is {'' if any(is_input) else 'not '}an input itself over symbolic sizes, " \
                       f"unlike at the example sizes"
            shares = any(got._storage_id() == a._storage_id() for a in arg_tensors)
            if shares != any(want._storage_id() == a._storage_id() for a in twins):
                return f"output {i} is {'a view' if shares else 'a copy'} of an input over symbolic sizes and " \
                       f"{'a copy' if shares else 'a view'} at the example sizes"
            self.twins[id(got)] = (got, want)
        return None
