"""Convolutions on oneDNN (runtime/onednn, tensor/ops/conv_onednn.cc) and the channels-last kernels
around them (max_pool2d, batch_norm, layout copies, elementwise loops in memory order), against
PyTorch 2.13: values, gradients and strides, with oneDNN on and off, in every layout a model
hands a convolution (planar, channels-last input or weights, strided slices, expanded tensors)."""

import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the oracle, installed for Python 3.11 only

import kiln

LIBDNNL = "/usr/lib/x86_64-linux-gnu/libdnnl.so.2"
RNG = np.random.default_rng(7)


def test_loaded_where_the_machine_has_it():
    mk = kiln.backends.mkldnn
    if not os.path.exists(LIBDNNL):
        assert not mk.is_available() and "libdnnl" in mk._unavailable_reason()
        pytest.skip("libdnnl2 is not installed (tools/setup.sh installs it)")
    assert mk.is_available(), mk._unavailable_reason()
    assert mk._version() // 10000 == 2
    with mk.flags(enabled=False):
        assert mk.enabled is False and not mk.is_available()
        assert "enabled = False" in mk._unavailable_reason()
    assert mk.enabled is True and mk.is_available()
    mk.enabled = False
    assert not mk.is_available()
    mk.enabled = True
    with pytest.raises(RuntimeError):
        mk.enabled = 1  # PyTorch's setters take bools only
    assert mk.enabled is True


