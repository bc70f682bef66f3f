"""Bad input, family by family: kiln raises the exception class PyTorch raises, with a message
that names the problem; the process lives on and no input is changed."""

import numpy as np
import pytest

import kiln
from conftest import assert_raises_like_torch, requires_torch, torch

pytestmark = requires_torch


def inputs(lib):
    """Fresh inputs for one case: the same values for kiln and torch."""
    f = lambda *s: lib.tensor(np.arange(np.prod(s), dtype=np.float32).reshape(s).tolist())  # noqa: E731
    return {
        "a": f(2, 3), "b": f(4), "c": f(3, 2), "v": f(3), "i": lib.tensor([[1, 2], [3, 4]]),
        "bool": lib.tensor([True, False]), "s": lib.tensor(1.5), "e": lib.zeros(0, 3),
    }


# (family, description, call). `call(lib, t)` gets the library and a dict of its inputs.
CASES = [
    ("binary", "broadcast mismatch", lambda lib, t: t["a"] + t["b"]),
    ("binary", "in-place broadcast into smaller", lambda lib, t: t["v"].add_(t["a"])),
    ("binary", "in-place float into int", lambda lib, t: t["i"].add_(0.5)),
    ("binary", "sub of bools", lambda lib, t: t["bool"] - t["bool"]),
    ("binary", "bitwise on floats", lambda lib, t: t["a"] & t["a"]),
    ("binary", "bitwise on floats, shapes that do not broadcast", lambda lib, t: t["a"] & t["b"]),  # shape first
    ("binary", "sub of a float and a bool", lambda lib, t: t["b"][:2] - t["bool"]),
    ("binary", "sub of a bool scalar", lambda lib, t: t["a"] - True),
    ("binary", "rsub of a bool", lambda lib, t: 1 - t["bool"]),
    ("binary", "in-place sub of bools", lambda lib, t: t["bool"].sub_(t["bool"])),
    ("args", "number beside a tensor bound", lambda lib, t: lib.clamp(t["v"], 0.5, t["v"])),
    ("args", "0-d bound requiring grad as a Scalar", lambda lib, t: lib.clamp(t["v"], t["s"].requires_grad_(), 0.5)),
    ("args", "1-d tensor as a Scalar", lambda lib, t: lib.full((2,), t["v"])),
    ("linalg", "baddbmm of 0-d batches", lambda lib, t: lib.baddbmm(t["s"], t["s"], t["s"])),
    ("linalg", "baddbmm of 1-d batches", lambda lib, t: lib.baddbmm(t["s"], t["v"], t["v"])),
    ("index", "index_select out of range on dim 0", lambda lib, t: t["a"].index_select(0, lib.tensor([2]))),
    ("index", "index_select out of range on dim 1", lambda lib, t: t["a"].index_select(1, lib.tensor([-1]))),
    ("index", "index_select out of range on the last of 3 dims",
     lambda lib, t: t["a"].unsqueeze(0).index_select(2, lib.tensor([3]))),
    ("autograd", "a chunk used after its base changed in place",
     lambda lib, t: (lambda b: (b.chunk(2)[0], b.mul_(2))[0].t())(t["a"].requires_grad_() * 1)),
    ("binary", "string operand", lambda lib, t: lib.add(t["a"], "x")),
    ("binary", "float alpha for ints", lambda lib, t: lib.add(t["i"], t["i"], alpha=0.5)),
    ("binary", "bad rounding mode", lambda lib, t: lib.div(t["a"], t["a"], rounding_mode="round")),
    ("binary", "out with bad dtype", lambda lib, t: lib.add(t["a"], t["a"], out=lib.empty(0, dtype=lib.int64))),
    ("unary", "neg of bool", lambda lib, t: t["bool"].neg()),
    ("unary", "bitwise_not of float", lambda lib, t: ~t["a"]),
    ("unary", "in-place sqrt of int", lambda lib, t: t["i"].sqrt_()),
    ("unary", "unexpected keyword", lambda lib, t: lib.exp(t["a"], foo=1)),
    ("reduction", "dim out of range", lambda lib, t: t["a"].sum(2)),
    ("reduction", "repeated dim", lambda lib, t: t["a"].sum((0, 0))),
    ("reduction", "mean of ints", lambda lib, t: t["i"].mean()),
    ("reduction", "dim of wrong type", lambda lib, t: t["a"].sum("x")),
    ("view", "view with wrong numel", lambda lib, t: t["a"].view(4, 2)),
    ("view", "view of non-contiguous", lambda lib, t: t["a"].t().view(6)),
    ("view", "two inferred dims", lambda lib, t: t["a"].view(-1, -1)),
    ("view", "permute wrong length", lambda lib, t: t["a"].permute(0)),
    ("view", "permute repeated dim", lambda lib, t: t["a"].permute(0, 0)),
    ("view", "transpose dim out of range", lambda lib, t: t["a"].transpose(0, 2)),
    ("view", "expand to smaller", lambda lib, t: t["a"].expand(2, 2)),
    ("view", "select out of range", lambda lib, t: t["a"].select(1, 3)),
    ("view", "narrow past the end", lambda lib, t: t["a"].narrow(1, 2, 2)),
    ("view", "squeeze dim out of range", lambda lib, t: t["a"].squeeze(3)),
    ("view", "unsqueeze dim out of range", lambda lib, t: t["a"].unsqueeze(4)),
    ("view", "diagonal of 1-D", lambda lib, t: t["v"].diagonal()),
    ("view", "unfold too large", lambda lib, t: t["v"].unfold(0, 4, 1)),
    ("view", "as_strided out of bounds", lambda lib, t: t["v"].as_strided((3,), (2,))),
    ("view", "flatten bad range", lambda lib, t: t["a"].flatten(1, 0)),
    ("view", "t of 3-D", lambda lib, t: t["a"].unsqueeze(0).t()),
    ("index", "integer index out of range", lambda lib, t: t["a"][2]),
    ("index", "too many indices", lambda lib, t: t["a"][0, 0, 0]),
    ("index", "negative step", lambda lib, t: t["a"][::-1]),
    ("creation", "negative size", lambda lib, t: lib.empty(-2)),
    ("creation", "arange zero step", lambda lib, t: lib.arange(0, 5, 0)),
    ("creation", "arange wrong direction", lambda lib, t: lib.arange(5, 0, 1)),
    ("creation", "full with bad size", lambda lib, t: lib.full("x", 1.0)),
    ("creation", "ragged nested list", lambda lib, t: lib.tensor([[1, 2], [3]])),
    ("creation", "strings as data", lambda lib, t: lib.tensor(["a"])),
    ("creation", "bad device string", lambda lib, t: lib.zeros(2, device="tpu")),
    ("creation", "bad dtype", lambda lib, t: lib.zeros(2, dtype="float32")),
    ("conversion", "item of many", lambda lib, t: t["a"].item()),
    ("conversion", "bool of many", lambda lib, t: bool(t["a"])),
    ("conversion", "len of scalar", lambda lib, t: len(t["s"])),
    ("conversion", "iterate a scalar", lambda lib, t: iter(t["s"])),
    ("conversion", "float index", lambda lib, t: [1, 2][t["s"]]),
    ("copy", "copy_ from larger", lambda lib, t: t["v"].copy_(t["a"])),
    ("copy", "copy_ with mismatch", lambda lib, t: t["a"].copy_(t["b"])),
]


