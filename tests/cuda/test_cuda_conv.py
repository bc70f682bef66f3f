"""convolution (plain, transposed, 1-D, grouped, strided, dilated), 2-D pooling and batch_norm on
CUDA, forward and backward, against kiln's CPU kernels (tested against PyTorch in tests/): every
floating dtype, non-contiguous inputs, and the digits CNN's training steps step by step."""

import os
import sys

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F

from cuda_util import FLOATS, INTS, close_scaled as close, host, needs_kernels

pytestmark = needs_kernels


@pytest.fixture(autouse=True)
def _exact_float32():
    """float32 convolutions in full precision (kiln.backends.cudnn.allow_tf32 defaults to True, as in
    PyTorch) so they compare with the CPU's; test_conv2d_tf32 turns it back on. Tests that pick the
    im2col path (cudnn.enabled = False) get cuDNN back afterwards."""
    kiln.backends.cudnn.allow_tf32 = False
    yield
    kiln.backends.cudnn.allow_tf32 = True
    kiln.backends.cudnn.enabled = True


# 16-bit floats: the GEMMs round their products to the dtype once on CUDA, in float32 on the CPU
TOL = {"float32": 2e-4, "float64": 1e-10, "bfloat16": 8e-2, "float16": 1e-2}


def both(fn, *tensors, grad_seed=9):
    """fn on CPU leaves and on their CUDA copies: outputs and the gradients of every leaf for a
    seeded output gradient."""
    cpu = [t.clone().requires_grad_() if t is not None else None for t in tensors]
    gpu = [t.cuda().requires_grad_() if t is not None else None for t in tensors]
    yc, yg = fn(*cpu), fn(*gpu)
    g = host("float64", yc.shape, grad_seed).to(yc.dtype)
    yc.backward(g)
    yg.backward(g.cuda())
    return yg, yc, [(a.grad if a is not None else None, c.grad if c is not None else None) for a, c in zip(gpu, cpu)]


CONVS = [  # (input shape, weight shape, stride, padding, dilation, groups)
    ((2, 3, 9, 11), (4, 3, 3, 3), 1, 1, 1, 1),
    ((3, 4, 8, 8), (6, 2, 3, 2), (2, 1), (1, 0), 1, 2),
    ((1, 6, 12, 10), (6, 1, 3, 3), 1, 2, 2, 6),  # depthwise, dilated
    ((4, 5, 7, 7), (8, 5, 1, 1), 1, 0, 1, 1),    # 1x1
    ((2, 3, 10, 10), (4, 3, 5, 5), 3, 2, 1, 1),
]


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("case", range(len(CONVS)))
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(name, case, bias):
    xs, ws, stride, padding, dilation, groups = CONVS[case]
    x, w = host(name, xs, 1, -1, 1), host(name, ws, 2, -1, 1)
    b = host(name, (ws[0],), 3) if bias else None
    yg, yc, grads = both(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups), x, w, b)
    tol = TOL[name]
    close(yg, yc, tol, "forward")
    for (a, c), what in zip(grads, ["grad input", "grad weight", "grad bias"]):
        if c is not None:
            close(a, c, tol * 4, what)


@pytest.mark.parametrize("name", ["float32", "float64", "float16"])
def test_conv_transpose2d_and_conv1d(name):
    tol = TOL[name]
    x, w, b = host(name, (2, 4, 5, 6), 1, -1, 1), host(name, (4, 3, 3, 2), 2, -1, 1), host(name, (6,), 3)
    fn = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)  # noqa: E731
    yg, yc, grads = both(fn, x, w, b)
    close(yg, yc, tol, "transposed forward")
    for (a, c), what in zip(grads, ["grad input", "grad weight", "grad bias"]):
        close(a, c, tol * 4, what)
    x1, w1 = host(name, (3, 4, 17), 4, -1, 1), host(name, (5, 4, 3), 5, -1, 1)
    yg, yc, grads = both(lambda x, w: F.conv1d(x, w, None, 2, 1, 2), x1, w1)
    close(yg, yc, tol, "conv1d forward")
    for (a, c), what in zip(grads, ["grad input", "grad weight"]):
        close(a, c, tol * 4, what)


def test_conv2d_non_contiguous_and_channels_last():
    x = host("float32", (2, 3, 10, 9), 1).transpose(2, 3)
    w = host("float32", (5, 3, 3, 3), 2)
    close(F.conv2d(x.cuda(), w.cuda(), padding=1), F.conv2d(x, w, padding=1), 2e-4, "transposed view")
    xl = host("float32", (2, 3, 8, 8), 3).contiguous(memory_format=kiln.channels_last)
    got = F.conv2d(xl.cuda(), w.cuda(), padding=1)
    close(got, F.conv2d(xl, w, padding=1), 2e-4, "channels_last")
    assert got.is_contiguous(memory_format=kiln.channels_last)


