"""What the bisector, the minifier and the repro writers share (PyTorch's torch._dynamo.debug_utils).

- running a program and collecting what it computes: its output tensors and, when they need
  grad, the gradients a backward of their sum gives the inputs (`run_collect`);
- comparing two such results with a tolerance, or naming the first difference (`compare`);
- a graph as a standalone Python script that rebuilds its inputs (`rand_strided`) and runs it
  under a backend against eager (`repro_source`, `run_repro`): the script exits 0 when the two
  agree, 1 when the compile crashes or diverges, 2 when eager itself fails on the inputs.

A repro runs at one of two levels, as TORCHDYNAMO_REPRO_AFTER's: after="dynamo" compiles the
Dynamo graph (kiln-level calls) with kiln.compile(backend=...); after="aot" compiles an aten graph
(one AOTAutograd produced: a forward, backward or inference graph) with Inductor's
compile_fx_inner directly, as Inductor's debug dump does.
"""

import contextlib
import math
import os
import sys
import traceback
import warnings

import kiln

EXIT_PASS, EXIT_FAIL, EXIT_EAGER_FAILS = 0, 1, 2
RTOL, ATOL = 1e-4, 1e-5

# The names generated FX code may use besides kiln paths (kiln.fx._codegen._Globals' defaults);
# a graph needing another (a user's function called in the graph) cannot be written standalone.
_STANDARD_GLOBALS = {"kiln", "device", "inf", "nan", "NoneType", "operator"}
_PRELUDE = """import math
import operator

import kiln
from kiln import device
from kiln._dynamo.debug_utils import rand_strided, run_repro

inf, nan, NoneType = math.inf, math.nan, type(None)
"""


# --- inputs ----------------------------------------------------------------------------------------
def rand_strided(shape, stride, dtype=kiln.float32, requires_grad=False, low=0, high=2):
    """A tensor of `shape` laid out with `stride`, filled with random values: normal for floating
    dtypes, integers in [low, high) otherwise (the range the recorded tensor held, so an index
    stays in bounds)."""
    out = kiln.empty_strided(tuple(shape), tuple(stride), dtype=dtype)
    if dtype.is_floating_point or dtype.is_complex:
        out.copy_(kiln.randn(tuple(shape), dtype=dtype))
    elif dtype == kiln.bool:
        out.copy_(kiln.randint(0, 2, tuple(shape)).bool())
    else:
        out.copy_(kiln.randint(low, max(high, low + 1), tuple(shape)).to(dtype))
    return out.requires_grad_(requires_grad)


def clone_inputs(args):
    """Fresh copies of a call's tensors (same layout, same requires_grad, leaves of their own), so
    a run that mutates or differentiates them leaves the originals as they were."""
    return [_clone(a) for a in args]


def _clone(a):
    if isinstance(a, kiln.Tensor):
        with kiln.no_grad():
            copy = kiln.empty_strided(tuple(a.shape), tuple(a.stride()), dtype=a.dtype, device=a.device)
            copy.copy_(a)
        return copy.requires_grad_(a.requires_grad)
    if isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
        return type(a)(_clone(x) for x in a)
    if isinstance(a, dict):
        return {k: _clone(v) for k, v in a.items()}
    return a


def describe_input(value):
    """The call that rebuilds an input in a repro: rand_strided(...) for a tensor, repr otherwise."""
    if not isinstance(value, kiln.Tensor):
        return repr(value)
    shape, stride = _concrete(value.shape), _concrete(value.stride())
    dtype = f"kiln.{str(value.dtype).split('.')[-1]}"
    extra = ""
    if value.requires_grad:
        extra += ", requires_grad=True"
    if not (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == kiln.bool):
        low, high = 0, 2
        if value.numel() and not _is_fake(value):
            low, high = int(value.min()), int(value.max()) + 1
        extra += f", low={low}, high={high}"
    return f"rand_strided({shape}, {stride}, {dtype}{extra})"


def _concrete(sizes):
    try:
        return tuple(int(s) for s in sizes)
    except Exception as e:  # noqa: BLE001 - a symbolic size without a hint
        raise NotImplementedError(f"a repro needs concrete sizes, got {tuple(sizes)}") from e


def _is_fake(t):
    from kiln._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


# --- running and comparing -------------------------------------------------------------------------
def flat_tensors(value):
    """The tensors in a program's result (tuples, lists, dicts, named tuples), in order."""
    if isinstance(value, kiln.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in flat_tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in flat_tensors(v)]
    return []


