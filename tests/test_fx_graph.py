"""kiln.fx.Graph, Node and GraphModule, driven as torch.fx users drive them.

Graphs are built by hand (symbolic tracing has its own tests), edited, linted, recompiled and
run; printing and generated code are compared with torch.fx building the same graph.
"""

import copy
import importlib
import operator
import sys

import numpy as np
import pytest

import kiln
from kiln import fx, nn
from conftest import requires_torch, torch


def build(lib, fxmod):
    """The same graph in either library: relu, sums, a module call, getitem, a dead node."""
    g = fxmod.Graph()
    x = g.placeholder("x")
    w = g.get_attr("lin.weight")
    r = g.call_function(lib.relu, (x,))
    s1 = g.call_function(lib.sum, (r,))
    s2 = g.call_function(lib.sum, (r,), {"dim": 0})
    a = g.call_function(operator.add, (r, 1.5))
    g.call_method("t", (w,))
    lin = g.call_module("lin", (a,))
    add = g.call_function(operator.add, (lin, s1))
    gi = g.call_function(operator.getitem, (add, (slice(None, 2), 0)))
    g.output((gi, s2))
    return g


class Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)


def run_reference(m, x):
    r = kiln.relu(x)
    out = m.lin(r + 1.5) + r.sum()
    return out[:2, 0], r.sum(dim=0)


def test_build_run_and_users():
    g = build(kiln, fx)
    g.lint()
    names = [n.name for n in g.nodes]
    assert names == ["x", "lin_weight", "relu", "sum_1", "sum_2", "add", "t", "lin", "add_1", "getitem", "output"]
    nodes = {n.name: n for n in g.nodes}
    assert list(nodes["relu"].users) == [nodes["sum_1"], nodes["sum_2"], nodes["add"]]
    assert nodes["add_1"].all_input_nodes == [nodes["lin"], nodes["sum_1"]]
    assert nodes["x"].next is nodes["lin_weight"] and nodes["lin_weight"].prev is nodes["x"]
    assert nodes["relu"].graph is g
    m = Lin()
    gm = fx.GraphModule(m, g)
    x = kiln.randn(3, 4)
    out = gm(x)
    ref = run_reference(m, x)
    np.testing.assert_allclose(out[0].numpy(), ref[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), ref[1].numpy(), rtol=1e-6)
    assert gm.lin is m.lin  # GraphModule shares the submodules of its root


@requires_torch
def test_printing_and_code_match_torch_fx():
    import torch.fx as tfx
    kg, tg = build(kiln, fx), build(torch, tfx)
    assert str(kg) == str(tg).replace("torch.", "kiln.")
    assert [n.name for n in kg.nodes] == [n.name for n in tg.nodes]

    class TLin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
    kcode = fx.GraphModule(Lin(), kg).code
    tcode = tfx.GraphModule(TLin(), tg).code
    assert kcode.strip() == tcode.replace("torch.", "kiln.").strip()


def test_str_format():
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(kiln.ops.aten.mul.Tensor, (x, 2))
    g.output(y)
    assert str(g) == ("graph():\n"
                      "    %x : [num_users=1] = placeholder[target=x]\n"
                      "    %mul : [num_users=1] = call_function[target=aten.mul.Tensor](args = (%x, 2), kwargs = {})\n"
                      "    return mul")


def test_names_are_unique_and_avoid_builtins():
    g = fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(kiln.add, (x, x))
    b = g.call_function(kiln.add, (x, x))
    c = g.create_node("call_function", kiln.add, (x, x), name="add_1")
    s = g.call_function(kiln.sum, (x,))
    ga = g.call_function(getattr, (x, "shape"))
    m = g.call_module("layer1.0.conv", (x,))
    assert [a.name, b.name, c.name, s.name, ga.name, m.name] == ["add", "add_1", "add_2", "sum_1", "getattr_1",
                                                                 "layer1_0_conv"]
    b.name = "renamed"
    assert b.name == "renamed"
    d = g.call_function(kiln.add, (x, x))
    assert d.name == "add_3"


def test_inserting_before_after_keeps_order():
    g = fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(kiln.relu, (x,))
    out = g.output(r)
    with g.inserting_after(x):
        a = g.call_function(kiln.neg, (x,))
        b = g.call_function(kiln.exp, (a,))
    with g.inserting_before(out):
        c = g.call_function(kiln.sigmoid, (r,))
    with g.inserting_before():
        first = g.placeholder("y")
    assert [n.name for n in g.nodes] == ["y", "x", "neg", "exp", "relu", "sigmoid", "output"]
    # the insert point is restored: new nodes go to the end again (before nothing)
    assert g._insert_point() is None
    for n in (a, b, c, first):
        assert n.graph is g
    g.lint()


