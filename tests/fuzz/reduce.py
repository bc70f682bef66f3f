"""Shrinks a failing fuzz program: drops statements, returned values and unused inputs while the
same failure (same mode, same kind of problem) persists, each try in a fresh worker subprocess.

Greedy, one element at a time, until nothing more can go (ddmin's last stage): programs are under a
dozen statements, so the quadratic worst case is a few dozen runs of one mode.
"""

import copy
import re

from fuzz import driver


def signature(result, mode):
    """What must stay the same while reducing: the status and the first problem's kind, and for an
    exception disagreement both sides' exception classes (so that a cut leaving a name undefined,
    a NameError in PyTorch, never counts as the same failure). None when `mode` passed."""
    if result is None:
        return None
    problems = result["failures"].get(mode)
    if not problems:
        return None
    p = re.sub(r"^call\d+ ", "", problems[0])
    kind = p.split(":")[0].split(" ")[0]
    if kind in ("exception", "backward"):
        sides = re.match(r".*?exception: torch (.*?) \| kiln (.*)", p)
        if sides:
            return result["status"], kind, sides.group(1).split(":")[0], sides.group(2).split(":")[0]
    return result["status"], kind


def _names(text):
    return set(re.findall(r"\b[xv]\d+\b", text))


def _candidates(prog):
    """Smaller variants of the program (as JSON dicts), biggest cuts first."""
    body, returns = prog["body"], prog["returns"]
    for i in reversed(range(len(body))):
        p = copy.deepcopy(prog)
        del p["body"][i]
        yield p
    if len(returns) > 1:
        for i in range(len(returns)):
            p = copy.deepcopy(prog)
            del p["returns"][i]
            yield p
    used = _names("\n".join(body) + " " + " ".join(returns))
    used |= {i["of"] for i in prog["inputs"] if i["of"]}
    for i, inp in enumerate(prog["inputs"]):
        if inp["name"] not in used:
            p = copy.deepcopy(prog)
            del p["inputs"][i]
            yield p


def reduce(result, mode, backends, timeout=120, budget=30):
    """The smallest program found that still fails like `result` does in `mode` (a result dict)."""
    want = signature(result, mode)
    best = result
    runs = 0
    progress = True
    while progress and runs < budget:
        progress = False
        for cand in _candidates(best["program"]):
            if runs >= budget:
                break
            runs += 1
            got = driver.run_program(cand, mode, backends, timeout)
            if signature(got, mode) == want:
                best = got
                progress = True
                break
    return best