def run_collect(fn, args, grad_of=()):
    """fn(*args)'s output tensors, and the gradients that backward of their sum gives the input
    tensors that require grad and the tensors in `grad_of` (a module's parameters): what two
    compiles of one program must agree on. Exceptions propagate."""
    leaves = [a for a in args if isinstance(a, kiln.Tensor) and a.requires_grad] + list(grad_of)
    for t in leaves:
        t.grad = None
    outs = flat_tensors(fn(*args))
    differentiable = [o for o in outs if o.requires_grad and (o.dtype.is_floating_point or o.dtype.is_complex)]
    grads = []
    if differentiable and leaves and kiln.is_grad_enabled():
        total = differentiable[0].float().sum()
        for o in differentiable[1:]:
            total = total + o.float().sum()
        total.backward()
        grads = [t.grad for t in leaves]
    return [o.detach() for o in outs], grads


def compare(expected, actual, rtol=RTOL, atol=ATOL):
    """None when two run_collect results agree, else what differs first."""
    for what, ref, res in (("output", expected[0], actual[0]), ("gradient", expected[1], actual[1])):
        if len(ref) != len(res):
            return f"{len(res)} {what}s, eager has {len(ref)}"
        for i, (a, b) in enumerate(zip(ref, res)):
            message = _differs(a, b, rtol, atol)
            if message:
                return f"{what} {i} {message}"
    return None


def _differs(a, b, rtol, atol):
    if (a is None) != (b is None):
        return f"is {'None' if b is None else 'a tensor'} where eager's is {'None' if a is None else 'a tensor'}"
    if a is None:
        return None
    if tuple(a.shape) != tuple(b.shape):
        return f"has shape {tuple(b.shape)}, eager's {tuple(a.shape)}"
    if a.dtype != b.dtype:
        return f"has dtype {b.dtype}, eager's {a.dtype}"
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        if not kiln.equal(a, b):
            return "differs (exact dtype)"
        return None
    if kiln.allclose(b, a, rtol=rtol, atol=atol, equal_nan=True):
        return None
    diff = (b.double() - a.double()).abs()
    diff = kiln.where(kiln.isnan(diff), kiln.full_like(diff, math.inf), diff)
    return f"differs: max abs difference {float(diff.max()):.3g} (rtol={rtol}, atol={atol})"


class Failure:
    """How a compiled run went wrong: kind is "crash" (with the exception) or "accuracy"."""

    def __init__(self, kind, detail, exception=None):
        self.kind, self.detail, self.exception = kind, detail, exception

    def same_kind(self, other):
        """Whether `other` shows this failure (a crash with the same exception type)."""
        if other is None or other.kind != self.kind:
            return False
        return self.kind != "crash" or type(other.exception) is type(self.exception)

    def __str__(self):
        return f"{self.kind}: {self.detail}"


@contextlib.contextmanager
def strict_compile():
    """A context in which a failing compile raises instead of falling back to eager with a warning
    (kiln._dynamo.config.suppress_errors off), and warnings stay quiet."""
    from kiln._dynamo import config

    saved = config.suppress_errors
    config.suppress_errors = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        config.suppress_errors = saved


def check(run_compiled, run_eager, rtol=RTOL, atol=ATOL):
    """A Failure when run_compiled() crashes or disagrees with run_eager(), else None (both return
    run_collect results; run_eager's own exceptions propagate)."""
    expected = run_eager()
    try:
        with strict_compile():
            actual = run_compiled()
    except Exception as e:  # noqa: BLE001 - the compile crashed: what the bisector looks for
        inner = getattr(e, "inner_exception", None) or e
        return Failure("crash", f"{type(inner).__name__}: {inner}", inner)
    difference = compare(expected, actual, rtol, atol)
    return Failure("accuracy", difference) if difference else None


# --- standalone repros -----------------------------------------------------------------------------
def graph_source(gm):
    """gm's forward as the body of `class Repro(kiln.nn.Module)`; raises NotImplementedError when
    the graph calls something a standalone script cannot name."""
    code = gm.graph.python_code("self")
    missing = sorted(set(code.globals) - _STANDARD_GLOBALS)
    if missing:
        raise NotImplementedError(f"the graph calls objects a standalone script cannot name: {', '.join(missing)}")
    body = "\n".join(("    " + line) if line.strip() else "" for line in code.src.strip("\n").splitlines())
    return f"class Repro(kiln.nn.Module):\n{body}\n"