def test_replace_all_uses_erase_and_dce():
    g = fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(kiln.relu, (x,))
    n = g.call_function(kiln.neg, (r,))
    e = g.call_function(kiln.exp, (r,))
    g.output((n, e))
    with g.inserting_after(r):
        s = g.call_function(kiln.sigmoid, (r,))
    changed = r.replace_all_uses_with(s, delete_user_cb=lambda u: u is not s)
    assert changed == [n, e]
    assert list(r.users) == [s] and list(s.users) == [n, e]
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(r)
    g.lint()
    e.replace_input_with(s, x)
    assert e.args == (x,)
    out = g.output_node()
    out.args = ((n,),)
    assert g.eliminate_dead_code()
    assert [m.name for m in g.nodes] == ["x", "relu", "sigmoid", "neg", "output"]
    assert e._erased and e.graph is None and e.args == (None,)
    assert not g.eliminate_dead_code()
    g.lint()


def test_dce_keeps_side_effects():
    g = fx.Graph()
    x = g.placeholder("x")
    g.call_function(kiln.ops.aten.relu_.default, (x,))
    g.call_function(kiln.neg, (x,))
    g.output(x)
    g.eliminate_dead_code()
    assert [n.name for n in g.nodes] == ["x", "relu_", "output"]
    gm = fx.GraphModule(nn.Module(), g)
    t = kiln.tensor([-1.0, 2.0])
    gm(t)
    assert t.tolist() == [0.0, 2.0]


def test_update_args_kwargs_and_nested_structures():
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    n = g.call_function(kiln.cat, ([x, y],), {"dim": 0})
    g.output({"out": n, "pair": (x, [y])})
    assert list(x.users) == [n, g.output_node()]
    n.update_kwarg("dim", 1)
    n.update_arg(0, [y, x])
    assert n.kwargs == {"dim": 1} and n.args == ([y, x],)
    # like torch.fx, an edited node re-registers as a user at the end of its inputs' users
    assert list(y.users) == [g.output_node(), n]
    g.lint()
    gm = fx.GraphModule({}, g)
    a, b = kiln.ones(2, 2), kiln.zeros(2, 3)
    out = gm(a, b)
    assert out["out"].shape == (2, 5) and out["pair"][0] is a and out["pair"][1][0] is b
    assert fx.map_arg((x, [y, 3], {"k": x}), lambda n: n.name) == ("x", ["y", 3], {"k": "x"})


def test_constants_round_trip():
    g = fx.Graph()
    x = g.placeholder("x")
    n = g.call_function(kiln.full, ((2, 2), float("inf")), {"dtype": kiln.float64, "device": kiln.device("cpu")})
    m = g.call_function(operator.getitem, (x, (slice(1, None, 2), Ellipsis, None)))
    g.output((n, m))
    assert n.args == ((2, 2), float("inf")) and n.kwargs["dtype"] is kiln.float64
    assert n.kwargs["device"] == kiln.device("cpu")
    gm = fx.GraphModule({}, g)
    assert "kiln.float64" in gm.code and "inf" in gm.code
    out, sl = gm(kiln.arange(12.0).reshape(4, 3))
    assert out.dtype == kiln.float64 and out.tolist() == [[float("inf")] * 2] * 2
    assert sl.shape == (2, 3, 1)


def test_lint_catches_broken_graphs():
    g = fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(kiln.relu, (x,))
    g.output(r)
    x.prepend(r)  # relu now comes before its input
    with pytest.raises(RuntimeError, match="used before it has been defined"):
        g.lint()
    other = fx.Graph()
    with pytest.raises(RuntimeError, match="another graph|before it has been defined"):
        other.call_function(kiln.relu, (x,))
    assert list(x.users) == [r]  # the failed create_node left nothing behind
    with pytest.raises(TypeError, match="call_function target must be a callable"):
        other.create_node("call_function", "relu")
    with pytest.raises(ValueError, match="Unsupported node opcode"):
        other.create_node("call_something", "relu")
    with pytest.raises(TypeError, match="call_module target must be a str"):
        other.call_module(kiln.relu)


def test_meta_dict():
    g = fx.Graph()
    x = g.placeholder("x")
    t = kiln.ones(2)
    x.meta["val"] = t
    x.meta["info"] = {"a": 1}
    x.meta["info"]["b"] = 2  # the same dict object is kept
    x.meta["shape"] = (2, (3, 4))
    assert x.meta["val"] is t and x.meta["info"] == {"a": 1, "b": 2} and x.meta["shape"] == (2, (3, 4))
    assert "val" in x.meta and len(x.meta) == 3 and list(x.meta) == ["val", "info", "shape"]
    del x.meta["shape"]
    assert x.meta.get("shape") is None
    x.meta = {"only": 1}
    assert dict(x.meta) == {"only": 1}
    with pytest.raises(KeyError):
        x.meta["missing"]


