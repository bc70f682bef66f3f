"""tools/fuzz.py: the differential fuzzer (issue 16), kiln eager and compiled against PyTorch 2.13.

    PYTHONPATH=python ~/.cache/kiln/venv-py3.11/bin/python tools/fuzz.py --n 200 --seed 0 --out /tmp/fuzz

Generates N random programs (tests/fuzz/gen.py), runs each eagerly in kiln and under
kiln.compile(backend=B) for B in eager, aot_eager, inductor, forward and backward, in worker
subprocesses (a crash or a hang is a failure), compares with PyTorch, prints one summary line and
writes each failing program's source, problems and (with --reduce) a reduced repro to --out.
See tests/fuzz/README.md.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from fuzz import driver, reduce as reducer  # noqa: E402
from fuzz.worker import BACKENDS  # noqa: E402


def summarize(results, elapsed):
    status = collections.Counter(r["status"] for r in results)
    by_mode = collections.Counter()
    exceptions = unsupported = 0
    for r in results:
        if r["status"] != "mismatch":
            continue
        for mode, problems in r["failures"].items():
            if all(p.startswith("unsupported") for p in problems):
                unsupported += 1
                continue
            by_mode[mode.split("/")[0]] += 1
            exceptions += any("exception" in p.split(":")[0] for p in problems)
    modes = ", ".join(f"{m} {by_mode[m]}" for m in ["kiln-eager", *BACKENDS])
    return (f"fuzz: {len(results)} programs in {elapsed:.0f}s, {status['ok']} ok, {status['crash']} crashes, "
            f"{status['hang']} hangs, {status['error']} fuzzer errors, mismatching modes: {modes}; exception disagreements {exceptions}, "
            f"unsupported {unsupported}")


def cause(problem):
    """A failure's cause for grouping: the problem with call numbers, indices, values and names cut."""
    p = re.sub(r"^call\d+ ", "", problem)
    if p.startswith(("exception", "backward exception", "unsupported", "crash", "hang")):
        p = re.sub(r"\b(arg|buf|in_ptr|input |output |leaf|out)\d+", r"\1N", p)
        p = re.sub(r"\[[^\]]*\]|\([^)]*\)|'[^']*'|\d+", "_", p)
        return p[:160]
    return p.split(":")[0].split(" ")[0] + " " + ("grad" if p.startswith("grad") else "")


def group(results):
    """{cause: [(index, modes)]} over every failing program's first problem in each mode."""
    groups = collections.defaultdict(list)
    for r in results:
        seen = {}
        for mode, problems in r["failures"].items():
            seen.setdefault(cause(problems[0]), []).append(mode)
        for c, modes in seen.items():
            groups[c].append((r["index"], modes))
    return groups


def write_causes(out, results):
    groups = sorted(group(results).items(), key=lambda kv: -len(kv[1]))
    with open(os.path.join(out, "causes.txt"), "w") as f:
        for c, items in groups:
            modes = collections.Counter(m.split("/")[0] + ("/grad" if "/" in m else "") for _, ms in items for m in ms)
            f.write(f"{len(items):5d}  {c}\n       modes {dict(modes)}\n       programs {[i for i, _ in items[:8]]}\n")


def write_failure(out, r, reduced=None):
    name = f"{r['status']}-{r['index']:06d}.py"
    lines = [f"# {r['status']}: program {r['index']}"]
    for mode, problems in r["failures"].items():
        lines += [f"#   {mode}: {p}" for p in problems[:6]]
    if r["detail"]:
        lines += ["#   " + l for l in r["detail"].strip().splitlines()[-8:]]
    text = "\n".join(lines) + "\n"
    if reduced is not None and reduced is not r:
        text += "# reduced:\n" + reduced["source"] + "\n# original:\n"
    with open(os.path.join(out, name), "w") as f:
        f.write(text + r["source"])
    with open(os.path.join(out, name[:-3] + ".json"), "w") as f:
        json.dump({k: r[k] for k in ("index", "status", "failures", "program")}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100, help="programs to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="index of the first program")
    ap.add_argument("--out", default="fuzz-out", help="directory for failing programs")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--jobs", type=int, default=1, help="worker processes in parallel")
    ap.add_argument("--timeout", type=int, default=120, help="seconds one program may run")
    ap.add_argument("--reduce", action="store_true", help="shrink each failure (slow)")
    ap.add_argument("--regroup", action="store_true", help="only rewrite causes.txt from --out's results.jsonl")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    backends = [b for b in args.backends.split(",") if b]
    if args.regroup:
        with open(os.path.join(args.out, "results.jsonl")) as f:
            write_causes(args.out, [json.loads(line) for line in f])
        return 0
    # PyTorch's Inductor (the torch.compile reference) compiles kernels in a pool of one process
    # per core; each of --jobs workers starting its own pool oversubscribed the machine
    # jobs-fold (Note [The reference's own time] in tests/fuzz/driver.py): share the cores.
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 1) // args.jobs)))
    start, end = args.start, args.start + args.n
    t0 = time.time()
    log = open(os.path.join(args.out, "results.jsonl"), "a")

    def on_result(r):
        log.write(json.dumps({"index": r["index"], "status": r["status"], "failures": r["failures"]}) + "\n")
        log.flush()
        if r["status"] != "ok":  # written at once, so that an interrupted run keeps its repros
            write_failure(args.out, r)
            print(f"program {r['index']}: {r['status']} {json.dumps(r['failures'])[:300]}", flush=True)

    chunks = [(s, min(s + max(1, args.n // (args.jobs * 4)), end)) for s in
              range(start, end, max(1, args.n // (args.jobs * 4)))]
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futs = [pool.submit(driver.run_range, args.seed, a, b, backends, args.timeout, on_result) for a, b in chunks]
        for fut in futs:
            results += fut.result()
    results.sort(key=lambda r: r["index"])
    for r in results:
        if r["status"] != "ok" and args.reduce:
            mode = next(iter(r["failures"]))
            write_failure(args.out, r, reducer.reduce(r, mode, backends, args.timeout))
    write_causes(args.out, results)
    line = summarize(results, time.time() - t0)
    print(line)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(line + "\n")
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
