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