@pytest.mark.parametrize("cudnn", [True, False], ids=["cudnn", "im2col"])
def test_conv2d_tf32(cudnn):
    """allow_tf32 governs both paths. kiln's im2col GEMMs always round to TF32 when allowed; cuDNN
    uses TF32 only where the algorithm its heuristic picks runs on tensor cores (as in PyTorch), so
    there the result need only be as close as TF32 allows."""
    kiln.backends.cudnn.enabled = cudnn
    try:
        x, w = host("float32", (4, 32, 16, 16), 1, -1, 1), host("float32", (32, 32, 3, 3), 2, -1, 1)
        want = F.conv2d(x, w, padding=1)
        exact = F.conv2d(x.cuda(), w.cuda(), padding=1)
        kiln.backends.cudnn.allow_tf32 = True
        fast = F.conv2d(x.cuda(), w.cuda(), padding=1)
    finally:
        kiln.backends.cudnn.enabled = True
    close(exact, want, 2e-4, "float32")
    close(fast, want, 1e-2, "TF32: 10 mantissa bits in the products")
    if not cudnn:
        assert not kiln.equal(fast, exact), "TF32 GEMMs round their inputs"


@pytest.mark.parametrize("cudnn", [True, False], ids=["cudnn", "im2col"])
def test_conv2d_in_blocks_of_images(cudnn):
    # im2col: 8 images of 576 x 16384 columns (38 MB each) exceed one block's 256 MB: two blocks,
    # and the weight gradient accumulates across them
    kiln.backends.cudnn.enabled = cudnn
    x, w, b = host("float32", (8, 64, 128, 128), 1, -1, 1), host("float32", (16, 64, 3, 3), 2, -1, 1), host(
        "float32", (16,), 3)
    yg, yc, grads = both(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b)
    close(yg, yc, 2e-4, "forward")
    for (a, c), what in zip(grads, ["grad input", "grad weight", "grad bias"]):
        close(a, c, 1e-3, what)


def test_conv_dtype_errors():
    x, w = kiln.ones(1, 1, 3, 3, dtype=kiln.int64).cuda(), kiln.ones(1, 1, 2, 2, dtype=kiln.int64).cuda()
    with pytest.raises(NotImplementedError, match="slow_conv2d_cuda.*Long"):
        F.conv2d(x, w)
    with pytest.raises(NotImplementedError, match="avg_pool2d_out_cuda_frame.*Long"):
        F.avg_pool2d(x, 2)


POOLS = [  # kernel, stride, padding, dilation, ceil_mode
    (2, None, 0, 1, False), (3, 2, 1, 1, False), (3, 2, 1, 1, True), ((2, 3), (1, 2), (1, 1), (2, 1), False),
    (3, 3, 0, 1, True),
]


@pytest.mark.parametrize("name", FLOATS + INTS)
@pytest.mark.parametrize("case", range(len(POOLS)))
def test_max_pool2d(name, case):
    k, s, p, d, ceil = POOLS[case]
    x = host(name, (2, 3, 11, 10), case)
    if name in FLOATS:
        x[0, 0, 1, 1] = float("nan")
    fn = lambda x: F.max_pool2d(x, k, s, p, d, ceil, return_indices=True)  # noqa: E731
    (vg, ig), (vc, ic) = fn(x.cuda()), fn(x)
    close(vg, vc, 0, "values")
    close(ig, ic, 0, "indices")
    if name in FLOATS:
        yg, yc, grads = both(lambda x: F.max_pool2d(x, k, s, p, d, ceil), x)
        close(grads[0][0], grads[0][1], TOL[name], "grad input")


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("case", [(2, None, 0, False, True, None), (3, 2, 1, False, True, None),
                                  (3, 2, 1, True, False, None), ((3, 2), (2, 1), (1, 0), True, True, 5)])
def test_avg_pool2d(name, case):
    k, s, p, ceil, include_pad, divisor = case
    x = host(name, (2, 3, 9, 10), 7)
    yg, yc, grads = both(lambda x: F.avg_pool2d(x, k, s, p, ceil, include_pad, divisor), x)
    close(yg, yc, TOL[name] / 4, "forward")
    close(grads[0][0], grads[0][1], TOL[name] / 4, "grad input")


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("out", [(1, 1), (3, 4), (5, 7), (9, 10)])
def test_adaptive_avg_pool2d(name, out):
    x = host(name, (2, 3, 9, 10), 8).transpose(2, 3).transpose(2, 3)[:, :, :, :]
    yg, yc, grads = both(lambda x: F.adaptive_avg_pool2d(x, out), x)
    close(yg, yc, TOL[name] / 4, "forward")
    close(grads[0][0], grads[0][1], TOL[name] / 4, "grad input")