def repro_source(gm, inputs, *, backend="inductor", after="dynamo", note="", options=None, kind="forward",
                 rtol=RTOL, atol=ATOL):
    """A standalone script: gm as a module, its inputs rebuilt at random with their layouts, run
    under `backend` (after="dynamo") or Inductor's compile_fx_inner with `options` for a graph of
    `kind` (after="aot"), compared with eager."""
    args = ",\n        ".join(describe_input(v) for v in inputs)
    header = f'"""{note.strip()}\n\nRun: python <this file>. Exit status 0: the compile agrees with eager; 1: it crashes\n' \
             f'or diverges; 2: eager itself fails on these random inputs."""\n' if note else ""
    call = f"run_repro(Repro(), load_args(), backend={backend!r}, after={after!r}"
    if after == "aot":
        call += f", options={options!r}, kind={kind!r}"
    call += f", rtol={rtol!r}, atol={atol!r})"
    return (f"{header}{_PRELUDE}\n\n{graph_source(gm)}\n\n"
            f"def load_args():\n    kiln.manual_seed(0)\n    return [\n        {args},\n    ]\n\n\n"
            f"if __name__ == \"__main__\":\n    raise SystemExit({call})\n")


def write_repro(path, gm, inputs, **kwargs):
    """Writes repro_source(...) to `path` (folders made as needed); returns the path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(repro_source(gm, inputs, **kwargs))
    return path


def run_repro(mod, args, *, backend="inductor", after="dynamo", options=None, kind="forward", rtol=RTOL, atol=ATOL):
    """Runs a repro's module eagerly and compiled, prints the verdict, returns the exit status."""
    if after == "aot":  # an aten graph is compiled without autograd: its outputs are compared
        args = [a.detach() if isinstance(a, kiln.Tensor) else a for a in args]
    try:
        expected = run_collect(mod, clone_inputs(args))
    except Exception as e:  # noqa: BLE001 - reported, not raised: the verdict is the status
        print(f"repro: eager fails on these inputs: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_EAGER_FAILS
    if after == "dynamo":
        from kiln._dynamo import reset
        from kiln._dynamo.backends.registry import lookup_backend
        from kiln._dynamo.eval_frame import optimize

        reset()
        compiled = optimize(lookup_backend(backend))(mod)
        run = lambda: run_collect(compiled, clone_inputs(args))  # noqa: E731
    elif after == "aot":
        run = lambda: _run_aot(mod, args, options, kind)  # noqa: E731
    else:
        raise ValueError(f"run_repro(): after must be 'dynamo' or 'aot', got {after!r}")
    try:
        with strict_compile():
            actual = run()
    except Exception as e:  # noqa: BLE001
        inner = getattr(e, "inner_exception", None) or e
        print(f"repro: the {backend} compile crashes: {type(inner).__name__}: {inner}", file=sys.stderr)
        traceback.print_exception(inner, file=sys.stderr, limit=-4)
        return EXIT_FAIL
    difference = compare(expected, actual, rtol, atol)
    if difference:
        print(f"repro: {backend} diverges from eager: {difference}", file=sys.stderr)
        return EXIT_FAIL
    print(f"repro: {backend} agrees with eager", file=sys.stderr)
    return EXIT_PASS


def _run_aot(mod, args, options, kind):
    """The aten graph traced again from the module (make_fx) and compiled by compile_fx_inner."""
    from kiln._inductor.compile_fx import OPTIONS, compile_fx_inner
    from kiln.fx.experimental.proxy_tensor import make_fx

    inputs = clone_inputs(args)
    gm = make_fx(mod.forward)(*clone_inputs(inputs))
    _real_meta_values(gm, inputs)
    examples = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
    call = compile_fx_inner(gm, examples, config={**OPTIONS, **(options or {})},
                            is_backward=kind == "backward", is_inference=kind == "inference")
    outs = call(list(inputs)) if getattr(call, "_boxed_call", False) else call(*inputs)
    return [o.detach() for o in flat_tensors(outs)], []


def _real_meta_values(gm, inputs):
    """Each node's meta value the real tensor an eager run computes (make_fx's fake values die
    with its mode, and Inductor's passes compute on meta values)."""
    from kiln.fx.interpreter import Interpreter

    class Recording(Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            if isinstance(value, kiln.Tensor):
                node.meta["val"] = value.detach()
            elif isinstance(value, (list, tuple)):
                node.meta["val"] = type(value)(v.detach() if isinstance(v, kiln.Tensor) else v for v in value)
            return value

    with kiln.no_grad():
        Recording(gm, garbage_collect_values=False).run(*clone_inputs(inputs))
