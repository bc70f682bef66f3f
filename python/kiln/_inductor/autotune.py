"""max-autotune: matmul and convolution each have alternatives; the first compile of a layout
times them on random inputs of that layout and keeps the fastest.

- mm / addmm: the extern kernel (kiln's BLAS GEMM, blocked over the thread pool), or a generated
  kernel (lowering.nn.mm_template: a dot product per output element, whose bias and following
  pointwise ops fuse into it);
- convolution (2-D, groups=1): the extern kernel (kiln's batched im2col + GEMM), or im2col as a
  strided view copied once and one matmul per batch (conv2d_im2col below).

Each alternative is checked against the extern result before it may win. Choices are kept in
memory and on disk (autotune.json in the kernel cache directory), keyed by the op, its
arguments' layouts and values, the CPU and the thread count, so a later process skips the timing.
"""

import json
import logging
import os
import tempfile
import time

import kiln
from kiln._logging import getArtifactLogger

output_code_log = getArtifactLogger(__name__, "output_code")
aten = kiln.ops.aten


def _mm_applies(target, args):
    return target in (aten.mm.default, aten.addmm.default)


def _im2col_applies(target, args):
    # 2-D, groups 1, not transposed
    return target is aten.convolution.default and (args is None or (args[-1] == 1 and not args[6] and
                                                                     len(args[0].shape) == 4))


# The templates an op may run as instead of its extern kernel: each says which calls it can
# express (args None: whether it can express some call of that op).
_TEMPLATES = {"generated": _mm_applies, "im2col": _im2col_applies}


def tunable(target):
    """Whether max-autotune times alternatives for target: a compute-intensive op (Tag.compute_intensive
    in the registry, Note [Op cost classes]) that some template can express."""
    return kiln.Tag.compute_intensive in getattr(target, "tags", ()) and \
        any(applies(target, None) for applies in _TEMPLATES.values())

_choices = None  # key -> choice, loaded from disk on first use


class _Composite:
    """An alternative implemented with kiln ops, named in the wrapper by its import path."""

    def __init__(self, fn, path):
        self.fn, self.path = fn, path

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __str__(self):
        return self.path


def _conv2d_im2col(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """Convolution as im2col (a strided view of the padded input, copied once into columns)
    followed by a matmul broadcast over the batch: out[n] = W (Co x C*kh*kw) @ cols[n]."""
    n, c, h, w = x.shape
    co, _, kh, kw = weight.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    if ph or pw:
        x = aten.constant_pad_nd.default(x, [pw, pw, ph, ph], 0.0)
        h, w = h + 2 * ph, w + 2 * pw
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    xs = x.stride()
    cols = x.as_strided([n, c, kh, kw, oh, ow], [xs[0], xs[1], xs[2] * dh, xs[3] * dw, xs[2] * sh, xs[3] * sw],
                        x.storage_offset()).reshape(n, c * kh * kw, oh * ow)
    out = kiln.matmul(weight.reshape(co, c * kh * kw), cols)
    if bias is not None:
        out = out + bias.view(1, co, 1)
    return out.view(n, co, oh, ow)


conv2d_im2col = _Composite(_conv2d_im2col, "kiln._inductor.autotune.conv2d_im2col")


def _cache_path():
    root = os.environ.get("KILN_INDUCTOR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kiln",
                                                                     "inductor")
    return os.path.join(root, "autotune.json")


def _load():
    global _choices
    if _choices is None:
        try:
            with open(_cache_path()) as f:
                _choices = json.load(f)
        except (OSError, ValueError):
            _choices = {}
    return _choices


def _save():
    path = _cache_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "w") as f:
            json.dump(_choices, f, indent=0, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache directory only costs the timing next time


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        model = ""
    return f"{model}|threads={kiln.get_num_threads()}"


def _describe(v):
    if isinstance(v, kiln.Tensor):
        return f"{str(v.dtype).split('.')[-1]}{list(v.shape)}/{list(v.stride())}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_describe(x) for x in v) + "]"
    return repr(v)


def _real(v):
    """A random tensor with v's layout (v: a fake tensor from the graph's metadata)."""
    if not isinstance(v, kiln.Tensor):
        return v
    out = kiln.empty_strided(list(v.shape), list(v.stride()), dtype=v.dtype)
    if v.dtype.is_floating_point:
        out.copy_(kiln.randn(list(v.shape)))
    else:
        out.copy_(kiln.randint(0, 3, list(v.shape)).to(v.dtype))
    return out


def _time(fn):
    fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(3):
            fn()
        best = min(best, (time.perf_counter() - start) / 3)
    return best


def measure(name, run):
    """Seconds per call of one alternative (tests replace this to force a choice)."""
    return _time(run)


def choose(target, out_meta, arg_metas, kwargs, generated=None):
    """The fastest alternative for this call ("extern", "generated" or "im2col"), timed once per
    layout and remembered; arg_metas are the node's arguments with fake tensors for tensors.
    generated(target, out_meta, args, kwargs) -> run: the matmul template compiled for real
    arguments, from the graph being lowered (graph.py: the lowering imports this module, never the
    other way)."""
    key = f"{target}|{_describe(list(arg_metas))}|{sorted(kwargs.items())!r}|{_cpu()}"
    choices = _load()
    if key in choices:
        return choices[key]
    args = [_real(a) for a in arg_metas]
    reference = target(*args, **kwargs)
    candidates = {"extern": lambda: target(*args, **kwargs)}
    try:
        if generated is not None and _mm_applies(target, args):
            candidates["generated"] = generated(target, out_meta, args, kwargs)
        if _im2col_applies(target, args):
            candidates["im2col"] = lambda: conv2d_im2col(*args)
    except (NotImplementedError, ValueError, RuntimeError) as why:  # a template that does not apply
        output_code_log.debug(f"autotune {target}: an alternative does not apply ({why})")
    timings = {}
    for name, run in candidates.items():
        result = run()
        tol = 1e-3 if reference.dtype in (kiln.float32, kiln.bfloat16) else 1e-8
        error = float((result.double() - reference.double()).abs().max()) if reference.numel() else 0.0
        if name != "extern" and not error <= tol * (1.0 + float(reference.double().abs().max())):
            output_code_log.debug(f"autotune {target}: {name} disagrees with the extern kernel; dropped")
            continue
        timings[name] = measure(name, run)
    choice = min(timings, key=timings.get)
    output_code_log.debug(f"autotune {target} {_describe(list(arg_metas))}: " +
                          ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in timings.items()) + f" -> {choice}")
    choices[key] = choice
    _save()
    return choice


def clear_cache():
    """Forgets every choice, in memory and on disk (the next max-autotune compile times again)."""
    global _choices
    _choices = {}
    try:
        os.remove(_cache_path())
    except OSError:
        pass

