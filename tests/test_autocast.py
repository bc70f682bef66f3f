"""kiln.autocast against torch.autocast (PyTorch 2.13, CPU): the per-op cast policy (result dtypes and
values of matrix products, convolutions, losses, reductions, linear algebra, cat/stack promotion),
float64 left alone, gradients reaching float32 parameters through the casts, nesting, the decorator,
the state functions and warnings, custom_fwd/custom_bwd; and compiled code (aot_eager, inductor)
casting where eager does, with the block in one graph and across a graph break."""

import warnings

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def t(lib, a, dtype=None):
    x = lib.from_numpy(np.ascontiguousarray(a))
    return x.to(getattr(lib, dtype)) if dtype else x


X, W, IMG, K = arr(4, 4), arr(3, 4, seed=1), arr(1, 2, 5, 5, seed=2), arr(3, 2, 3, 3, seed=3)
TARGET = np.array([0, 3, 1, 2])

CASES = {
    "mm": lambda lib, F: lib.mm(t(lib, X), t(lib, X)),
    "mm_mixed": lambda lib, F: lib.mm(t(lib, X, "bfloat16"), t(lib, X)),
    "mm_float64": lambda lib, F: lib.mm(t(lib, X, "float64"), t(lib, X, "float64")),
    "bmm": lambda lib, F: lib.bmm(t(lib, X)[None], t(lib, X)[None]),
    "addmm": lambda lib, F: lib.addmm(t(lib, X), t(lib, X), t(lib, X)),
    "baddbmm": lambda lib, F: lib.baddbmm(t(lib, X)[None], t(lib, X)[None], t(lib, X)[None]),
    "matmul": lambda lib, F: t(lib, X) @ t(lib, X),
    "linear": lambda lib, F: F.linear(t(lib, X), t(lib, W)),
    "conv2d": lambda lib, F: F.conv2d(t(lib, IMG), t(lib, K), padding=1),
    "einsum": lambda lib, F: lib.einsum("ij,jk->ik", t(lib, X), t(lib, X)),
    "dot": lambda lib, F: lib.dot(t(lib, X)[0], t(lib, X)[1]),
    "softmax": lambda lib, F: F.softmax(t(lib, X, "bfloat16"), -1),
    "layer_norm": lambda lib, F: F.layer_norm(t(lib, X, "bfloat16"), (4,)),
    "sum_bf16": lambda lib, F: t(lib, X, "bfloat16").sum(),
    "relu": lambda lib, F: F.relu(t(lib, X)),
    "add_mixed": lambda lib, F: t(lib, X, "bfloat16") + t(lib, X),
    "cross_entropy": lambda lib, F: F.cross_entropy(t(lib, X, "bfloat16"), lib.tensor(TARGET)),
    "nll_loss": lambda lib, F: F.nll_loss(t(lib, X, "bfloat16"), lib.tensor(TARGET)),
    "mse_loss": lambda lib, F: F.mse_loss(t(lib, X, "bfloat16"), t(lib, X)),
    "l1_loss": lambda lib, F: F.l1_loss(t(lib, X, "bfloat16"), t(lib, X)),
    "smooth_l1": lambda lib, F: F.smooth_l1_loss(t(lib, X, "bfloat16"), t(lib, X)),
    "bce_logits": lambda lib, F: F.binary_cross_entropy_with_logits(t(lib, X, "bfloat16"), t(lib, X).sigmoid()),
    "kl_div": lambda lib, F: F.kl_div(t(lib, X, "bfloat16"), t(lib, X).softmax(-1), reduction="batchmean"),
    "prod": lambda lib, F: t(lib, X, "bfloat16").prod(),
    "cdist": lambda lib, F: lib.cdist(t(lib, X, "bfloat16"), t(lib, X, "bfloat16")),
    "trace": lambda lib, F: lib.trace(t(lib, X, "bfloat16")),
    "inverse": lambda lib, F: lib.linalg.inv(t(lib, X + 4 * np.eye(4, dtype=np.float32), "bfloat16")),
    "svdvals": lambda lib, F: lib.linalg.svdvals(t(lib, X, "bfloat16")),
    "cat": lambda lib, F: lib.cat([t(lib, X, "bfloat16"), t(lib, X)]),
    "stack": lambda lib, F: lib.stack([t(lib, X, "bfloat16"), t(lib, X)]),
    "cat_f16_bf16": lambda lib, F: lib.cat([t(lib, X, "bfloat16"), t(lib, X, "float16")]),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", list(CASES))
def test_policy_as_torch(name, dtype):
    try:
        with torch.autocast("cpu", dtype=getattr(torch, dtype)):
            want = CASES[name](torch, torch.nn.functional)
    except RuntimeError as e:  # cat of bfloat16 and float16 under a float16 autocast: prioritize's error
        with pytest.raises(RuntimeError, match=str(e)):
            with kiln.autocast("cpu", dtype=getattr(kiln, dtype)):
                CASES[name](kiln, kiln.nn.functional)
        return
    with kiln.autocast("cpu", dtype=getattr(kiln, dtype)):
        got = CASES[name](kiln, kiln.nn.functional)
    assert str(got.dtype)[5:] == str(want.dtype)[6:], (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(np.array(got.float().tolist()), want.float().numpy(), rtol=2e-2, atol=2e-2)


def test_outside_autocast_nothing_is_cast():
    with kiln.autocast("cpu"):
        pass
    assert kiln.mm(t(kiln, X), t(kiln, X)).dtype == kiln.float32
    assert not kiln.is_autocast_enabled("cpu")


def mlp_step(lib):
    nn = lib.nn
    lib.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    return model


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_training_step_gradients_as_torch(dtype):
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    km = kiln.nn.Sequential(kiln.nn.Linear(4, 8), kiln.nn.ReLU(), kiln.nn.Linear(8, 4))
    km.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    x, y = arr(6, 4, seed=4), np.array([0, 1, 2, 3, 0, 1])
    for lib, m in ((torch, tm), (kiln, km)):
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            out = m(t(lib, x))
            loss = lib.nn.functional.cross_entropy(out, lib.tensor(y))
        assert str(out.dtype).endswith(dtype) and str(loss.dtype).endswith("float32")
        loss.backward()
    for (name, p), q in zip(km.named_parameters(), tm.parameters()):
        assert p.grad.dtype == kiln.float32, name
        np.testing.assert_allclose(np.array(p.grad.tolist()), q.grad.numpy(), rtol=3e-2, atol=3e-3, err_msg=name)


def test_nesting_decorator_and_state_functions():
    assert kiln.get_autocast_dtype("cpu") == kiln.bfloat16 and kiln.get_autocast_dtype("cuda") == kiln.float16
    with kiln.autocast("cpu", dtype=kiln.float16):
        assert kiln.is_autocast_enabled("cpu") and not kiln.is_autocast_enabled()
        assert kiln.get_autocast_dtype("cpu") == kiln.float16
        with kiln.autocast("cpu", enabled=False):
            assert not kiln.is_autocast_enabled("cpu")
            assert kiln.mm(t(kiln, X), t(kiln, X)).dtype == kiln.float32
        assert kiln.mm(t(kiln, X), t(kiln, X)).dtype == kiln.float16
    assert not kiln.is_autocast_enabled("cpu") and kiln.get_autocast_dtype("cpu") == kiln.bfloat16

    @kiln.autocast("cpu")
    def product(a):
        return a @ a
    assert product(t(kiln, X)).dtype == kiln.bfloat16 and not kiln.is_autocast_enabled("cpu")
    with pytest.raises(ZeroDivisionError):  # the state is restored when the block raises
        with kiln.amp.autocast("cpu"):
            1 / 0
    assert not kiln.is_autocast_enabled("cpu")


def test_warnings_and_errors_as_torch():
    for make in (lambda lib: lib.autocast("cuda"), lambda lib: lib.cuda.amp.autocast(),
                 lambda lib: lib.cpu.amp.autocast()):
        with warnings.catch_warnings(record=True) as want:
            warnings.simplefilter("always")
            make(torch)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            ctx = make(kiln)
        assert [w.category for w in got] == [w.category for w in want]
        with ctx:
            assert kiln.mm(t(kiln, X), t(kiln, X)).dtype == (kiln.bfloat16 if ctx.device == "cpu" else kiln.float32)
    for bad in (1, "xyz"):
        with pytest.raises(Exception) as want:
            torch.autocast(bad)
        with pytest.raises(type(want.value)):
            kiln.autocast(bad)


def test_custom_fwd_and_bwd():
    seen = {}

    class Square(kiln.autograd.Function):
        @staticmethod
        @kiln.amp.custom_fwd(device_type="cpu", cast_inputs=kiln.float32)
        def forward(ctx, x):
            seen["fwd"] = (x.dtype, kiln.is_autocast_enabled("cpu"))
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @kiln.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            seen["bwd"] = kiln.is_autocast_enabled("cpu")
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = t(kiln, X, "bfloat16").requires_grad_()
    with kiln.autocast("cpu"):
        y = Square.apply(x)
    y.float().sum().backward()
    assert seen == {"fwd": (kiln.float32, False), "bwd": True} and y.dtype == kiln.float32


def program(x, w):
    with kiln.autocast("cpu"):
        h = kiln.nn.functional.linear(x, w).relu()
        loss = kiln.nn.functional.mse_loss(h, kiln.zeros_like(h, dtype=kiln.float32))
    return h, loss, (x @ x.mT).sum()  # after the block: float32 again


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_casts_as_eager(backend):
    want_x, want_w = t(kiln, X).requires_grad_(), t(kiln, W).requires_grad_()
    want = program(want_x, want_w)
    (want[1] + want[2]).backward()
    kiln._dynamo.reset()
    got_x, got_w = t(kiln, X).requires_grad_(), t(kiln, W).requires_grad_()
    got = kiln.compile(program, backend=backend, fullgraph=True)(got_x, got_w)
    (got[1] + got[2]).backward()
    assert [r.dtype for r in got] == [r.dtype for r in want] == [kiln.bfloat16, kiln.float32, kiln.float32]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.array(g.float().tolist()), np.array(w.float().tolist()), rtol=1e-2, atol=1e-2)
    for g, w in ((got_x, want_x), (got_w, want_w)):
        assert g.grad.dtype == kiln.float32
        np.testing.assert_allclose(np.array(g.grad.tolist()), np.array(w.grad.tolist()), rtol=1e-2, atol=1e-2)
    assert not kiln.is_autocast_enabled("cpu")


def test_compiled_graph_break_inside_the_block():
    def f(x):
        with kiln.autocast("cpu"):
            a = x @ x
            print("", end="")  # a graph break inside the block
            b = a @ x
        return a, b, x @ x

    want = f(t(kiln, X))
    kiln._dynamo.reset()
    got = kiln.compile(f, backend="aot_eager")(t(kiln, X))
    assert [r.dtype for r in got] == [r.dtype for r in want] == [kiln.bfloat16, kiln.bfloat16, kiln.float32]
    assert not kiln.is_autocast_enabled("cpu")