def test_environment_switch_off():
    code = "import kiln; m = kiln.backends.mkldnn; print(m.is_available(), m._unavailable_reason())"
    env = dict(os.environ, KILN_ONEDNN="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False disabled by KILN_ONEDNN=0"
    env = dict(os.environ, KILN_ONEDNN_LIB="/nonexistent/libdnnl.so.2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("False cannot load /nonexistent/libdnnl.so.2")


def _layout(lib, t, kind):
    """t laid out as `kind`: planar, channels-last, a strided slice, or expanded along the batch."""
    if kind == "channels_last":
        return t.contiguous(memory_format=lib.channels_last)
    if kind == "slice":  # every other element of a wider tensor: not dense
        wide = lib.cat([t, t], dim=-1)
        return wide[..., ::2]
    if kind == "expanded":
        return t[:1].expand(t.shape[0], *t.shape[1:])
    return t


# (N, C, H, W, O, kernel, stride, padding, dilation, groups, bias)
CASES = [
    (2, 3, 17, 17, 16, 3, 1, 1, 1, 1, True),
    (2, 8, 12, 10, 16, 3, 2, 1, 1, 1, False),
    (3, 8, 9, 9, 8, 3, 1, 2, 2, 2, True),
    (2, 16, 8, 8, 16, 3, 1, 1, 1, 16, False),  # depthwise
    (4, 16, 8, 8, 32, 1, 1, 0, 1, 1, True),
    (2, 4, 23, 19, 8, 5, 3, 2, 1, 1, True),
    (1, 3, 32, 32, 8, 7, 2, 3, 1, 1, False),
    (16, 64, 2, 2, 64, 3, 1, 1, 1, 1, False),  # few output positions: kiln's own kernel
]


def _conv_both(case, x_kind, w_kind, dtype=np.float32, enabled=True):
    N, C, H, W, O, k, s, p, d, g, bias = case
    x = RNG.standard_normal((N, C, H, W)).astype(dtype)
    w = (RNG.standard_normal((O, C // g, k, k)) / np.sqrt(C // g * k * k)).astype(dtype)
    b = RNG.standard_normal(O).astype(dtype)
    results = []
    for lib in (kiln, torch):
        X, Wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        B = lib.tensor(b, requires_grad=True) if bias else None
        with kiln.backends.mkldnn.flags(enabled=enabled):
            y = lib.nn.functional.conv2d(_layout(lib, X, x_kind), _layout(lib, Wt, w_kind), B, s, p, d, g)
            gy = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)).astype(dtype))
            y.backward(gy)
        results.append((y, X.grad, Wt.grad, B.grad if bias else None))
    return results


def _close(k, t, rtol=2e-5):
    """Within rtol of the largest value, and 1e-5 absolute (bias gradients are sums that cancel)."""
    kn, tn = k.detach().numpy(), t.detach().numpy()
    scale = max(float(np.abs(tn).max()), 1e-6)
    np.testing.assert_allclose(kn, tn, rtol=0, atol=rtol * scale + 1e-5)


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("x_kind,w_kind", [("planar", "planar"), ("channels_last", "planar"),
                                           ("planar", "channels_last"), ("channels_last", "channels_last"),
                                           ("slice", "planar"), ("expanded", "channels_last")])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_conv2d_forward_backward(case, x_kind, w_kind, enabled):
    calls = kiln.backends.mkldnn._convolution_calls()
    (ky, kgx, kgw, kgb), (ty, tgx, tgw, tgb) = _conv_both(case, x_kind, w_kind, enabled=enabled)
    # forward and backward on oneDNN when it is on and the weights are reused enough (N*oh*ow >= 128)
    N, _, H, W, _, k, s, p, d, _, _ = case
    positions = N * ((H + 2 * p - d * (k - 1) - 1) // s + 1) * ((W + 2 * p - d * (k - 1) - 1) // s + 1)
    expected = 2 if enabled and positions >= 128 and kiln.backends.mkldnn.is_available() else 0
    assert kiln.backends.mkldnn._convolution_calls() - calls == expected
    assert ky.stride() == ty.stride() and ky.dtype == kiln.float32
    for k, t in ((ky, ty), (kgx, tgx), (kgw, tgw), (kgb, tgb)):
        if t is not None:
            _close(k, t)


@pytest.mark.parametrize("cl_input,cl_weight", [(False, False), (True, False), (False, True), (True, True)])
def test_convolution_backward_strides(cl_input, cl_weight):
    """grad_input and grad_weight come back channels-last when either operand is, as PyTorch's."""
    x = RNG.standard_normal((2, 8, 9, 9)).astype(np.float32)
    w = RNG.standard_normal((16, 8, 3, 3)).astype(np.float32)
    dy = RNG.standard_normal((2, 16, 9, 9)).astype(np.float32)
    outs = []
    for lib in (kiln, torch):
        X, Wt = lib.tensor(x), lib.tensor(w)
        if cl_input:
            X = X.contiguous(memory_format=lib.channels_last)
        if cl_weight:
            Wt = Wt.contiguous(memory_format=lib.channels_last)
        outs.append(lib.ops.aten.convolution_backward(lib.tensor(dy), X, Wt, [16], [1, 1], [1, 1], [1, 1], False,
                                                      [0, 0], 1, [True, True, True]))
    for k, t in zip(*outs):
        assert k.stride() == t.stride()
        _close(k, t)


def test_conv1d_and_reduced_precision():
    x = RNG.standard_normal((3, 8, 40)).astype(np.float32)
    w = RNG.standard_normal((12, 4, 5)).astype(np.float32)
    for dtype, tol in ((kiln.float32, 2e-5), (kiln.bfloat16, 2e-2)):
        tdtype = getattr(torch, str(dtype).split(".")[1])
        res = []
        for lib, dt in ((kiln, dtype), (torch, tdtype)):
            X = lib.tensor(x).to(dt).requires_grad_()
            Wt = lib.tensor(w).to(dt).requires_grad_()
            y = lib.nn.functional.conv1d(X, Wt, None, 2, 2, 1, 2)
            y.float().pow(2).sum().backward()
            res.append((y.float(), X.grad.float(), Wt.grad.float()))
        for k, t in zip(*res):
            _close(k, t, tol)


def test_model_trains_the_same_with_and_without_onednn():
    """Two SGD steps of a small CNN: oneDNN's convolutions give PyTorch's losses and weights."""
    def model(lib):
        lib.manual_seed(0)
        nn = lib.nn
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 4 * 4, 10))
    x = RNG.standard_normal((8, 3, 16, 16)).astype(np.float32)
    y = RNG.integers(0, 10, 8)
    torch_model = model(torch)
    state = {k: v.detach().numpy().copy() for k, v in torch_model.state_dict().items()}
    runs = []
    for lib, channels_last, enabled in ((torch, False, True), (kiln, False, True), (kiln, True, True),
                                        (kiln, False, False)):
        m = torch_model if lib is torch else model(kiln)
        m.load_state_dict({k: lib.tensor(v) for k, v in state.items()})
        xx = lib.tensor(x)
        if channels_last:
            m = m.to(memory_format=lib.channels_last)
            xx = xx.contiguous(memory_format=lib.channels_last)
        opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        losses = []
        with kiln.backends.mkldnn.flags(enabled=enabled):
            for _ in range(2):
                opt.zero_grad()
                loss = lib.nn.functional.cross_entropy(m(xx), lib.tensor(y))
                loss.backward()
                opt.step()
                losses.append(loss.item())
        runs.append((losses, {k: v.detach().numpy() for k, v in m.state_dict().items()}))
    for losses, weights in runs[1:]:
        np.testing.assert_allclose(losses, runs[0][0], rtol=1e-4)
        for k, v in runs[0][1].items():
            np.testing.assert_allclose(weights[k], v, rtol=1e-3, atol=1e-4, err_msg=k)


# --- channels-last kernels ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("layout", ["planar", "channels_last"])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", [((2, 16, 9, 9), 3, 2, 1, 1, False), ((3, 5, 8, 7), 2, 2, 0, 1, True),
                                                 ((1, 12, 6, 6), 3, 1, 1, 2, False), ((2, 3, 10, 10), 3, 2, 1, 1, True)])
