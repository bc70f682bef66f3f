"""Runs one fuzz program in one framework and mode, and records everything the comparator checks.

A mode is (module, backend, grad): module is kiln or torch, backend None for eager or a
`kiln.compile` backend name, grad whether float inputs require grad (then a weighted sum of the
float outputs is backpropagated and the leaves' gradients recorded). Each call of the program (two
when its shapes change) records: the exception type, or every output's dtype/shape/strides/values,
which inputs and earlier outputs it shares storage with, every input's value afterwards (mutations)
and the gradients.
"""

import dataclasses
import numpy as np


@dataclasses.dataclass
class Value:
    """One output: a tensor's metadata and values (as float64/int64/bool numpy), or a Python scalar."""
    dtype: str = ""
    shape: tuple = ()
    stride: tuple = ()
    values: object = None
    aliases_input: tuple = ()   # indices of inputs whose storage this output shares
    aliases_output: tuple = ()  # indices of earlier outputs whose storage it shares
    is_input: tuple = ()        # indices of inputs this output *is* (identity)
    requires_grad: bool = False
    scalar: object = None       # for a non-tensor output


@dataclasses.dataclass
class Call:
    exc: str = ""               # the builtin exception class raised by the forward, if any
    message: str = ""
    outs: list = dataclasses.field(default_factory=list)
    inputs_after: list = dataclasses.field(default_factory=list)
    bases_after: list = dataclasses.field(default_factory=list)
    bwd_exc: str = ""
    bwd_message: str = ""
    grads: list = dataclasses.field(default_factory=list)
    computed_in: set = dataclasses.field(default_factory=set)  # float dtypes the forward's ops produced (torch eager)


def builtin_exception(exc):
    """The builtin class a user would catch (torch raises torch.OutOfMemoryError, kiln its own)."""
    return next(c for c in type(exc).__mro__ if c.__module__ == "builtins").__name__


def dtype_name(dt):
    return str(dt).split(".")[-1]


def to_numpy(t):
    t = t.detach()
    if t.numel() == 0:
        return np.zeros(tuple(t.shape))
    return np.array(t.tolist())


def storage_id(t):
    """An identifier of the tensor's storage (None for empty tensors, whose storage is meaningless)."""
    if t.numel() == 0:
        return None
    if hasattr(t, "_storage_data_ptr"):  # kiln
        return t._storage_data_ptr()
    return t.untyped_storage().data_ptr()


def _recording_dtypes(seen):
    """A TorchDispatchMode adding to `seen` the float dtype of every tensor an op returns: a float64
    result computed through a float32 intermediate (an int tensor meeting a Python float gives one)
    has only float32's precision, which the comparator's tolerance must know."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    import torch

    class DtypeRecorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            seen.update(dtype_name(t.dtype) for t in tree_leaves(out)
                        if isinstance(t, torch.Tensor) and t.is_floating_point())
            return out

    return DtypeRecorder()


def load(source, module_name):
    """The program's namespace with `T` bound to `module_name` (kiln or torch)."""
    ns = {}
    exec(compile(source.replace("import kiln as T", f"import {module_name} as T"), "<fuzz>", "exec"), ns)  # noqa: S102
    return ns


def record(source, module_name, backend=None, grad=False, calls=1):
    """Runs the program in `module_name` (eagerly, or under kiln.compile(backend=...)); a list of Call."""
    if module_name != "kiln" or backend is None:
        return _record(source, module_name, backend, grad, calls)
    import kiln._dynamo

    # an internal error of kiln's compiler raises instead of quietly running the program eagerly
    # (Note [Internal errors]): under the fuzzer, a backend that falls back is a failure
    config = kiln._dynamo.config
    saved, config.suppress_errors = config.suppress_errors, False
    try:
        return _record(source, module_name, backend, grad, calls)
    finally:
        config.suppress_errors = saved


# PyTorch lets `int_x[0] = float_requiring_grad` mark the integer tensor (and its base) as
# requiring grad; its next in-place op then raises "a leaf Variable that requires grad is being used
# in an in-place operation" (fuzz seed 1371, program 1030). Such an error is marked so compare.py
# treats it as the integer-autograd bug it is, not as an oracle.
INTEGER_REQUIRES_GRAD = " [PyTorch: an integer tensor requires grad]"


def _integer_requiring_grad(x):
    return getattr(x, "requires_grad", False) and not (x.is_floating_point() or x.is_complex())


def _record(source, module_name, backend, grad, calls):
    ns = load(source, module_name)
    T = ns["T"]
    fn = ns["f"]
    if backend is not None:
        import importlib

        importlib.import_module(module_name + "._dynamo")  # not imported by `import kiln`
        T._dynamo.reset()
        fn = T.compile(fn, backend=backend)
    result = []
    for call in range(calls):
        inputs, leaves, bases = ns["make_inputs"](call, grad)
        in_ids = [storage_id(x) for x in inputs]
        rec = Call()
        result.append(rec)
        try:
            if module_name == "torch" and backend is None:
                try:
                    with _recording_dtypes(rec.computed_in):
                        outs = fn(*inputs)
                except Exception:  # noqa: BLE001 - confirmed without the mode below
                    # the recording mode may change PyTorch's own path (matmul of empty int64 and
                    # bool batches raises under a dispatch mode and not without: fuzz seed 431,
                    # program 15807): the reference is the program run without it, on fresh inputs
                    inputs, leaves, bases = ns["make_inputs"](call, grad)
                    in_ids = [storage_id(x) for x in inputs]
                    outs = fn(*inputs)
            else:
                outs = fn(*inputs)
        except Exception as e:  # noqa: BLE001 - any exception is a result to compare
            rec.exc, rec.message = builtin_exception(e), f"{type(e).__name__}: {e}"[:300]
            if module_name == "torch" and any(_integer_requiring_grad(x) for x in [*inputs, *bases]):
                rec.message += INTEGER_REQUIRES_GRAD
            continue
        out_ids = []
        for o in outs:
            if not isinstance(o, T.Tensor):
                rec.outs.append(Value(scalar=o))
                out_ids.append(None)
                continue
            sid = storage_id(o)
            rec.outs.append(Value(
                dtype=dtype_name(o.dtype), shape=tuple(o.shape), stride=tuple(o.stride()), values=to_numpy(o),
                aliases_input=tuple(i for i, s in enumerate(in_ids) if sid is not None and s == sid),
                aliases_output=tuple(i for i, s in enumerate(out_ids) if sid is not None and s == sid),
                is_input=tuple(i for i, x in enumerate(inputs) if o is x),
                requires_grad=bool(o.requires_grad)))
            out_ids.append(sid)
        rec.inputs_after = [(dtype_name(x.dtype), to_numpy(x)) for x in inputs]
        rec.bases_after = [(dtype_name(x.dtype), to_numpy(x)) for x in bases]
        if not grad:
            continue
        try:
            loss = None
            rng = np.random.default_rng(call)
            for o in outs:
                if isinstance(o, T.Tensor) and o.requires_grad and o.is_floating_point():
                    w = ns["mk"](rng.uniform(-1, 1, tuple(o.shape)), o.dtype)
                    term = (o * w).sum().float()
                    loss = term if loss is None else loss + term
            if loss is not None:
                loss.backward()
            rec.grads = [None if x.grad is None else (dtype_name(x.grad.dtype), to_numpy(x.grad)) for x in leaves]
        except Exception as e:  # noqa: BLE001
            rec.bwd_exc, rec.bwd_message = builtin_exception(e), f"{type(e).__name__}: {e}"[:300]
    return result
