"""tools/api_coverage.py (issue 17): its figures add up, and its comparison counts what kiln has."""

import contextlib
import io
import json
import os
import re
import sys
import types

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import api_coverage  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(stdout lines, --json data) of one `api_coverage.py --list --json FILE` run."""
    path = tmp_path_factory.mktemp("coverage") / "coverage.json"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert api_coverage.main(["--list", "--json", str(path)]) == 0
    with open(path) as f:
        return out.getvalue().splitlines(), json.load(f)


def test_figures_add_up(run):
    lines, data = run
    namespaces = data["namespaces"]
    assert list(namespaces) == [label for label, _, _ in api_coverage.NAMESPACES]
    for label, r in namespaces.items():
        line = next(x for x in lines if x.startswith(label + ": "))
        total, have, lack = map(int, re.match(
            rf"{re.escape(label)}: (\d+) public names, kiln has (\d+), lacks (\d+)", line).groups())
        assert (total, have, lack) == (r["total"], len(r["has"]), len(r["lacks"]))
        assert have + lack == total
        assert not set(r["has"]) & set(r["lacks"])
        for names in r["not_counted"].values():  # a name left out is neither present nor lacking
            assert not set(names) & (set(r["has"]) | set(r["lacks"]))
    m = re.fullmatch(r"api coverage: kiln has (\d+) of (\d+) public names \((\d+)%\) of (.*)", lines[-1])
    assert m and lines[-1] == data["summary"]
    have, total, percent = map(int, m.groups()[:3])
    assert have == sum(len(r["has"]) for r in namespaces.values())
    assert total == sum(r["total"] for r in namespaces.values())
    assert percent == round(100 * have / total)
    assert m.group(4).split(", ") == list(namespaces)


def test_names_kiln_has_are_present(run):
    namespaces = run[1]["namespaces"]
    assert "zeros" in namespaces["torch"]["has"]
    assert "add" in namespaces["torch.Tensor"]["has"]
    assert "__matmul__" in namespaces["torch.Tensor"]["has"]
    assert "Linear" in namespaces["torch.nn"]["has"]
    assert "relu" in namespaces["torch.nn.functional"]["has"]
    assert "SGD" in namespaces["torch.optim"]["has"]


def test_left_out_categories_are_named():
    import torch
    names, skipped = api_coverage.public_names("torch", torch)
    assert "t_copy" in skipped["view_copy variants"]
    assert "quantize_per_tensor" in skipped["quantization"]
    assert "nn" in skipped["submodules and imported modules"]
    assert {"unique", "pi", "multinomial"} <= names  # unique is only in dir(), pi is data in __all__
    tensor_names, _ = api_coverage.public_names("torch.Tensor", torch.Tensor)
    assert {"__matmul__", "__getitem__", "add"} <= tensor_names
    assert "__init__" not in tensor_names


def test_compare_counts_a_fake_namespace():
    fake = types.SimpleNamespace(zeros=lambda *size: None)
    assert api_coverage.compare(["zeros", "multinomial"], fake) == (["zeros"], ["multinomial"])


def test_dunder_inherited_from_object_is_lacking():
    class Defines:
        def __matmul__(self, other):
            return self

        __hash__ = None  # as Python sets it for a class defining __eq__ alone

    class Inherits:
        pass

    names = ["__matmul__", "__eq__", "__hash__"]
    assert api_coverage.compare(names, Defines) == (["__matmul__"], ["__eq__", "__hash__"])
    assert api_coverage.compare(names, Inherits) == ([], sorted(names))


def test_absent_namespace_lacks_everything(run):
    names = ["fft", "rfft", "ifft"]
    assert api_coverage.compare(names, None) == ([], sorted(names))
    assert api_coverage._load("kiln.no_such_namespace") is None
    for label, r in run[1]["namespaces"].items():
        if r["kiln_namespace"] is None:
            assert r["has"] == [] and r["total"] == len(r["lacks"]) > 0
