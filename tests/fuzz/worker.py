"""The fuzz worker process: generates programs, runs them in PyTorch and every kiln mode, compares.

    python -m fuzz.worker --seed S --start I --end J [--backends eager,aot_eager,inductor]
    python -m fuzz.worker --program FILE.json --only MODE   # one program (the reducer uses it)

It prints one line `@@FUZZ {json}` when it starts a program (with its source) and one when it is
done (with the disagreements per mode), so that the driver knows which program a crash or a hang
belongs to. Everything else kiln or PyTorch prints is ignored by the driver.
"""

import argparse
import dataclasses
import json
import re
import sys
import warnings

from fuzz import compare, gen, run

BACKENDS = ("eager", "aot_eager", "inductor")


def program_seed(seed, index):
    return seed * 1_000_003 + index


def modes(program, backends):
    """(label, backend, grad): kiln eager then each backend, each forward-only and, for programs
    with differentiable inputs, with grad."""
    out = []
    for backend in (None,) + tuple(backends):
        label = backend or "kiln-eager"
        out.append((label, backend, False))
        if program.differentiable:
            out.append((label + "/grad", backend, True))
    return out


PRECISION_ORDER = ("bfloat16", "float16", "float32", "float64")


def lowest_precision(program, refs=()):
    """The least precise float dtype the program computes in: its inputs', any cast's, and (from
    `refs`, PyTorch's eager calls) any op result's, such as the float32 of `T.where(x, x, -1.5)`
    on integers. Only what reaches an output counts: a bfloat16 input the program never reads
    kept the float64 judge from a float32 program (fuzz seed 411, program 5611)."""
    live = without_dead_statements(program)
    read = " ".join(live.body + list(live.returns))
    text = read + " " + " ".join(i.dtype for i in program.inputs if re.search(rf"\b{i.name}\b", read))
    seen = set().union(*(c.computed_in for c in refs))
    if "bfloat16" in text:
        seen.add("bfloat16")
    if "float16" in text or ".half()" in text:
        seen.add("float16")
    if "float32" in text or ".float()" in text:
        seen.add("float32")  # a float64 result computed from float32 values has float32's precision
    lowest = next((d for d in PRECISION_ORDER if d in seen), None)
    return None if lowest == "float64" else lowest


# Backends that drop ops whose results are unused (Dynamo's graph keeps them, so "eager" runs them).
DEAD_CODE_FREE = ("aot_eager", "inductor")


_ASSIGNMENT = re.compile(r"^(v\d+) = (.*)$", re.S)


def without_dead_statements(program):
    """The program less each pure statement whose result nothing later reads, until none is left:
    what AOT and Inductor run. A statement that calls an in-place op (`x.fill_(..)`, `inplace=True`,
    `out=`) or assigns into a tensor is never dropped."""
    body = list(program.body)
    while True:
        for k in range(len(body) - 1, -1, -1):
            m = _ASSIGNMENT.match(body[k])
            if not m or re.search(r"_\(|inplace=True|out=", m.group(2)):
                continue
            later = " ".join(body[k + 1:] + list(program.returns))
            if not re.search(rf"\b{m.group(1)}\b", later):
                del body[k]
                break
        else:
            return dataclasses.replace(program, body=body)


def _only_eager_raised(problem):
    """A forward or backward that raised in PyTorch's eager and not in kiln's compile (torch.compile
    may not raise there either: a version error of a tensor saved before a graph break and changed
    after it, fuzz seed 351, program 3429)."""
    text = problem.split(" ", 1)[1] if problem.startswith("call") else problem
    return text.startswith(("exception: torch ", "backward exception: torch ")) and text.endswith("| kiln succeeded")


def _only_values(problem):
    """A value or gradient that differs (not a dtype, shape, alias or exception)."""
    text = problem.split(" ", 1)[1] if problem.startswith("call") else problem
    return text.startswith("value ") or text.startswith("grad ")


def unsupported(message):
    """kiln lacks the op: a missing attribute (the fuzzer should not generate it)."""
    return message.startswith("AttributeError") and ("module 'kiln" in message or "'Tensor' object" in message)


