"""kiln.fx symbolic tracing, graph editing, Interpreter and Transformer, driven as torch.fx users
drive them: trace modules (MLP, CNN, control flow via concrete_args, leaf modules, wrap), edit the
graphs, lint, recompile, and compare with the original module on random inputs. torch.fx traces
the same modules as an oracle for the node sequences and the generated code.
"""

import contextlib
import io
import operator

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from kiln import fx, nn
from conftest import requires_torch, torch


def wrapped_helper(x):
    # Branches on a value: untraceable, so it is wrapped and recorded as one node.
    return x if float(x.sum()) > 0 else -x


fx.wrap("wrapped_helper")
fx.wrap("len")


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a),
                               np.asarray(b.detach().numpy() if hasattr(b, "detach") else b), rtol=tol, atol=tol)


# -- the same modules in kiln and torch (lib is kiln or torch) --------------------------------------

def make_mlp(lib):
    class MLP(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = lib.nn.Linear(8, 16)
            self.fc2 = lib.nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(lib.relu(self.fc1(x)))

    return MLP()


def make_cnn(lib):
    class CNN(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = lib.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = lib.nn.BatchNorm2d(4)
            self.pool = lib.nn.MaxPool2d(2)
            self.head = lib.nn.Sequential(lib.nn.Linear(4 * 4 * 4, 10), lib.nn.ReLU())
            self.scale = lib.nn.Parameter(lib.ones(10) * 0.5)

        def forward(self, x):
            x = lib.nn.functional.relu(self.bn(self.conv(x)))
            x = self.pool(x)
            x = x.flatten(1)
            return self.head(x) * self.scale + 1.0

    return CNN()


def make_methods(lib):
    class Methods(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(6, 6)

        def forward(self, x, y):
            a, b = lib.split(x, 3, 1)
            z = a.sigmoid() - b.tanh() * 2
            s = z.sum(dim=-1, keepdim=True)
            out = lib.cat([z, self.lin(y)[:, :3]], dim=1)
            return out / (s.abs() + 1), x.shape[0]

    return Methods()


def node_signature(gm):
    def tname(n):
        t = n.target
        return t if isinstance(t, str) else getattr(t, "__name__", str(t))

    return [(n.op, n.name, tname(n)) for n in gm.graph.nodes]


def copy_weights(kmod, tmod):
    kmod.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()})


# -- tracing ----------------------------------------------------------------------------------------

def test_trace_mlp_runs_and_matches_module():
    m = make_mlp(kiln)
    gm = fx.symbolic_trace(m)
    assert isinstance(gm, fx.GraphModule)
    assert [(n.op, n.name) for n in gm.graph.nodes] == [
        ("placeholder", "x"), ("call_module", "fc1"), ("call_function", "relu"), ("call_module", "fc2"),
        ("output", "output")]
    relu = list(gm.graph.nodes)[2]
    assert relu.target is kiln.relu
    for shape in [(3, 8), (1, 8), (5, 8)]:
        x = kiln.randn(*shape)
        close(gm(x), m(x))
    # Leaf modules are shared with the original, so parameter updates show through.
    with kiln.no_grad():
        m.fc2.bias.add_(1.0)
    x = kiln.randn(2, 8)
    close(gm(x), m(x))
    gm.graph.lint()


def test_trace_cnn_records_leaves_params_and_methods():
    m = make_cnn(kiln).eval()
    gm = fx.symbolic_trace(m)
    ops = [(n.op, n.target if isinstance(n.target, str) else n.target.__name__) for n in gm.graph.nodes]
    assert ops == [
        ("placeholder", "x"), ("call_module", "conv"), ("call_module", "bn"), ("call_function", "relu"),
        ("call_module", "pool"), ("call_method", "flatten"), ("call_module", "head.0"), ("call_module", "head.1"),
        ("get_attr", "scale"), ("call_function", "mul"), ("call_function", "add"), ("output", "output")]
    relu = list(gm.graph.nodes)[3]
    assert relu.target is F.relu
    x = kiln.randn(2, 3, 8, 8)
    close(gm(x), m(x))
    # Sequential is traced through; its layers are reached by path.
    assert isinstance(gm.get_submodule("head.0"), nn.Linear)


def test_trace_function_with_methods_unpacking_and_shapes():
    m = make_methods(kiln)
    gm = fx.symbolic_trace(m)
    x, y = kiln.randn(4, 6), kiln.randn(4, 6)
    got, n = gm(x, y)
    want, wn = m(x, y)
    close(got, want)
    assert n == wn == 4
    names = [n.name for n in gm.graph.nodes]
    assert names[:5] == ["x", "y", "split", "getitem", "getitem_1"]
    kinds = {n.name: (n.op, n.target) for n in gm.graph.nodes}
    assert kinds["sigmoid"] == ("call_method", "sigmoid")
    assert kinds["getattr_1"][1] is getattr and kinds["getattr_1"][0] == "call_function"


def test_trace_plain_function_and_tensor_constants():
    const = kiln.arange(4.0)

    def f(x, k: int = 2):
        return kiln.add(x, const) * k

    gm = fx.symbolic_trace(f)
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [p.target for p in ph] == ["x", "k"]
    assert ph[1].args == (2,)  # the default value
    get_attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    assert [n.target for n in get_attrs] == ["_tensor_constant0"]
    assert gm._tensor_constant0 is const
    x = kiln.randn(4)
    close(gm(x), (x + const) * 2)
    close(gm(x, 3), (x + const) * 3)


def test_parameters_and_buffers_become_get_attr():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(kiln.randn(4))
            self.register_buffer("b", kiln.randn(4))
            self.sub = nn.Module()
            self.sub.p = nn.Parameter(kiln.randn(4))

        def forward(self, x):
            return x * self.w + self.b - self.sub.p * self.w

    m = Scale()
    gm = fx.symbolic_trace(m)
    attrs = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
    assert attrs == ["w", "b", "sub.p"]  # self.w read twice: one cached node
    x = kiln.randn(3, 4)
    close(gm(x), m(x))
    assert gm.w is m.w and gm.b is m.b


def test_concrete_args_specialise_control_flow():
    class Flow(nn.Module):
        def forward(self, x, flag, mode=None):
            if flag:
                x = x * 2
            else:
                x = x - 1
            if mode is None:
                return x
            return x + 1

    m = Flow()
    with pytest.raises(fx.TraceError, match="symbolically traced variables cannot be used as inputs to control flow"):
        fx.symbolic_trace(m)
    gm = fx.symbolic_trace(m, concrete_args={"flag": True, "mode": None})
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [n.name for n in ph] == ["x", "flag_1", "mode_1"]
    assert not gm.graph.eliminate_dead_code()  # the specialisation checks are side effects
    x = kiln.randn(3)
    close(gm(x, True, None), x * 2)
    with pytest.raises(AssertionError, match="flag has been specialized to have value True"):
        gm(x, False, None)
    gm_false = fx.symbolic_trace(m, concrete_args={"flag": False, "mode": None})
    close(gm_false(x, False, None), x - 1)
    with pytest.raises(RuntimeError, match="not parameters of"):
        fx.symbolic_trace(m, concrete_args={"nope": 1})


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return kiln.relu(self.lin(x)) + x


class TwoBlocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1 = Block()
        self.b2 = Block()

    def forward(self, x):
        return self.b2(self.b1(x))


def test_custom_leaf_modules():
    m = TwoBlocks()
    flat = fx.symbolic_trace(m)
    assert [n.target for n in flat.graph.nodes if n.op == "call_module"] == ["b1.lin", "b2.lin"]

    class BlockTracer(fx.Tracer):
        def is_leaf_module(self, mod, qualname):
            return isinstance(mod, Block) or super().is_leaf_module(mod, qualname)

    tracer = BlockTracer()
    graph = tracer.trace(m)
    gm = fx.GraphModule(tracer.root, graph)
    assert [(n.op, n.target) for n in gm.graph.nodes if n.op == "call_module"] == [
        ("call_module", "b1"), ("call_module", "b2")]
    # Nodes made inside a submodule's call carry the module stack.
    stacks = {n.name: n.meta.get("nn_module_stack") for n in flat.graph.nodes}
    assert stacks["x"] is None
    assert stacks["b1_lin"] == {"b1": ("b1", Block), "b1.lin": ("b1.lin", nn.Linear)}
    assert stacks["relu_1"] == {"b2": ("b2", Block)}
    x = kiln.randn(2, 4)
    close(gm(x), m(x))
    close(flat(x), m(x))
    assert fx.Tracer().is_leaf_module(nn.Linear(2, 2), "")
    assert not fx.Tracer().is_leaf_module(nn.Sequential(nn.ReLU()), "")
    assert not fx.Tracer().is_leaf_module(Block(), "")


def test_wrap_records_helper_as_one_node():
    def f(x):
        return wrapped_helper(x) + len(x)

    gm = fx.symbolic_trace(f)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [c.target for c in calls] == [wrapped_helper, len, operator.add]
    assert calls[0].meta["is_wrapped"] is True
    for sign in (1.0, -1.0):
        x = kiln.ones(3) * sign
        close(gm(x), wrapped_helper(x) + 3)
    # The patch is undone after tracing.
    assert globals()["wrapped_helper"].__name__ == "wrapped_helper"
    assert "len" not in globals()


def test_math_functions_are_recorded():
    import math

    def f(x):
        return x * math.sqrt(x.size(1)) + math.pi

    gm = fx.symbolic_trace(f)
    calls = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert calls == [math.sqrt, operator.mul, operator.add]
    x = kiln.randn(2, 9)
    close(gm(x), x * 3.0 + math.pi)
    assert math.sqrt.__class__.__name__ == "builtin_function_or_method"


def test_varargs_become_star_placeholders():
    def f(x, *rest, scale=2.0):
        return (x + rest[0] - rest[1]) * scale

    gm = fx.symbolic_trace(f)
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert [n.target for n in ph] == ["x", "scale", "*rest"]
    assert "def forward(self, x, scale = 2.0, *rest):" in gm.code
    a, b, c = kiln.randn(3), kiln.randn(3), kiln.randn(3)
    close(gm(a, 2.0, b, c), (a + b - c) * 2.0)
    close(fx.Interpreter(gm).run(a, 3.0, b, c), (a + b - c) * 3.0)


def test_trace_errors():
    def uses_bool(x):
        return x if x.sum() > 0 else -x

    def iterates(x):
        return [r for r in x]

    def uses_len(x):
        return x.view(len(x), -1)

    with pytest.raises(fx.TraceError, match="symbolically traced variables cannot be used as inputs to control flow"):
        fx.symbolic_trace(uses_bool)
    with pytest.raises(fx.TraceError, match="Proxy object cannot be iterated"):
        fx.symbolic_trace(iterates)
    assert issubclass(fx.TraceError, ValueError)
    g = fx.Graph()
    p = fx.Proxy(g.placeholder("x"))
    with pytest.raises(RuntimeError, match="'len' is not supported in symbolic tracing by default"):
        p.__len__()
    with pytest.raises(NotImplementedError, match="argument of type"):
        fx.symbolic_trace(lambda x: x + object())
    # Nothing stays patched after a failed trace.
    assert nn.Module.__call__ is nn.Module._wrapped_call_impl
    assert kiln.relu.__class__.__name__ != "function"
    # A module-level wrap("len") makes len traceable.
    gm = fx.symbolic_trace(uses_len)
    x = kiln.randn(2, 3)
    close(gm(x), x)


def test_proxy_api():
    g = fx.Graph()
    x = fx.Proxy(g.placeholder("x"))
    y = 2 - (x + 1) @ x
    z = (-y)[0, 1:]
    w = x.T.float()
    assert repr(x) == "Proxy(x)"
    g.output(tuple(p.node for p in (z, w, x.size(0), abs(x))))
    ops = [(n.op, n.target if isinstance(n.target, str) else n.target.__name__) for n in g.nodes]
    assert ops == [("placeholder", "x"), ("call_function", "add"), ("call_function", "matmul"),
                   ("call_function", "sub"), ("call_function", "neg"), ("call_function", "getitem"),
                   ("call_function", "getattr"), ("call_method", "float"), ("call_method", "size"),
                   ("call_function", "abs"), ("output", "output")]
    sub = list(g.nodes)[3]
    assert sub.args[0] == 2  # reflected operand order kept
    gm = fx.GraphModule(nn.Module(), g)
    t = kiln.randn(3, 3)
    got = gm(t)
    close(got[0], (-(2 - (t + 1) @ t))[0, 1:])
    close(got[1], t.T)
    assert got[2] == 3


# -- editing ---------------------------------------------------------------------------------------

def test_edit_insert_replace_erase_dce_recompile():
    m = make_mlp(kiln)
    gm = fx.symbolic_trace(m)
    g = gm.graph
    fc1 = next(n for n in g.nodes if n.target == "fc1")
    relu = next(n for n in g.nodes if n.op == "call_function")
    # Insert x * 2 after fc1 and route fc1's users through it.
    with g.inserting_after(fc1):
        dbl = g.call_function(operator.mul, (fc1, 2.0))
    fc1.replace_all_uses_with(dbl, delete_user_cb=lambda u: u is not dbl)
    assert relu.args == (dbl,)
    assert list(fc1.users) == [dbl]
    # A dead node, removed by DCE.
    with g.inserting_before(relu):
        g.call_function(kiln.exp, (fc1,))
    g.lint()
    assert g.eliminate_dead_code()
    assert not g.eliminate_dead_code()
    gm.recompile()
    x = kiln.randn(5, 8)
    close(gm(x), m.fc2(kiln.relu(m.fc1(x) * 2.0)))
    assert "fc1 * 2.0" in gm.code
    # Swap relu for sigmoid by replacing the node.
    with g.inserting_after(relu):
        sig = g.call_function(kiln.sigmoid, relu.args)
    relu.replace_all_uses_with(sig)
    g.erase_node(relu)
    g.lint()
    gm.recompile()
    close(gm(x), m.fc2(kiln.sigmoid(m.fc1(x) * 2.0)))
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(sig)


def test_code_generated_on_first_use(monkeypatch):
    # Note [Code generated on first use]: a GraphModule made and never run generates no code;
    # reading forward (from the instance or its class), calling it or reading `code` does, once
    m = make_mlp(kiln)
    graph = fx.symbolic_trace(m).graph
    generated = []
    real = fx.Graph.python_code
    monkeypatch.setattr(fx.Graph, "python_code", lambda g, *a, **k: generated.append(g) or real(g, *a, **k))
    x = kiln.randn(3, 8)
    want = m(x)
    for first_use in ("call", "instance", "class", "code", "str"):
        gm = fx.GraphModule(m, graph)
        assert not generated
        if first_use == "call":
            close(gm(x), want)
        elif first_use == "instance":
            close(gm.forward(x), want)
        elif first_use == "class":
            close(type(gm).forward(gm, x), want)
        elif first_use == "code":
            assert "kiln.relu(fc1)" in gm.code
        else:
            assert "kiln.relu(fc1)" in str(gm)
        assert len(generated) == 1, first_use
        close(gm(x), want)
        assert "kiln.relu(fc1)" in gm.code and len(generated) == 1
        generated.clear()
    # an edit then _lazy_recompile: the next call runs the edited graph
    gm = fx.GraphModule(m, graph)
    close(gm(x), want)
    relu = next(n for n in gm.graph.nodes if n.op == "call_function")
    with gm.graph.inserting_after(relu):
        neg = gm.graph.call_function(operator.neg, (relu,))
    relu.replace_all_uses_with(neg, delete_user_cb=lambda u: u is not neg)
    gm._lazy_recompile()
    close(gm(x), m.fc2(-kiln.relu(m.fc1(x))))
    assert "neg = -relu" in gm.code or "operator.neg" in gm.code


def test_generated_code_and_printing():
    m = make_mlp(kiln)
    gm = fx.symbolic_trace(m)
    assert gm.code.strip() == (
        "def forward(self, x):\n"
        "    fc1 = self.fc1(x);  x = None\n"
        "    relu = kiln.relu(fc1);  fc1 = None\n"
        "    fc2 = self.fc2(relu);  relu = None\n"
        "    return fc2")
    assert str(gm.graph) == (
        "graph():\n"
        "    %x : [num_users=1] = placeholder[target=x]\n"
        "    %fc1 : [num_users=1] = call_module[target=fc1](args = (%x,), kwargs = {})\n"
        "    %relu : [num_users=1] = call_function[target=kiln.relu](args = (%fc1,), kwargs = {})\n"
        "    %fc2 : [num_users=1] = call_module[target=fc2](args = (%relu,), kwargs = {})\n"
        "    return fc2")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        gm.graph.print_tabular()
    lines = buf.getvalue().splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert lines[2].split() == ["placeholder", "x", "x", "()", "{}"]
    assert lines[4].split() == ["call_function", "relu", "kiln.relu", "(fc1,)", "{}"]
    assert lines[6].split() == ["output", "output", "output", "(fc2,)", "{}"]


@requires_torch
@pytest.mark.parametrize("make", [make_mlp, make_cnn, make_methods])
def test_node_sequences_match_torch_fx(make):
    k = fx.symbolic_trace(make(kiln))
    t = torch.fx.symbolic_trace(make(torch))
    assert node_signature(k) == node_signature(t)


@requires_torch
def test_generated_code_matches_torch_fx():
    # (F.relu is left out: torch records the keyword defaults its Python wrapper forwards.)
    def ops(lib):
        def fn(x, y):
            a = lib.add(x, y) * 2
            return lib.sigmoid(a).sum(dim=1) - x[0]

        return fn

    for k_root, t_root in ((make_mlp(kiln), make_mlp(torch)), (ops(kiln), ops(torch))):
        k = fx.symbolic_trace(k_root)
        t = torch.fx.symbolic_trace(t_root)
        assert k.code.strip() == t.code.strip().replace("torch", "kiln")


@requires_torch
def test_concrete_args_graph_matches_torch_fx():
    def f(lib):
        def fn(x, flag):
            return x * 2 if flag else x - 1

        return fn

    k = fx.symbolic_trace(f(kiln), concrete_args={"flag": True})
    t = torch.fx.symbolic_trace(f(torch), concrete_args={"flag": True})
    assert [(n.op, n.name) for n in k.graph.nodes] == [(n.op, n.name) for n in t.graph.nodes]
    assert k.code.strip() == t.code.strip().replace("torch", "kiln").replace(
        "kiln._assert", "kiln.fx._symbolic_trace._assert")


@requires_torch
def test_traced_cnn_matches_torch_numerically():
    tm, km = make_cnn(torch).eval(), make_cnn(kiln).eval()
    copy_weights(km, tm)
    kgm = fx.symbolic_trace(km)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    close(kgm(kiln.tensor(x)), tm(torch.tensor(x)).detach().numpy(), tol=1e-4)


# -- Interpreter and Transformer ---------------------------------------------------------------------

class ReluToSigmoid(fx.Interpreter):
    def call_function(self, target, args, kwargs):
        if target is kiln.relu:
            target = kiln.sigmoid
        return super().call_function(target, args, kwargs)


def test_interpreter_runs_and_overrides():
    m = make_mlp(kiln)
    gm = fx.symbolic_trace(m)
    x = kiln.randn(4, 8)
    close(fx.Interpreter(gm).run(x), m(x))
    close(ReluToSigmoid(gm).run(x), m.fc2(kiln.sigmoid(m.fc1(x))))
    # Values are freed after their last use: only the output is left.
    interp = fx.Interpreter(gm)
    interp.run(x)
    assert [n.name for n in interp.env] == ["output"]
    kept = fx.Interpreter(gm, garbage_collect_values=False)
    kept.run(x)
    assert len(kept.env) == 5

    # initial_env: a node given a value is not run.
    fc1 = next(n for n in gm.graph.nodes if n.target == "fc1")
    zeros = kiln.zeros(4, 16)
    close(fx.Interpreter(gm).run(x, initial_env={fc1: zeros}), m.fc2(zeros))
    # boxed_run takes a list and clears it.
    args = [x]
    close(fx.Interpreter(gm).boxed_run(args), m(x))
    assert args == []


def test_interpreter_run_node_hooks_and_errors():
    m = make_mlp(kiln)
    gm = fx.symbolic_trace(m)
    seen = []

    class Recording(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            seen.append((n.name, tuple(out.shape) if isinstance(out, kiln.Tensor) else None))
            return out

    Recording(gm).run(kiln.randn(2, 8))
    assert seen == [("x", (2, 8)), ("fc1", (2, 16)), ("relu", (2, 16)), ("fc2", (2, 4)), ("output", (2, 4))]
    with pytest.raises(RuntimeError, match="Expected positional argument for parameter x"):
        fx.Interpreter(gm).run()
    with pytest.raises(Exception, match="While executing %fc1"):
        fx.Interpreter(gm).run(kiln.randn(2, 5))
    g = fx.Graph()
    g.output(g.get_attr("missing.weight"))
    with pytest.raises(RuntimeError, match="Node referenced nonexistent target missing"):
        fx.Interpreter(nn.Module(), graph=g).run()


class SwapTransformer(fx.Transformer):
    def call_function(self, target, args, kwargs):
        if target is kiln.relu:
            return super().call_function(kiln.sigmoid, args, kwargs)
        return super().call_function(target, args, kwargs)

    def call_method(self, target, args, kwargs):
        if target == "flatten":
            return super().call_method("reshape", (args[0], args[0].shape[0], -1), {})
        return super().call_method(target, args, kwargs)


def test_transformer_builds_a_new_module():
    m = make_mlp(kiln)
    gm = fx.symbolic_trace(m)
    new = SwapTransformer(gm).transform()
    assert isinstance(new, fx.GraphModule)
    assert [n.target for n in new.graph.nodes if n.op == "call_function"] == [kiln.sigmoid]
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [kiln.relu]  # original intact
    x = kiln.randn(3, 8)
    close(new(x), m.fc2(kiln.sigmoid(m.fc1(x))))
    new.graph.lint()
    # The identity transform reproduces the graph.
    same = fx.Transformer(gm).transform()
    assert str(same.graph) == str(gm.graph)
    cnn = make_cnn(kiln).eval()
    cgm = fx.symbolic_trace(cnn)
    tr = SwapTransformer(cgm).transform()
    assert "flatten" not in tr.code and "reshape" in tr.code
    x = kiln.randn(2, 3, 8, 8)
    h = cnn.pool(F.relu(cnn.bn(cnn.conv(x))))  # F.relu is not kiln.relu: not swapped
    close(tr(x), cnn.head(h.reshape(2, -1)) * cnn.scale + 1.0)


def test_shared_submodule_retrace_deepcopy_and_param_shapes_constant():
    import copy

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(self.lin(x))
            return F.gelu(y) + kiln.zeros_like(y), y.shape

    m = Twice()
    gm = fx.symbolic_trace(m)
    assert [(n.name, n.target) for n in gm.graph.nodes if n.op == "call_module"] == [("lin", "lin"),
                                                                                       ("lin_1", "lin")]
    # A GraphModule traces again to the same program; a deep copy runs on its own parameters.
    again = fx.symbolic_trace(gm)
    assert again.code == gm.code
    dup = copy.deepcopy(gm)
    x = kiln.randn(2, 4)
    close(dup(x)[0], m(x)[0])
    assert dup(x)[1] == (2, 4)
    with kiln.no_grad():
        m.lin.weight.zero_()
    close(gm(x)[0], m(x)[0])
    assert not np.allclose(dup(x)[0].detach().numpy(), m(x)[0].detach().numpy())

    class P(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(kiln.randn(3, 4))

        def forward(self, x):
            return x.reshape(-1, self.w.shape[1]) @ self.w.T

    p = P()
    tracer = fx.Tracer(param_shapes_constant=True)
    g = tracer.trace(p)
    reshape = next(n for n in g.nodes if n.op == "call_method")
    assert reshape.args[1:] == (-1, 4)  # the shape was read from the parameter, not traced
    pgm = fx.GraphModule(p, g)
    x = kiln.randn(2, 2, 4)
    close(pgm(x), x.reshape(-1, 4) @ p.w.T)


def make_buffer_user(lib):
    class BufferUser(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pos", lib.arange(10.0))

        def forward(self, x):
            return x + self.pos, self.pos.mul(x[0]), self.pos[x.long()]

    return BufferUser()


def test_real_tensor_methods_with_proxy_arguments():
    m = make_buffer_user(kiln)
    gm = fx.symbolic_trace(m)
    ops = [(n.op, n.target if isinstance(n.target, str) else n.target.__name__) for n in gm.graph.nodes]
    assert ops == [("placeholder", "x"), ("get_attr", "pos"), ("call_function", "add"), ("call_function", "getitem"),
                   ("get_attr", "pos"), ("call_method", "mul"), ("call_method", "long"), ("get_attr", "pos"),
                   ("call_method", "__getitem__"), ("output", "output")]
    x = kiln.tensor([1.0, 4.0, 2.0, 9.0, 0.0, 3.0, 5.0, 6.0, 7.0, 8.0])
    for got, want in zip(gm(x), m(x)):
        close(got, want)
    assert kiln.Tensor.mul.__class__.__name__ != "function"  # unpatched after tracing

    # A slice bound that is traced (torch.fx cannot trace this one).
    class Prefix(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", kiln.arange(10.0))

        def forward(self, x):
            return x + self.table[:x.size(0)]

    p = Prefix()
    pgm = fx.symbolic_trace(p)
    for n in (3, 7):
        x = kiln.randn(n)
        close(pgm(x), p(x))


@requires_torch
def test_real_tensor_methods_match_torch_fx():
    k = fx.symbolic_trace(make_buffer_user(kiln))
    t = torch.fx.symbolic_trace(make_buffer_user(torch))
    assert node_signature(k) == node_signature(t)
    assert k.code.strip() == t.code.strip()


@requires_torch
def test_varargs_code_matches_torch_fx():
    def make(lib):
        def f(x, *rest, scale=2.0):
            return (x + rest[0] - rest[1]) * scale

        return f

    assert fx.symbolic_trace(make(kiln)).code == torch.fx.symbolic_trace(make(torch)).code