def test_graph_copy_node_copy_and_deepcopy():
    g = build(kiln, fx)
    g2 = fx.Graph()
    val_map = {}
    out = g2.graph_copy(g, val_map)
    g2.output(out)
    assert str(g2) == str(g)
    assert all(val_map[n].name == n.name for n in g.nodes if n.op != "output")
    g3 = copy.deepcopy(g)
    assert str(g3) == str(g) and g3 is not g
    m = Lin()
    gm = fx.GraphModule(m, g)
    gm2 = copy.deepcopy(gm)
    x = kiln.randn(5, 4)
    assert gm2.lin is not gm.lin
    np.testing.assert_allclose(gm2(x)[0].numpy(), gm(x)[0].numpy())
    gm2.lin.weight.data.zero_()
    assert not np.allclose(gm2(x)[0].numpy(), gm(x)[0].numpy())
    # node_copy with a transform
    g4 = fx.Graph()
    y = g4.placeholder("y")
    relu = next(n for n in g.nodes if n.name == "relu")
    c = g4.node_copy(relu, lambda n: y)
    assert c.args == (y,) and c.target is kiln.relu


def test_graph_module_recompile_and_readable():
    g = fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(kiln.relu, (x,))
    g.output(r)
    gm = fx.GraphModule(nn.Module(), g)
    t = kiln.tensor([-1.0, 2.0])
    assert gm(t).tolist() == [0.0, 2.0]
    with gm.graph.inserting_after(r):
        n = gm.graph.call_function(kiln.neg, (r,))
    r.replace_all_uses_with(n, delete_user_cb=lambda u: u is not n)
    gm.recompile()
    assert gm(t).tolist() == [-0.0, -2.0]
    assert "neg = kiln.neg(relu)" in gm.code
    x.meta["val"] = t
    text = gm.print_readable(print_output=False)
    assert text.startswith("class GraphModule(kiln.nn.Module):") and 'x: "f32[2]"' in text
    assert "forward" in str(gm)
    # each GraphModule has its own forward
    g2 = fx.Graph()
    g2.output(g2.placeholder("x"))
    gm2 = fx.GraphModule(nn.Module(), g2)
    assert gm2(t) is t and gm(t).tolist() == [-0.0, -2.0]


def test_graph_module_from_dict_root_and_errors():
    g = fx.Graph()
    x = g.placeholder("x")
    w = g.get_attr("sub.weight")
    g.output(g.call_function(operator.mul, (x, w)))
    weight = kiln.tensor([2.0, 3.0])
    gm = fx.GraphModule({"sub.weight": weight}, g)
    assert gm(kiln.ones(2)).tolist() == [2.0, 3.0]
    assert "sub.weight" in dict(gm.named_buffers())
    with pytest.raises(RuntimeError, match="was not provided in ``root``"):
        fx.GraphModule({}, g)
    with pytest.raises(TypeError, match="kiln.fx.Graph"):
        fx.GraphModule({}, "not a graph")


def test_to_folder(tmp_path):
    m = Lin()
    gm = fx.GraphModule(m, build(kiln, fx))
    gm.to_folder(str(tmp_path / "pkg"), "MyModule")
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("pkg")
        loaded = mod.MyModule()
    finally:
        sys.path.pop(0)
    x = kiln.randn(3, 4)
    for a, b in zip(loaded(x), gm(x)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_graph_nodes_follow_every_edit():
    # graph.nodes keeps a snapshot while the order stays (Graph._order_version): every insertion,
    # move and erasure must show, also while a loop edits the graph it walks
    g = fx.Graph()
    x = g.placeholder("x")
    r = g.call_function(kiln.relu, (x,))
    n = g.call_function(kiln.neg, (x,))
    g.output(r)
    assert [v.name for v in g.nodes] == ["x", "relu", "neg", "output"]
    with g.inserting_before(r):
        a = g.call_function(kiln.abs, (x,))
    assert [v.name for v in g.nodes] == ["x", "abs_1", "relu", "neg", "output"]  # abs: a builtin
    assert g.nodes[1] is a and [v.name for v in reversed(g.nodes)][0] == "output"
    x.append(n)
    assert [v.name for v in g.nodes] == ["x", "neg", "abs_1", "relu", "output"]
    for v in g.nodes:  # erasing while walking: the walk goes on over the snapshot it began with
        if v.op == "call_function" and not v.users:
            g.erase_node(v)
    assert [v.name for v in g.nodes] == ["x", "relu", "output"]
    assert len(g.nodes) == 3 and a not in g.nodes and r in g.nodes
    g.lint()


def test_erased_node_and_dead_graph_handles_are_safe():
    g = fx.Graph()
    x = g.placeholder("x")
    n = g.call_function(kiln.neg, (x,))
    g.output(x)
    g.erase_node(n)
    assert n._erased and n.graph is None
    with pytest.raises(RuntimeError, match="erased"):
        n.args = (x,)
    del g
    import gc
    gc.collect()
    assert x.graph is None and x.name == "x"