def check(program, backends, only=None):
    """{mode label: [problems]} for the modes that disagree with PyTorch."""
    import kiln  # noqa: F401 - imported before torch runs, as a user of both would
    import torch  # noqa: F401

    src = program.source()
    calls = len(program.sizes)
    refs = {}
    # Only a returned input (`return x0`) must come back as the same object; PyTorch's compile
    # does not keep the identity of no-op calls (`x.type_as(x)`), only their aliasing.
    names = [i.name for i in program.inputs]
    identity = {k for k, r in enumerate(program.returns) if r in names}
    failures = {}
    for label, backend, grad in modes(program, backends):
        if only is not None and label != only:
            continue
        emit({"event": "mode", "label": label})
        if grad not in refs:
            refs[grad] = run.record(src, "torch", None, grad, calls)
        got = run.record(src, "kiln", backend, grad, calls)
        floor = lowest_precision(program, refs[grad])
        problems = compare.compare(got, refs[grad], grad, identity, floor)
        low_precision = floor in ("float16", "bfloat16")
        values_only = all(_only_values(p) for p in problems)
        eager_raised = problems and all(_only_eager_raised(p) for p in problems)
        if backend is not None and (eager_raised or backend in DEAD_CODE_FREE and values_only and problems and
                                    (low_precision or backend == "inductor")):
            # eager raised in an op whose result nothing reads (an index out of bounds, an integer
            # division by zero); AOT and Inductor drop such ops, in PyTorch's compile as in kiln's.
            # Or a 16-bit float program's values differ: compiled code computes in float32 and
            # rounds once where eager rounds after every op, in PyTorch's compile as in kiln's.
            # Or Inductor's values differ: it computes decomposed, fused ops (layer_norm's mean
            # and variance in one reduction, where eager's kernel runs a cascaded Welford), which
            # round otherwise where cancellation magnifies the last bits, in PyTorch's compile as
            # in kiln's. Or, with any backend, eager raised where Dynamo's compile does not: a
            # graph break's guards ask a view for its grad_fn, which regenerates a stale view
            # history that eager's in-place check reads as a leaf's (fuzz seed 321, program 9173).
            # Then torch.compile itself is the reference (announced: the driver gives this slow
            # step its own time, Note [The reference's own time] in driver.py)
            undead = None
            if eager_raised:
                # PyTorch's eager run of the program without its dead statements is asked first:
                # torch.compile's Inductor indexes a dead index_select unchecked, and an index out
                # of bounds corrupted its heap (fuzz seed 1091, program 1528)
                undead = run.record(without_dead_statements(program).source(), "torch", None, grad, calls)
                if compare.compare(got, undead, grad, identity, floor) == []:
                    continue
            emit({"event": "reference", "label": label})
            compiled_ref = run.record(src, "torch", backend, grad, calls)
            if any("BackendCompilerFailed" in c.message for c in compiled_ref) and undead is not None:
                # torch.compile refuses the program (fill_ of an expanded input, which its
                # functionalization cannot write back, fuzz seed 221, program 4021): PyTorch's
                # eager run of the program without its dead statements is the reference then
                compiled_ref = undead
            options = [refs[grad], compiled_ref]
            if undead is not None:
                # and eager on the program without its dead statements, which is what AOT and
                # Inductor run: torch.compile's own backward may raise where that does not (a
                # version error after `x1.pow_(2)`, fuzz seed 281, program 96)
                options.append(undead)
            problems = compare.compare_either(got, options, grad, identity, floor)
        if problems and floor not in ("float16", "bfloat16") and all(_only_values(p) for p in problems):
            # float32 values where the program magnifies the last bits (`-1.5 / log_softmax(x)` at
            # a row's largest element, whose log-sum-exp is 1 + 1e-4: an ulp of the sum is 1e-3 of
            # the result, and kiln's exp and log are not Sleef's): the judge is PyTorch in float64,
            # and kiln may be off it by at most SLACK times PyTorch float32's own error there, the
            # model zoo's rule (fuzz seed 271, program 7506)
            refs64 = refs.setdefault(("float64", grad), _record_in_float64(src, grad, calls))
            if compare.no_worse_than_torch(got, refs[grad], refs64, grad) == []:
                problems = []
            else:
                # or the values are rounding noise that the float64 run has not (x * s.item() / x's
                # gradient is exactly 0 there): judged by how far PyTorch's own values move when
                # the inputs move by an ulp (fuzz seed 321, programs 2595 and 6940)
                perturbed = refs.setdefault(("perturbed", grad), [
                    run.record(_with_jiggled_inputs(src, trial), "torch", None, grad, calls)
                    for trial in range(PERTURBED_RUNS)])
                if compare.within_rounding_spread(got, refs[grad], perturbed, grad) == []:
                    problems = []
        if problems:
            if all(unsupported(c.message) for c in got if c.exc) and any(c.exc for c in got) \
                    and not any(r.exc for r in refs[grad]):
                problems = ["unsupported: " + next(c.message for c in got if c.exc)]
            failures[label] = problems
    return failures


def _record_in_float64(src, grad, calls):
    """PyTorch's run of the program with float32 as float64 (its inputs, casts and default dtype)."""
    import torch

    src64 = src.replace("T.float32", "T.float64").replace(".float()", ".double()")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return run.record(src64, "torch", None, grad, calls)
    finally:
        torch.set_default_dtype(previous)


PERTURBED_RUNS = 4
_MAKE_TENSOR = "T.tensor(a.tolist(), dtype=dtype)"


def _with_jiggled_inputs(src, trial):
    """The program with every float32 and float64 input multiplied by 1 + (an ulp-sized normal
    noise): PyTorch's spread over such runs is the size of the program's rounding noise."""
    assert _MAKE_TENSOR in src, "gen.py's mk() changed"
    noise = (f"(a * (1 + {{T.float32: 2.0 ** -23, T.float64: 2.0 ** -52}}.get(dtype, 0.0) * "
             f"np.random.default_rng({trial}).standard_normal(np.shape(a))) if a.dtype.kind == 'f' else a)")
    return src.replace(_MAKE_TENSOR, f"T.tensor({noise}.tolist(), dtype=dtype)")


def emit(obj):
    sys.stdout.write("@@FUZZ " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--end", type=int, default=0)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--program", action="append",
                    help="a JSON file holding one Program (the reducer, tests/fuzz/regressions); repeatable")
    ap.add_argument("--only", help="run only this mode label")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    backends = [b for b in args.backends.split(",") if b]
    import torch
    if args.program:
        items = []
        for k, path in enumerate(args.program):
            with open(path) as f:
                items.append((k, gen.Program.from_json(json.load(f))))
    else:
        items = ((i, None) for i in range(args.start, args.end))
    for index, program in items:
        if program is None:
            program = gen.generate(program_seed(args.seed, index), torch)
        emit({"event": "start", "index": index, "program": program.to_json(), "source": program.source()})
        failures = check(program, backends, args.only)
        emit({"event": "done", "index": index, "failures": failures})


if __name__ == "__main__":
    main()