def test_max_pool2d_backward_bad_index_raises_at_synchronize():
    x = host("float32", (1, 1, 4, 4), 1).cuda()
    g = kiln.ones(1, 1, 2, 2).cuda()
    bad = kiln.tensor([[[[0, 3], [8, 99]]]]).cuda()
    kiln.ops.aten.max_pool2d_with_indices_backward(g, x, [2, 2], [2, 2], [0, 0], [1, 1], False, bad)
    with pytest.raises(IndexError, match="index 99 of indices is out of bounds"):
        kiln.cuda.synchronize()
    kiln.cuda.synchronize()  # reported once; the context lives on


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("shape", [(8, 5), (4, 3, 7), (3, 4, 5, 6)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training(name, shape, affine):
    tol = TOL[name] / 4 if name != "float32" else 3e-5
    x = host(name, shape, 1)
    pdt = "float32" if name in ("float16", "bfloat16") else name
    C = shape[1]
    w, b = (host(pdt, (C,), 2), host(pdt, (C,), 3)) if affine else (None, None)
    stats = {dev: (kiln.zeros(C, dtype=getattr(kiln, pdt), device=dev), kiln.ones(C, dtype=getattr(kiln, pdt), device=dev))
             for dev in ("cpu", "cuda")}
    holder = {}

    def fn(x, w, b):
        rm, rv = stats[x.device.type]
        holder[x.device.type] = kiln.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        return F.batch_norm(x, rm.clone(), rv.clone(), w, b, True, 0.1, 1e-5)

    yg, yc, grads = both(fn, x, w, b)
    close(yg, yc, tol, "forward")
    for (a, c), what in zip(grads, ["grad input", "grad weight", "grad bias"]):
        if c is not None:
            close(a, c, tol * 4, what)
    (_, mg, ig), (_, mc, ic) = holder["cuda"], holder["cpu"]
    close(mg, mc, tol, "save_mean")
    close(ig, ic, tol * 4, "save_invstd")
    for a, c, what in zip(stats["cuda"], stats["cpu"], ["running_mean", "running_var"]):
        close(a, c, tol, what)


@pytest.mark.parametrize("name", FLOATS)
def test_batch_norm_eval_and_modules(name):
    tol = TOL[name] / 4 if name != "float32" else 3e-5
    x = host(name, (4, 3, 5, 5), 4)
    pdt = "float32" if name in ("float16", "bfloat16") else name
    rm, rv = host(pdt, (3,), 5), host(pdt, (3,), 6, 0.5, 2.0)
    w, b = host(pdt, (3,), 7), host(pdt, (3,), 8)
    fn = lambda x, w, b: F.batch_norm(x, rm.to(x.device), rv.to(x.device), w, b, False, 0.1, 1e-5)  # noqa: E731
    yg, yc, grads = both(fn, x, w, b)
    close(yg, yc, tol, "eval forward")
    for (a, c), what in zip(grads, ["grad input", "grad weight", "grad bias"]):
        close(a, c, tol * 4, what)
    kiln.manual_seed(0)
    cpu = kiln.nn.BatchNorm2d(3).to(getattr(kiln, pdt))
    gpu = kiln.nn.BatchNorm2d(3).to(getattr(kiln, pdt)).cuda()
    for _ in range(3):
        xs = host(name, (6, 3, 4, 4), 10)
        close(gpu(xs.cuda()), cpu(xs), tol, "module, training")
    close(gpu.running_var, cpu.running_var, tol, "module running_var")
    assert int(gpu.num_batches_tracked) == 3
    gpu.eval(), cpu.eval()
    close(gpu(x.cuda()), cpu(x), tol, "module, eval")


def test_digits_cnn_trains_on_cuda_as_on_cpu():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    from digits import cnn, load_digits

    x_train, y_train, _, _ = load_digits()
    losses = {}
    for dev in ("cpu", "cuda"):
        kiln.manual_seed(0)
        model = cnn(kiln).to(dev)
        opt = kiln.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=1e-4)
        out = []
        for step in range(8):
            xb = kiln.tensor(x_train[step * 64:(step + 1) * 64]).to(dev)
            yb = kiln.tensor(y_train[step * 64:(step + 1) * 64]).to(dev)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            out.append(loss.item())
        losses[dev] = out
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-4, atol=1e-5)
