"""Cold compile cost by depth (issue 19): what a deeper model adds to the first compile must be
the same work once more per block, never work that grows with the blocks before it. Each test
checks the compiled result and gradients against eager as well."""

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
from kiln._inductor import compile_fx


def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a.detach().double().numpy(), b.detach().double().numpy(), rtol=tol, atol=tol)


def _residual_stack(depth, width=24):
    """Pre-norm residual blocks: each x is read by a LayerNorm and by the next block's add."""
    kiln.manual_seed(0)
    nn = kiln.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.fc = nn.LayerNorm(width), nn.Linear(width, width)

        def forward(self, x):
            return x + self.fc(self.ln(x))

    return nn.Sequential(*[Block() for _ in range(depth)])


def _compiled_bodies(model, x, grad):
    """Gradients of the compiled model and the kernel bodies (IR without the name) it made."""
    dynamo.reset()
    graphs = []
    compile_fx.graph_sinks.append(graphs)
    try:
        xi = x.clone().requires_grad_()
        out = kiln.compile(model)(xi)
        (out * grad).sum().backward()
    finally:
        compile_fx.graph_sinks.remove(graphs)
    bodies = [{k.ir.renamed("kernel").hash for k in g.kernels} for g in graphs]
    return out, xi.grad, bodies


def test_residual_stream_bodies_do_not_grow_with_depth():
    # Note [Recompute or realize]: x_{i+1} = x_i + f(x_i) was inlined into its readers while its
    # op count fit the budget, so the stream's sum grew by one load per block until the budget
    # ran out and the cycle began again: a GPT's blocks made different kernels by their position
    # in that cycle (47 bodies for LLVM at 16 layers, 20 at one). Recomputation no longer chains
    # (one x in two is inlined, the next realized): past the first blocks every pair makes the
    # same kernels, so 12 blocks make the bodies 6 do (before: 15 and 13 against 14 and 12).
    x, grad = kiln.randn(4, 24), kiln.randn(4, 24)
    shallow = _compiled_bodies(_residual_stack(6), x, grad)[2]
    model = _residual_stack(12)
    xi = x.clone().requires_grad_()
    want = model(xi)
    (want * grad).sum().backward()
    want_grads = [xi.grad] + [p.grad.clone() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    out, x_grad, bodies = _compiled_bodies(model, x, grad)
    close(out, want)
    for got, w in zip([x_grad] + [p.grad for p in model.parameters()], want_grads):
        close(got, w)
    assert bodies == shallow, ([len(b) for b in bodies], [len(b) for b in shallow])


def test_recomputed_value_is_not_recomputed_again_in_a_chain():
    # each x_i is read twice (by the next add and by a sum): x_1 = a + b is cheap and inlined,
    # x_2 = x_1 + c would make every reader load a, b and c, so it is realized; no kernel
    # reads more than three of the inputs
    def fn(a, b, c, d, e):
        x1 = a + b
        x2 = x1 + c
        x3 = x2 + d
        x4 = x3 + e
        return x1.sum(-1), x2.sum(-1), x3.sum(-1), x4.sum(-1), x4 * 2

    args = [kiln.randn(8, 16) for _ in range(5)]
    dynamo.reset()
    graphs = []
    compile_fx.graph_sinks.append(graphs)
    try:
        got = kiln.compile(fn)(*args)
    finally:
        compile_fx.graph_sinks.remove(graphs)
    for g, w in zip(got, fn(*args)):
        close(g, w, tol=1e-5)
    inputs = {f"arg{i}_1" for i in range(5)} | {f"l_{n}_" for n in "abcde"}
    for k in graphs[0].kernels:
        loads = {b.name for b in k.buffers} & inputs
        assert len(loads) <= 3, (k.name, sorted(b.name for b in k.buffers))


def test_node_meta_get_without_the_key():
    # node.meta.get looks the key up instead of catching the binding's KeyError (a C++ exception:
    # 6.5 us a miss, and AOT's retrace asks every node for keys it mostly lacks)
    g = kiln.fx.Graph()
    n = g.placeholder("x")
    n.meta["val"] = 3
    assert n.meta.get("val") == 3 and n.meta.get("val", 4) == 3
    assert n.meta.get("recompute") is None and n.meta.get("recompute", "no") == "no"
    n.meta["none"] = None
    assert n.meta.get("none", 1) is None  # a stored None is a value, not a missing key
    with pytest.raises(KeyError):
        n.meta["recompute"]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cyclic_gc_pauses_while_compiling_only(enabled, monkeypatch):
    """Note [No cyclic GC while compiling]: off in Dynamo's capture (seen from the compiler
    backend) and in AOT's trace and Inductor's lowering of the forward and backward graphs (seen
    from compile_fx_inner), back as it was after; a user's gc.disable() stays."""
    import gc

    seen = []
    inner = compile_fx._compile_fx_inner

    def backend(gm, example_inputs):
        seen.append(("backend", gc.isenabled()))
        return compile_fx.compile_fx(gm, example_inputs)

    def recording_inner(*args, **kwargs):
        seen.append(("inner", gc.isenabled()))
        return inner(*args, **kwargs)

    monkeypatch.setattr(compile_fx, "_compile_fx_inner", recording_inner)

    def f(x):
        return (x.sin() * 2).sum()

    dynamo.reset()
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        x = kiln.randn(8, requires_grad=True)
        out = kiln.compile(f, backend=backend)(x)
        out.backward()
        assert seen == [("backend", False), ("inner", False), ("inner", False)], seen
        assert gc.isenabled() is enabled
        close(x.grad, x.detach().cos() * 2)
    finally:
        gc.enable() if was else gc.disable()