def test_max_pool2d_layouts(shape, k, s, p, d, ceil, layout, dtype):
    a = (RNG.standard_normal(shape) * 10).astype(dtype)
    if dtype != "int32":
        a.flat[::17] = np.nan
        a.flat[5::23] = -np.inf
    outs = []
    for lib in (kiln, torch):
        x = lib.tensor(a)
        if layout == "channels_last":
            x = x.contiguous(memory_format=lib.channels_last)
        grad = dtype != "int32"
        if grad:
            x.requires_grad_()
        y, i = lib.nn.functional.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        gx = None
        if grad:
            y.backward(lib.ones_like(y))
            gx = x.grad.numpy()
        outs.append((y.detach().numpy(), i.numpy(), gx, y.stride(), i.stride()))
    (ky, ki, kg, kys, kis), (ty, ti, tg, tys, tis) = outs
    np.testing.assert_array_equal(ky, ty)
    np.testing.assert_array_equal(ki, ti)
    if kg is not None:
        np.testing.assert_array_equal(kg, tg)
    assert (kys, kis) == (tys, tis)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(4, 6, 5, 3), (2, 70, 3, 3), (8, 3, 1, 1)])
def test_batch_norm_channels_last(shape, dtype, training):
    a = (RNG.standard_normal(shape) * 3 + 1).astype(dtype)
    g = np.sin(np.arange(np.prod(shape))).reshape(shape).astype(dtype)
    outs = []
    for lib in (kiln, torch):
        bn = lib.nn.BatchNorm2d(shape[1]).to(getattr(lib, dtype))
        if not training:
            bn.eval()
            bn.running_mean.fill_(0.3)
            bn.running_var.fill_(2.0)
        x = lib.tensor(a).contiguous(memory_format=lib.channels_last).requires_grad_()
        y = bn(x)
        y.backward(lib.tensor(g))
        outs.append((y.detach().numpy(), x.grad.numpy(), bn.running_mean.numpy(), bn.running_var.numpy(), y.stride()))
    tol = 1e-5 if dtype == "float32" else 1e-12
    for k, t in zip(outs[0][:4], outs[1][:4]):
        np.testing.assert_allclose(k, t, rtol=tol, atol=tol)
    assert outs[0][4] == outs[1][4]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8", "bool", "complex64"])
