"""kiln.library operators on CUDA tensors: a device-generic kernel, a kernel per device (the
dispatcher picks by the tensors' device), a backward, and a compiled function calling one."""

import itertools

import kiln
import kiln._dynamo as dynamo

from cuda_util import close, needs_kernels

pytestmark = needs_kernels
_names = itertools.count()


def fresh():
    return f"kiln_cuda_test_{next(_names)}"


def test_a_device_generic_kernel_and_a_kernel_per_device():
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::shifted", mutates_args=())
    def shifted(x: kiln.Tensor, by: float) -> kiln.Tensor:
        return x + by

    @kiln.library.custom_op(f"{ns}::where_am_i", mutates_args=(), device_types="cpu")
    def where_am_i(x: kiln.Tensor) -> kiln.Tensor:
        return x * 0 + 1

    @where_am_i.register_kernel("cuda")
    def _(x):
        return x * 0 + 2

    x = kiln.randn(4, 5)
    close(shifted(x.cuda(), 1.5), x + 1.5, 1e-6)
    assert where_am_i(x).eq(1).all()
    got = where_am_i(x.cuda())
    assert got.device.type == "cuda" and got.cpu().eq(2).all()


def test_a_backward_and_a_compile_on_cuda():
    ns = fresh()

    @kiln.library.custom_op(f"{ns}::softclip", mutates_args=())
    def softclip(x: kiln.Tensor, limit: float) -> kiln.Tensor:
        return limit * (x / limit).tanh()

    softclip.register_fake(lambda x, limit: kiln.empty_like(x))

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.limit = inputs[1]

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (1 - (x / ctx.limit).tanh() ** 2), None

    softclip.register_autograd(backward, setup_context=setup)
    host = kiln.randn(6, 7) * 3

    def f(x):
        return (softclip(x * 2, 1.5) * x).sum()

    want_x = host.clone().requires_grad_()
    f(want_x).backward()
    for backend in (None, "aot_eager"):
        dynamo.reset()
        x = host.cuda().requires_grad_()
        run = f if backend is None else kiln.compile(f, backend=backend)
        run(x).backward()
        close(x.grad, want_x.grad, 1e-5, backend)
