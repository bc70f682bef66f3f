"""kiln._C._fx._interpret, the C++ interpreter of aten graphs (fx/interpreter.h, Note [Interpreting
aten graphs]): make_fx graphs run again on other inputs equal the GraphModule and PyTorch; AOT's
joint graphs, replayed by it, equal those the Python interpreter replays, node for node and
stack trace for stack trace."""
import numpy as np
import pytest

import kiln
from kiln._functorch._aot_autograd import functional_graph
from kiln.fx.experimental.proxy_tensor import make_fx

torch = pytest.importorskip("torch")

_C = kiln._C


def program(lib, x, y, idx):
    values, indices = lib.max(x * 2 + y, dim=1)                  # several outputs: getitem
    z = lib.cat([x, y.t().contiguous().t()], 0)                    # a tensor list
    w = lib.div(z, 3, rounding_mode="floor")                       # a wrapped number, a kwarg
    s = (values + 1.5).sum(0, keepdim=True)                        # defaults left out
    picked = lib.index_select(x, 0, idx)                           # an int64 input
    return indices, w, s, picked.clamp(min=-1.0).flip(1)


@pytest.mark.parametrize("shape", [(3, 4), (1, 5), (6, 1)])
def test_a_make_fx_graph_runs_again_on_other_inputs(shape):
    rng = np.random.default_rng(0)
    mk = lambda lib, *s: lib.tensor(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    idx = kiln.tensor([0, shape[0] - 1, 0])
    gm = make_fx(lambda x, y, i: program(kiln, x, y, i))(mk(kiln, *shape), mk(kiln, *shape), idx)
    assert _C._fx._why_not_interpretable(gm.graph) == ""
    x, y = mk(kiln, *shape), mk(kiln, *shape)
    got = _C._fx._interpret(gm.graph, [x, y, idx])
    assert isinstance(got, tuple) and len(got) == 4
    want = program(torch, torch.tensor(x.numpy()), torch.tensor(y.numpy()), torch.tensor(idx.numpy()))
    for g, e, w in zip(got, gm(x, y, idx), want):
        assert g.dtype == e.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(g.numpy(), e.numpy())
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_what_it_cannot_run_is_named_and_left_to_python():
    const = kiln.tensor([1.0, 2.0])
    gm = make_fx(lambda x: x + const)(kiln.zeros(2))  # a tensor the program made: get_attr
    assert _C._fx._why_not_interpretable(gm.graph) == "node _tensor_constant0 is a get_attr node"
    with pytest.raises(ValueError, match="cannot run this graph in C\\+\\+: node _tensor_constant0"):
        _C._fx._interpret(gm.graph, [kiln.zeros(2)])
    assert functional_graph._aten_replay(gm) is None
    with pytest.raises(TypeError, match="takes 1 inputs, got 2"):
        _C._fx._interpret(make_fx(lambda x: x.relu())(kiln.zeros(2)).graph, [kiln.zeros(2), kiln.zeros(2)])


def _joint_code(monkeypatch, python):
    if python:
        monkeypatch.setattr(functional_graph, "_aten_replay", lambda gm: None)
    graphs = []

    def backend(gm, example_inputs):
        from kiln._functorch.aot_autograd import aot_module_simplified

        def compiler(g, _):
            graphs.append("\n".join(f"{n.format_node()}  # {n.meta.get('stack_trace', '').strip().splitlines()[-1:]}"
                                    for n in g.graph.nodes))
            return g.forward
        return aot_module_simplified(gm, example_inputs, fw_compiler=compiler, bw_compiler=compiler)

    kiln.manual_seed(0)
    model = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.LayerNorm(16), kiln.nn.GELU(), kiln.nn.Linear(16, 4))
    x = kiln.randn(5, 8)
    loss = kiln.compile(model, backend=backend)(x).logsumexp(1).sum()
    loss.backward()
    return graphs, loss.item(), [p.grad.clone() for p in model.parameters()]


def test_aot_joint_graphs_are_the_python_interpreters(monkeypatch):
    from kiln._dynamo import reset
    reset()
    fast = _joint_code(monkeypatch, python=False)
    reset()
    slow = _joint_code(monkeypatch, python=True)
    assert len(fast[0]) == 2 and fast[0] == slow[0]  # forward and backward, stack traces included
    calls = [line for line in fast[0][0].splitlines() if "call_function" in line]
    assert len(calls) == 9 and all("return F." in line for line in calls)  # each forward op names its line
    assert fast[1] == slow[1]
    for a, b in zip(fast[2], slow[2]):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
