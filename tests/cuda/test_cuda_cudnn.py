"""CUDA convolutions through cuDNN (Note [cuDNN convolutions], tensor/ops/conv_cudnn.cc) against
kiln's own im2col kernels (kiln.backends.cudnn.enabled = False) and PyTorch's cuDNN: every
floating dtype, NCHW, channels-last and strided layouts, plain, transposed, grouped and 1-D
convolutions, forward and both gradients; the path actually taken (a count of cuDNN calls), the
layouts of results and gradients, deterministic algorithms, and tensors cuDNN does not take."""

import pytest

import kiln
import kiln.nn.functional as F

from cuda_util import close_scaled as close, host, needs_kernels

pytestmark = [needs_kernels, pytest.mark.skipif(not kiln.backends.cudnn.is_available(),
                                                reason="cuDNN (libcudnn.so.9) does not load here")]


@pytest.fixture(autouse=True)
def _flags():
    kiln.backends.cudnn.allow_tf32 = False  # exact float32, to compare with the im2col path
    yield
    kiln.backends.cudnn.allow_tf32 = True
    kiln.backends.cudnn.enabled = True
    kiln.backends.cudnn.deterministic = False


TOL = {"float32": 2e-4, "float64": 1e-10, "bfloat16": 8e-2, "float16": 1e-2}

CONVS = [  # (input shape, weight shape, keywords)
    ((2, 3, 9, 11), (4, 3, 3, 3), dict(padding=1)),
    ((3, 4, 8, 8), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), groups=2)),
    ((1, 6, 12, 10), (6, 1, 3, 3), dict(padding=2, dilation=2, groups=6)),  # depthwise, dilated
    ((4, 5, 7, 7), (8, 5, 1, 1), {}),                                        # 1x1
    ((8, 64, 14, 14), (64, 64, 3, 3), dict(padding=1)),                      # a ResNet block's
]

LAYOUTS = ["contiguous", "channels_last", "strided"]


def laid_out(t, layout):
    if layout == "channels_last":
        return t.contiguous(memory_format=kiln.channels_last)
    if layout == "strided":  # every other column of a wider tensor
        wide = kiln.cat([t, t], -1)
        return wide[..., ::2]
    return t


def run(fn, leaves, cudnn):
    """fn's output and its leaves' gradients on CUDA, through cuDNN or through kiln's own kernels;
    the number of cuDNN passes it took."""
    kiln.backends.cudnn.enabled = cudnn
    ins = [t.detach().clone().requires_grad_() for t in leaves]
    before = kiln._C._cudnn_convolutions()
    y = fn(*ins)
    g = host("float64", tuple(y.shape), 9).to(y.dtype).cuda()
    y.backward(g)
    return y, [t.grad for t in ins], kiln._C._cudnn_convolutions() - before


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", range(len(CONVS)))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_conv2d_cudnn_matches_im2col(name, case, layout):
    xs, ws, kw = CONVS[case]
    x = laid_out(host(name, xs, 1, -1, 1).cuda(), layout)
    w = laid_out(host(name, ws, 2, -1, 1).cuda(), "channels_last" if layout == "channels_last" else "contiguous")
    b = host(name, (ws[0],), 3).cuda()
    fn = lambda x, w, b: F.conv2d(x, w, b, **kw)  # noqa: E731
    y, grads, calls = run(fn, [x, w, b], True)
    if name == "float64" and layout == "channels_last":
        assert calls >= 1  # cuDNN 9 has no NHWC double backward: those passes run kiln's kernels
    else:
        assert calls == 3  # forward, backward data, backward filter
    y0, grads0, calls0 = run(fn, [x, w, b], False)
    assert calls0 == 0
    tol = TOL[name]
    close(y, y0.cpu(), tol, "forward")
    for a, c, what in zip(grads, grads0, ["grad input", "grad weight", "grad bias"]):
        close(a, c.cpu(), tol * 4, what)
    # layouts as PyTorch's cuDNN path leaves them: channels-last in, channels-last out and gradients
    cl = layout == "channels_last"
    assert y.is_contiguous(memory_format=kiln.channels_last) if cl else y.is_contiguous()
    assert grads[0].stride() == x.stride() or grads[0].is_contiguous(
        memory_format=kiln.channels_last if cl else kiln.contiguous_format)


