"""Judges a kiln record (run.Call list) against PyTorch's record of the same program and calls.

What must agree, call by call: the exception class (a builtin one, as a user catches it) or its
absence; every output's kind, dtype, shape and values (dtype-aware tolerances scaled by the
output's magnitude; NaN and inf positions exact); strides where PyTorch promises them (outputs that
are inputs or views of inputs, on dimensions longer than 1); aliasing (which inputs and earlier
outputs an output shares storage with, and returned inputs' identity); every input's value after
the call (mutations, also through views and on bases); requires_grad, the backward's exception
class and every leaf's gradient. Each disagreement is one line "kind: detail".
"""

import numpy as np

# (rtol, atol relative to the largest magnitude of the reference). Compiled code may reassociate
# sums and keeps 16-bit intermediates in float32, so 16-bit floats get several ulps.
TOLERANCES = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (2e-2, 1e-2),
    "bfloat16": (8e-2, 5e-2),
}


def values_close(got, ref, dtype, floor=None):
    """'' when close, else a short description of the worst element. `floor`: a float dtype whose
    tolerance is the least allowed (the lowest precision the program computed in)."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return f"shape {got.shape} != {ref.shape}"
    if got.size == 0:
        return ""
    if dtype not in TOLERANCES:
        bad = got != ref
        if not bad.any():
            return ""
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return f"at {i}: {got[i].item()} != {ref[i].item()}"
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    rtol, atol = TOLERANCES[dtype]
    if floor in TOLERANCES:
        rtol, atol = max(rtol, TOLERANCES[floor][0]), max(atol, TOLERANCES[floor][1])
    finite = np.isfinite(ref)
    scale = max(1.0, float(np.abs(ref[finite]).max())) if finite.any() else 1.0
    same_special = (np.isnan(got) == np.isnan(ref)) & ((got == ref) | ~np.isinf(ref) & ~np.isinf(got))
    with np.errstate(invalid="ignore"):
        near = np.abs(got - ref) <= atol * scale + rtol * np.abs(ref)
    ok = same_special & (near | np.isnan(ref) | np.isinf(ref))
    if ok.all():
        return ""
    i = tuple(int(k) for k in np.argwhere(~ok)[0])
    err = np.abs(got - ref)
    worst = err[np.isfinite(err)].max() if np.isfinite(err).any() else np.nan
    return f"at {i}: {got[i].item()!r} != {ref[i].item()!r} (max finite abs err {worst:.3g})"


def _strides_matter(shape, got, ref):
    return [i for i, n in enumerate(shape) if n > 1 and got[i] != ref[i]]


def _integer_tensor_in_graph(message):
    return "INTERNAL ASSERT FAILED" in message or "Autograd not support dtype" in message or \
        "an integer tensor requires grad]" in message  # run.py's INTEGER_REQUIRES_GRAD


def compare_call(got, ref, grad, identity=None, floor=None):
    problems = []
    # PyTorch failing because an integer tensor joined its autograd graph is a PyTorch bug, not an
    # oracle: after `int_tensor[0] = float_tensor_requiring_grad` it gives the integer tensor a
    # grad_fn and marks what is computed from it as requiring grad, then fails its own internal
    # assert in backward (fuzz seed 221, program 9207), refuses an op on it in the forward
    # (seed 231, program 142), or refuses an in-place op on the integer "leaf that requires grad"
    # (seed 1371, program 1030). kiln keeps integer tensors out of autograd. Only gradients are
    # skipped; the same program's forward-only run compares the forward with nothing skipped.
    if grad and _integer_tensor_in_graph(ref.message):
        return []
    if grad and _integer_tensor_in_graph(ref.bwd_message):
        grad = False
    if got.exc and not ref.exc and grad and got.exc == ref.bwd_exc:
        return []  # compiled code traces the backward with the forward: the same error, earlier
    if ref.exc or got.exc:
        if ref.exc != got.exc:
            problems.append(f"exception: torch {ref.message or 'succeeded'} | kiln {got.message or 'succeeded'}")
        return problems
    if len(got.outs) != len(ref.outs):
        return [f"outputs: {len(got.outs)} != {len(ref.outs)}"]
    for k, (g, r) in enumerate(zip(got.outs, ref.outs)):
        if r.dtype == "" or g.dtype == "":
            if (r.dtype == "") != (g.dtype == ""):
                problems.append(f"kind out{k}: kiln {'scalar' if g.dtype == '' else 'tensor'}")
            elif type(g.scalar) is not type(r.scalar):
                problems.append(f"scalar type out{k}: {type(g.scalar).__name__} != {type(r.scalar).__name__}")
            elif values_close(np.array(g.scalar, dtype=np.float64), np.array(r.scalar, dtype=np.float64), "float64"):
                problems.append(f"value out{k}: {g.scalar!r} != {r.scalar!r}")
            continue
        if g.dtype != r.dtype:
            problems.append(f"dtype out{k}: {g.dtype} != {r.dtype}")
            continue
        if g.shape != r.shape:
            problems.append(f"shape out{k}: {g.shape} != {r.shape}")
            continue
        why = values_close(g.values, r.values, r.dtype, floor)
        if why:
            problems.append(f"value out{k} ({r.dtype}{list(r.shape)}): {why}")
        if (r.aliases_input or r.is_input) and _strides_matter(r.shape, g.stride, r.stride):
            problems.append(f"stride out{k} (a view of an input): {g.stride} != {r.stride}")
        if (identity is None or k in identity) and g.is_input != r.is_input:
            problems.append(f"identity out{k}: is input {g.is_input} != {r.is_input}")
        if g.aliases_input != r.aliases_input:
            problems.append(f"alias out{k}: shares storage with inputs {g.aliases_input} != {r.aliases_input}")
        if g.aliases_output != r.aliases_output:
            problems.append(f"alias out{k}: shares storage with outputs {g.aliases_output} != {r.aliases_output}")
        # An integer or bool output's flag is not compared: PyTorch sets it after fill_,
        # masked_fill_, index_fill_ or index_put_ of a 0-d value that requires grad into an integer
        # tensor (those in-place ops skip the dtype check copy_ makes), though no gradient can
        # flow there (a backward raises "Autograd not support dtype"); kiln never lets an integer
        # tensor require grad.
        if grad and g.requires_grad != r.requires_grad and r.dtype.startswith(("float", "bfloat", "complex")):
            problems.append(f"requires_grad out{k}: {g.requires_grad} != {r.requires_grad}")
    for what, gs, rs in (("input", got.inputs_after, ref.inputs_after), ("base", got.bases_after, ref.bases_after)):
        for k, ((gd, g), (rd, r)) in enumerate(zip(gs, rs)):
            why = f"dtype {gd} != {rd}" if gd != rd else values_close(g, r, rd, floor)
            if why:
                problems.append(f"mutation {what}{k}: {why}")
    if grad:
        if got.bwd_exc != ref.bwd_exc:
            problems.append(f"backward exception: torch {ref.bwd_message or 'succeeded'} | kiln {got.bwd_message or 'succeeded'}")
        else:
            for k, (g, r) in enumerate(zip(got.grads, ref.grads)):
                if (g is None) != (r is None):
                    problems.append(f"grad leaf{k}: {'None' if g is None else 'set'} != {'None' if r is None else 'set'}")
                elif g is not None:
                    why = f"dtype {g[0]} != {r[0]}" if g[0] != r[0] else values_close(g[1], r[1], r[0], floor)
                    if why:
                        problems.append(f"grad leaf{k}: {why}")
    return problems


SLACK = 8.0  # tests/models/harness.py's: kiln's float32 error may be this many times PyTorch's


def _error(values, want):
    """Largest absolute difference from `want` relative to want's largest finite magnitude."""
    values, want = np.asarray(values, dtype=np.float64), np.asarray(want, dtype=np.float64)
    finite = np.isfinite(want) & np.isfinite(values)
    if not finite.any():
        return 0.0
    scale = max(float(np.abs(want[finite]).max()), 1e-30)
    return float(np.abs(values[finite] - want[finite]).max()) / scale