@pytest.mark.parametrize("shape", [(2, 3, 40, 40), (4, 64, 16, 16), (3, 17, 9, 31), (2, 1, 64, 64), (64, 80, 1, 1)])
def test_layout_copies(shape, dtype):
    a = (RNG.standard_normal(shape) * 100).astype(dtype)
    k = kiln.tensor(a)
    cl = k.contiguous(memory_format=kiln.channels_last)
    back = cl.contiguous()
    assert cl.is_contiguous(memory_format=kiln.channels_last) and back.is_contiguous()
    np.testing.assert_array_equal(cl.numpy(), a)
    np.testing.assert_array_equal(back.numpy(), a)
    assert cl.stride() == torch.tensor(a).contiguous(memory_format=torch.channels_last).stride()


def test_elementwise_on_channels_last_and_permuted_operands():
    """Loops run in memory order (Note [Dims in memory order]); values and strides stay PyTorch's
    for channels-last, permuted and broadcast operands, in place and out of place."""
    a = RNG.standard_normal((2, 8, 5, 6)).astype(np.float32)
    b = RNG.standard_normal((2, 8, 5, 6)).astype(np.float32)
    c = RNG.standard_normal((8, 1, 1)).astype(np.float32)

    def cases(lib):
        x = lib.tensor(a).contiguous(memory_format=lib.channels_last)
        y = lib.tensor(b)
        z = lib.tensor(b).permute(3, 1, 0, 2).contiguous().permute(2, 1, 3, 0)  # another dense order
        yield x * 2 + 1
        yield x + y
        yield y + x
        yield x * lib.tensor(c)
        yield lib.relu(x)
        yield x + z
        w = x.clone()
        w.add_(z)
        yield w
        v = z.clone()
        v.mul_(x)
        yield v
        yield lib.where(x > 0, x, z)

    for k, t in zip(cases(kiln), cases(torch)):
        np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-6)
        assert k.stride() == t.stride(), (k.stride(), t.stride())


def test_onednn_keeps_kiln_thread_count():
    """At kiln.set_num_threads(1) oneDNN runs on the calling thread alone: its OpenMP team follows
    kiln's count, set before a primitive is made (primitives keep the count they were made with)."""
    if not kiln.backends.mkldnn.is_available():
        pytest.skip(kiln.backends.mkldnn._unavailable_reason())
    code = (
        "import os, kiln\n"
        "kiln.set_num_threads(1)\n"
        "x = kiln.randn(16, 64, 16, 16); w = kiln.randn(64, 64, 3, 3)\n"
        "(x + 1).sum()\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        "calls = kiln.backends.mkldnn._convolution_calls()\n"
        "for _ in range(3): kiln.nn.functional.conv2d(x, w, padding=1)\n"
        "assert kiln.backends.mkldnn._convolution_calls() == calls + 3\n"
        "print(before, len(os.listdir('/proc/self/task')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == out[1], f"threads before and after oneDNN's convolutions: {out}"


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_batch_split_across_threads(threads):
    """Note [Batches split across kiln's threads]: batches of at least kiln's thread count run in
    chunks, one per thread (the weight gradient summed over them); smaller ones on OpenMP's team.
    Batches 7 (unequal chunks) and 2 (fewer samples than 3 threads) against PyTorch."""
    old = kiln.get_num_threads()
    kiln.set_num_threads(threads)
    try:
        for batch in (7, 2):
            case = (batch, 8, 12, 12, 16, 3, 1, 1, 1, 1, True)
            for x_kind in ("planar", "channels_last"):
                (ky, kgx, kgw, kgb), (ty, tgx, tgw, tgb) = _conv_both(case, x_kind, "planar")
                for k, t in ((ky, ty), (kgx, tgx), (kgw, tgw), (kgb, tgb)):
                    _close(k, t)
    finally:
        kiln.set_num_threads(old)