@pytest.mark.parametrize("family,desc,call", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_bad_input_raises_like_torch(family, desc, call):
    assert_raises_like_torch(desc, call, inputs)


# --- size arithmetic (issue 16) -----------------------------------------------------------------
# Sizes whose element or byte count overflows int64 used to wrap: kiln.empty(2**62) "succeeded"
# with a small block and indexing it segfaulted; kiln.zeros(2**62) segfaulted at once. Every case
# must raise RuntimeError where PyTorch does (with its message where it has one) and work where
# PyTorch works. kiln runs in a subprocess so that a crash is a failure, not the end of the run.
SIZE_CASES = [
    "lib.empty(2**62)",
    "lib.zeros(2**62)",
    "lib.ones(2**62)",
    "lib.full((2**62,), 1.0)",
    "lib.arange(2**62)",
    "lib.empty(2**31, 2**31, 4)",
    "lib.empty(2**32, 2**32)",
    "lib.empty(4, 2**62, 0, 4)",
    "lib.empty(2**62, 0, 4, 4)",
    "lib.empty(2**62, device='meta')",
    "lib.empty(-1)",
    "lib.full((2, -1), 1.0)",
    "lib.empty_strided((2**62,), (2,))",
    "lib.empty_strided((2, 3), (-1, 1))",
    "lib.empty_strided((2,), (-1,))",
    "lib.empty_strided((2, -3), (1, 1))",
    "lib.ones(1).new_empty(2**62)",
    "lib.ones(1).new_empty((2**62, 4))",
    "lib.ones(1).new_empty(-2)",
    "lib.ones(2).expand(2**62, 2)",
    "lib.ones(2).expand(2**31, 2**31, 2)",
    "lib.ones(0).view(2**62, 2**62, 0)",
    "lib.ones(0).reshape(4, 2**62, 0, 4)",
    "lib.ones(1).expand(2**62).reshape(2**61, 2)",
    "lib.ones(1).expand(2**62).contiguous()",
    "lib.ones(4).as_strided((2**62,), (1,))",
    "lib.ones(4).as_strided((2, 2), (2**62, 2**62))",
    "lib.ones(4).as_strided((2,), (-1,))",
    "lib.ones(4).as_strided((2,), (1,), -1)",
    "lib.cat([lib.ones(1).expand(2**61), lib.ones(1).expand(2**61)])",
    "lib.ones(4).repeat(2**62)",
    "lib.ones(2, 2).repeat(2**62, 2**62)",
]
_SIZE_RUNNER = """
import json, sys
import kiln as lib
out = []
for case in json.loads(sys.argv[1]):
    try:
        r = eval(case)
        out.append(["ok", list(r.shape), list(r.stride())])
    except Exception as e:
        out.append([type(e).__name__, str(e)])
print(json.dumps(out))
"""


def _kiln_in_subprocess(runner, cases):
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(__file__)), "python"))
    r = subprocess.run([sys.executable, "-c", runner, json.dumps(cases)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"kiln died (exit {r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_size_overflow_raises_like_torch():
    got = _kiln_in_subprocess(_SIZE_RUNNER, SIZE_CASES)
    for case, have in zip(SIZE_CASES, got):
        try:
            r = eval(case, {"lib": torch})
            want = ["ok", list(r.shape), list(r.stride())]
        except Exception as e:
            want = [type(e).__name__, str(e)]
        if want[0] == "ok":
            assert have == want, f"{case}: kiln {have}, torch {want}"
            continue
        assert have[0] != "ok", f"{case}: kiln succeeded with {have}; torch raised {want}"
        assert have[0] == "RuntimeError", f"{case}: kiln raised {have}; torch raised {want}"
        if "Storage size calculation overflowed" in want[1] or "negative dimension" in want[1]:
            assert have[1] == want[1], f"{case}: kiln said {have[1]!r}, torch {want[1]!r}"


def test_checked_size_arithmetic_never_wraps():
    # torch itself wraps here (it reports a negative or unrelated size); kiln says it overflowed.
    for call in (lambda: kiln.ones(4).repeat(2**62), lambda: kiln.ones(2, 2).repeat(2**62, 2**62),
                 lambda: kiln.ones(3).reshape(-1, 2**32, 2**32)):
        with pytest.raises(RuntimeError, match="overflow"):
            call()


def test_negative_offset_view_through_as_strided_backward_raises():
    # The C++ root of the "double free" under kiln.compile(lambda x: x.t())(leaf.clone()[1:]): the
    # compiled output came back at storage offset 0 instead of 3, and as_strided's backward then
    # built a view at offset 0 - 3 of its zero buffer and wrote before the block. A view below its
    # storage must raise, never write there.
    leaf = kiln.randn(4, 3, requires_grad=True)
    x = leaf.clone()[1:]
    with pytest.raises(RuntimeError, match="invalid storage offset"):
        x.as_strided((3, 3), (1, 3), -1)
    y = x.as_strided((3, 3), (1, 3), 0)  # reaches before x (row 0 of the base): allowed as in torch
    (y * kiln.arange(9.0).view(3, 3)).sum().backward()  # its backward stays inside its buffer
    # PyTorch's gradient: the elements y reads outside x (row 0 of the base) get none
    assert leaf.grad.tolist() == [[0.0, 0.0, 0.0], [1.0, 4.0, 7.0], [2.0, 5.0, 8.0], [0.0, 0.0, 0.0]]


_FROM_BUFFER_EXIT = """
import numpy as np, kiln
from kiln import _C
t = _C._from_buffer(np.arange(4, dtype=np.float32))
for call in (lambda: t.add("x"), lambda: t.sum(foo=1), lambda: t.view("a"), lambda: t + "a"):
    try:
        call()
    except TypeError:
        pass
print("done")
"""


def test_from_buffer_tensor_survives_interpreter_exit_after_a_failed_call():
    # A failed argument parse kept the converted arguments in a thread_local stack; the tensor then
    # outlived the interpreter and released its numpy buffer without one (segfault at exit).
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(__file__)), "python"))
    r = subprocess.run([sys.executable, "-c", _FROM_BUFFER_EXIT], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "done", (r.returncode, r.stderr[-2000:])