def no_worse_than_torch(got_calls, ref_calls, ref64_calls, grad, slack=SLACK):
    """Problems where kiln's float32 values or gradients are further from PyTorch's float64 run
    than `slack` times PyTorch float32's own (as tests/models/harness.py judges whole models), or
    where either float32 run's NaN and infinity positions differ from the other's."""
    problems = []
    for i, (g, r, r64) in enumerate(zip(got_calls, ref_calls, ref64_calls)):
        # a backward that raises in both PyTorch runs (a saved value written in place) leaves the
        # forward values to judge (fuzz seed 1081, program 3829)
        if r64.exc or r.exc or g.exc or len(r64.outs) != len(r.outs) or (grad and r64.bwd_exc != r.bwd_exc):
            problems.append(f"call{i}: no float64 reference")
            continue
        pairs = [(f"value out{k}", go.values, ro.values, r64o.values)
                 for k, (go, ro, r64o) in enumerate(zip(g.outs, r.outs, r64.outs)) if ro.dtype == "float32"]
        if grad:
            pairs += [(f"grad leaf{k}", gg[1], rg[1], r64g[1])
                      for k, (gg, rg, r64g) in enumerate(zip(g.grads, r.grads, r64.grads))
                      if gg is not None and rg is not None and r64g is not None and rg[0] == "float32"]
        for what, kv, tv, t64v in pairs:
            kv, tv, t64v = (np.asarray(v, dtype=np.float64) for v in (kv, tv, t64v))
            if kv.shape != tv.shape or tv.shape != t64v.shape:
                problems.append(f"call{i} {what}: shapes differ")
                continue
            if not (np.array_equal(np.isnan(kv), np.isnan(tv)) and np.array_equal(np.isinf(kv), np.isinf(tv))):
                problems.append(f"call{i} {what}: NaN or infinity positions differ")
                continue
            own, err = _error(tv, t64v), _error(kv, t64v)
            if err > max(TOLERANCES["float32"][0], slack * own):
                problems.append(f"call{i} {what}: error {err:.3g} against float64, PyTorch float32's {own:.3g}")
    return problems


