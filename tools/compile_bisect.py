"""compile_bisect: which backend, graph and compiler part make a script's kiln.compile go wrong.

    python tools/compile_bisect.py script.py [script args...]

Runs the script in child processes, steering every kiln.compile in it through environment
variables (kiln._dynamo.compiler_bisector.backend_from_environment): first with kiln.compile
doing nothing (the eager reference), then under each backend of compiler_bisector.BACKENDS. A run
fails when it exits non-zero while the reference did not, or when its output differs from the
reference's (numbers compared with --rtol/--atol). Then the first failing graph, then the
subsystem application (pass, fusion, lowering, decomposition) as kiln._dynamo.bisect does, and a
last run writes the minimal repro of that graph into --repro-dir. Exit status: 0 when every
backend agrees with eager, 1 when one does not. (Named so, not bisect.py, which would shadow the
standard library's module of that name for scripts run from tools/.)
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_REPO, "python"))

from kiln._dynamo.compiler_bisector import BACKENDS, SUBSYSTEMS  # noqa: E402
from kiln._inductor.fx_passes import POST_GRAD_PASSES  # noqa: E402

PASSES = [name for name, _, _ in POST_GRAD_PASSES]
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


class Runner:
    def __init__(self, command, rtol, atol, timeout):
        self.command, self.rtol, self.atol, self.timeout = command, rtol, atol, timeout
        self.runs = 0

    def run(self, backend, graph=None, subsystem=None, limit=None, record=False, repro=None):
        env = dict(os.environ, KILN_BISECT_BACKEND=backend)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(_REPO, "python"), env.get("PYTHONPATH")]))
        for key, value in (("KILN_BISECT_GRAPH", graph), ("KILN_BISECT_SUBSYSTEM", subsystem),
                           ("KILN_BISECT_LIMIT", limit), ("KILN_BISECT_REPRO", repro)):
            if value is not None:
                env[key] = str(value)
        record_path = None
        if record:
            fd, record_path = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            env["KILN_BISECT_RECORD"] = record_path
        self.runs += 1
        try:
            done = subprocess.run(self.command, env=env, capture_output=True, text=True, timeout=self.timeout)
            rc, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = -1, "", "timed out"
        recorded = None
        if record_path:
            try:
                with open(record_path) as f:
                    recorded = json.load(f)
            except (OSError, ValueError):
                pass
            os.unlink(record_path)
        return rc, out, err, recorded

    def failure(self, reference, result):
        """None when a run agrees with the reference run, else why not."""
        rc, out, err = result[:3]
        if rc != reference[0]:
            last = (err.strip().splitlines() or ["(no stderr)"])[-1]
            return f"crash: exit status {rc} ({last})"
        return self.differs(reference[1], out)

    def differs(self, expected, actual):
        a, b = _NUMBER.split(expected), _NUMBER.split(actual)
        if a != b:
            return "accuracy: the output's text differs"
        for x, y in zip(_NUMBER.findall(expected), _NUMBER.findall(actual)):
            x, y = float(x), float(y)
            if not (x == y or abs(x - y) <= self.atol + self.rtol * abs(x) or (x != x and y != y)):
                return f"accuracy: {y!r} where eager printed {x!r}"
        return None


def bisect(runner, repro_dir):
    reference = runner.run("none")
    print(f"eager reference: exit status {reference[0]}")
    for backend in BACKENDS:
        result = runner.run(backend, record=True)
        failure = runner.failure(reference, result)
        print(f"{backend:28s} {'FAILS: ' + failure if failure else 'agrees with eager'}")
        if failure:
            break
    else:
        print("every backend agrees with eager")
        return 0
    graphs = (result[3] or {}).get("graphs", 0)
    graph = next((i for i in range(graphs) if runner.failure(reference, runner.run(backend, graph=i))), None)
    if graph is None:
        print(f"no graph of {graphs} fails alone")
        return 1
    print(f"graph {graph} of {graphs} (in capture order) fails alone")

    def passes(subsystem, limit):
        return runner.failure(reference, runner.run(backend, graph, subsystem, limit)) is None

    found = None
    for subsystem in SUBSYSTEMS.get(backend, ()):
        if subsystem == "passes":
            name = next((p for p in PASSES if passes("passes", p)), None)
            if name:
                found = f"passes: the pass {name}"
                break
            continue
        if not passes(subsystem, 0):
            continue
        recorded = runner.run(backend, graph, subsystem, "", record=True)
        applied = (recorded[3] or {}).get("applied", [])
        if runner.failure(reference, recorded) is None or not applied:
            continue
        good, bad = 0, len(applied)
        while bad - good > 1:
            middle = (good + bad) // 2
            good, bad = (middle, bad) if passes(subsystem, middle) else (good, middle)
        found = f"{subsystem}, application {bad}: {applied[bad - 1]}"
        break
    print(f"subsystem: {found}" if found else "no subsystem of the backend turns the failure off")
    result = runner.run(backend, graph, repro=os.path.abspath(repro_dir))
    written = [line for line in result[1].splitlines() if line.startswith("kiln bisect:")]
    print("\n".join(written) if written else "no repro written (the graph passed when run alone)")
    print(f"({runner.runs} runs)")
    return 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("script", help="the Python script to run (it calls kiln.compile)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--repro-dir", default="kiln_bisect", help="where the minimal repro goes (repro.py)")
    options = parser.parse_args(argv)
    runner = Runner([sys.executable, options.script, *options.args], options.rtol, options.atol, options.timeout)
    return bisect(runner, options.repro_dir)


if __name__ == "__main__":
    sys.exit(main())