@pytest.mark.parametrize("name", ["float32", "float64", "float16"])
def test_transposed_and_1d_cudnn_match_im2col(name):
    tol = TOL[name]
    x, w, b = host(name, (2, 4, 5, 6), 1, -1, 1).cuda(), host(name, (4, 3, 3, 2), 2, -1, 1).cuda(), host(name, (6,), 3).cuda()
    fn = lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)  # noqa: E731
    (y, grads, calls), (y0, grads0, _) = run(fn, [x, w, b], True), run(fn, [x, w, b], False)
    assert calls == 3
    close(y, y0.cpu(), tol, "transposed forward")
    for a, c in zip(grads, grads0):
        close(a, c.cpu(), tol * 4, "transposed grads")
    x1, w1 = host(name, (3, 4, 17), 4, -1, 1).cuda(), host(name, (5, 4, 3), 5, -1, 1).cuda()
    fn1 = lambda x, w: F.conv1d(x, w, None, 2, 1, 2)  # noqa: E731
    (y, grads, calls), (y0, grads0, _) = run(fn1, [x1, w1], True), run(fn1, [x1, w1], False)
    assert calls == 3
    close(y, y0.cpu(), tol, "conv1d forward")
    for a, c in zip(grads, grads0):
        close(a, c.cpu(), tol * 4, "conv1d grads")


def test_against_pytorch_cudnn():
    torch = pytest.importorskip("torch")
    x, w, b = host("float32", (4, 16, 20, 20), 1, -1, 1), host("float32", (32, 16, 3, 3), 2, -1, 1), host("float32", (32,), 3)
    g = host("float32", (4, 32, 10, 10), 4)
    torch.backends.cudnn.allow_tf32 = False
    try:
        tx, tw, tb = (torch.tensor(t.numpy(), device="cuda", requires_grad=True) for t in (x, w, b))
        ty = torch.nn.functional.conv2d(tx, tw, tb, stride=2, padding=1)
        ty.backward(torch.tensor(g.numpy(), device="cuda"))
    finally:
        torch.backends.cudnn.allow_tf32 = True
    y, grads, calls = run(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [x.cuda(), w.cuda(), b.cuda()], True)
    assert calls == 3
    # run() used its own seeded gradient: redo the backward with g
    kx, kw_, kb = (t.cuda().requires_grad_() for t in (x, w, b))
    F.conv2d(kx, kw_, kb, stride=2, padding=1).backward(g.cuda())
    for k, t, what in [(y, ty, "forward"), (kx.grad, tx.grad, "grad input"), (kw_.grad, tw.grad, "grad weight"),
                       (kb.grad, tb.grad, "grad bias")]:
        close(k, kiln.tensor(t.detach().cpu().numpy()), 1e-4, what)


def test_deterministic_weight_gradients_repeat_bitwise():
    kiln.backends.cudnn.deterministic = True
    x, w = host("float32", (16, 32, 28, 28), 1, -1, 1).cuda(), host("float32", (32, 32, 3, 3), 2, -1, 1).cuda()
    fn = lambda x, w: F.conv2d(x, w, padding=1)  # noqa: E731
    first = run(fn, [x, w], True)[1][1].cpu()
    for _ in range(3):
        assert kiln.equal(run(fn, [x, w], True)[1][1].cpu(), first)


def test_unaligned_and_integer_tensors_take_the_own_kernels():
    base = host("float32", (2 * 3 * 8 * 8 + 1,), 1).cuda()
    x = base[1:].view(2, 3, 8, 8)  # 4 bytes past an aligned address
    w = host("float32", (4, 3, 3, 3), 2).cuda()
    before = kiln._C._cudnn_convolutions()
    got = F.conv2d(x, w, padding=1)
    assert kiln._C._cudnn_convolutions() == before
    close(got, F.conv2d(x.cpu(), w.cpu(), padding=1), 2e-4, "unaligned")
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.conv2d(kiln.ones(1, 1, 4, 4, dtype=kiln.int64, device="cuda"), kiln.ones(1, 1, 3, 3, dtype=kiln.int64, device="cuda"))


def test_flags_and_version():
    assert isinstance(kiln.backends.cudnn.version(), int) and kiln.backends.cudnn.version() >= 90000
    kiln.backends.cudnn.enabled = False
    assert kiln.backends.cudnn.enabled is False
    x, w = host("float32", (1, 2, 5, 5), 1).cuda(), host("float32", (2, 2, 3, 3), 2).cuda()
    before = kiln._C._cudnn_convolutions()
    F.conv2d(x, w)
    assert kiln._C._cudnn_convolutions() == before