def _float_pairs(got, ref, perturbed, grad):
    """(what, kiln, torch, [torch jiggled, ...]) for one call's float values, scalars and gradients;
    None for a jiggled run that has no such float."""
    def scalar(c, k):
        return c.outs[k].scalar if isinstance(c.outs[k].scalar, float) else None

    def leaf_grad(c, k):
        return None if c.grads[k] is None else c.grads[k][1]

    pairs = []
    for k, (g, r) in enumerate(zip(got.outs, ref.outs)):
        if r.dtype == "" and isinstance(r.scalar, float) and isinstance(g.scalar, float):
            pairs.append((f"value out{k}", g.scalar, r.scalar, [scalar(p, k) for p in perturbed]))
        elif r.dtype in ("float32", "float64") and g.dtype == r.dtype:
            pairs.append((f"value out{k}", g.values, r.values, [p.outs[k].values for p in perturbed]))
    if grad:
        for k, (g, r) in enumerate(zip(got.grads, ref.grads)):
            if g is not None and r is not None and r[0] in ("float32", "float64"):
                pairs.append((f"grad leaf{k}", g[1], r[1], [leaf_grad(p, k) for p in perturbed]))
    return pairs


def _special_class(v):
    """Each element's kind: 0 finite, 1 NaN, 2 +inf, 3 -inf."""
    return np.select([np.isnan(v), np.isposinf(v), np.isneginf(v)], [1, 2, 3], 0)


def within_rounding_spread(got_calls, ref_calls, perturbed_runs, grad, slack=SLACK):
    """Problems where a kiln value is further from PyTorch's than the usual tolerance plus `slack`
    times how far PyTorch's own value there moves when the float inputs move by an ulp
    (`perturbed_runs`: PyTorch's records of the program with jiggled inputs). Where an output is
    rounding noise (x * s / x's gradient: s / x - x * s / x**2, exactly 0 in float64, 1e-5 in float32
    after a differently ordered sum s) it is judged by that noise's size, element by element. An
    element that PyTorch's jiggled runs turn from finite to NaN or infinite (0 / 0 where a mean of
    normalized values rounds to exactly 0) is noise whatever its value; elsewhere NaN and infinity
    positions must agree."""
    problems = []
    for i, (g, r) in enumerate(zip(got_calls, ref_calls)):
        runs = [p[i] for p in perturbed_runs]
        if r.exc or g.exc or len(g.outs) != len(r.outs) or any(
                p.exc or p.bwd_exc != r.bwd_exc or len(p.outs) != len(r.outs) or len(p.grads) != len(r.grads)
                for p in runs):
            problems.append(f"call{i}: no perturbed reference")
            continue
        for what, kv, tv, pvs in _float_pairs(g, r, runs, grad):
            if any(v is None for v in pvs):
                problems.append(f"call{i} {what}: no perturbed reference")
                continue
            kv, tv = np.asarray(kv, dtype=np.float64), np.asarray(tv, dtype=np.float64)
            pvs = [np.asarray(v, dtype=np.float64) for v in pvs]
            if kv.shape != tv.shape or any(v.shape != tv.shape for v in pvs):
                problems.append(f"call{i} {what}: shapes differ")
                continue
            kind = _special_class(tv)
            noise = np.any([_special_class(v) != kind for v in pvs], axis=0)
            finite = (kind == 0) & ~noise
            with np.errstate(invalid="ignore"):
                spread = np.max([np.abs(v - tv) for v in pvs], axis=0)
                rtol, atol = TOLERANCES["float32"]
                scale = max(1.0, float(np.abs(tv[finite]).max())) if finite.any() else 1.0
                near = np.abs(kv - tv) <= atol * scale + rtol * np.abs(tv) + slack * spread
            bad = ~noise & ((_special_class(kv) != kind) | finite & ~near)
            if bad.any():
                j = tuple(int(x) for x in np.argwhere(bad)[0]) if bad.ndim else ()
                problems.append(f"call{i} {what}: at {j}: {kv[j]!r} != {tv[j]!r}, beyond {slack:g}x "
                                f"PyTorch's own spread {spread[j]:.3g} under an ulp of input noise")
    return problems


def compare_either(got_calls, ref_options, grad, identity=None, floor=None):
    """Problems of the calls that agree with none of the references in `ref_options` (each a list
    of calls), as found against the first: a compiled call may match eager (a dead op's shape
    check in the trace raises as eager does) and the next call PyTorch's compile (the dead op's
    out-of-range index is never read), fuzz seed 191, program 23897."""
    problems = []
    for i, g in enumerate(got_calls):
        found = [compare_call(g, refs[i], grad, identity, floor) for refs in ref_options]
        if all(found):
            problems += [f"call{i} {p}" if len(got_calls) > 1 else p for p in found[0]]
    return problems


def compare(got_calls, ref_calls, grad, identity=None, floor=None):
    """Problems over every call; `identity`: the outputs that must be their input itself; `floor`:
    see values_close (compiled code keeps a bfloat16 intermediate in float32, so a float64 result
    computed from one differs from eager's in the bfloat16 ulp, in PyTorch's compile too)."""
    problems = []
    for i, (g, r) in enumerate(zip(got_calls, ref_calls)):
        problems += [f"call{i} {p}" if len(ref_calls) > 1 else p
                     for p in compare_call(g, r, grad, identity, floor)]
    return problems
