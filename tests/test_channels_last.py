"""memory_format=kiln.channels_last (issue 17): the strides of contiguous/to/clone/empty/empty_like
in the channels-last layout, convolution keeping it, Module.to(memory_format=...), and values and
gradients unchanged, against PyTorch 2.13 (eager and compiled)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the oracle, installed for Python 3.11 only

import kiln

RNG = np.random.default_rng(0)


def pair(shape):
    a = RNG.standard_normal(shape).astype(np.float32)
    return kiln.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 3, 1, 1), (2, 1, 4, 5), (3, 4, 1, 6)])
def test_layout_functions(shape):
    k, t = pair(shape)
    fns = [
        lambda m, x: x.contiguous(memory_format=m.channels_last),
        lambda m, x: x.to(memory_format=m.channels_last),
        lambda m, x: x.clone(memory_format=m.channels_last),
        lambda m, x: m.empty_like(x, memory_format=m.channels_last),
        lambda m, x: m.empty(shape, memory_format=m.channels_last),
        lambda m, x: m.empty_like(x.contiguous(memory_format=m.channels_last)),
        lambda m, x: x.contiguous(memory_format=m.channels_last).contiguous(),
        lambda m, x: x.contiguous(memory_format=m.channels_last) * 2 + 1,
        lambda m, x: x.contiguous(memory_format=m.channels_last).clone(),
        lambda m, x: x.to(memory_format=m.channels_last).to(m.float64),
    ]
    for fn in fns:
        kr, tr = fn(kiln, k), fn(torch, t)
        assert kr.stride() == tr.stride(), (kr.stride(), tr.stride())
    cl_k, cl_t = k.contiguous(memory_format=kiln.channels_last), t.contiguous(memory_format=torch.channels_last)
    np.testing.assert_array_equal(cl_k.numpy(), cl_t.numpy())
    assert cl_k.is_contiguous(memory_format=kiln.channels_last) == cl_t.is_contiguous(memory_format=torch.channels_last)
    assert cl_k.is_contiguous() == cl_t.is_contiguous()
    # already in the layout: the same tensor back
    assert cl_k.contiguous(memory_format=kiln.channels_last) is cl_k


def test_errors():
    for m in (torch, kiln):
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
            m.ones(2, 3).contiguous(memory_format=m.channels_last)
        with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
            m.ones(2, 3).t().contiguous(memory_format=m.preserve_format)
        with pytest.raises(RuntimeError, match="unsupported memory format Preserve"):
            m.empty(2, 3, memory_format=m.preserve_format)
        assert m.ones(2, 3).contiguous(memory_format=m.preserve_format).stride() == (3, 1)


@pytest.mark.parametrize("cl_input,cl_weight", [(True, False), (False, True), (True, True)])
def test_convolution_keeps_channels_last(cl_input, cl_weight):
    kx, tx = pair((2, 3, 7, 6))
    kw, tw = pair((4, 3, 3, 3))
    kb, tb = pair((4,))
    if cl_input:
        kx, tx = kx.contiguous(memory_format=kiln.channels_last), tx.contiguous(memory_format=torch.channels_last)
    if cl_weight:
        kw, tw = kw.contiguous(memory_format=kiln.channels_last), tw.contiguous(memory_format=torch.channels_last)
    for kwargs in ({}, {"stride": 2, "padding": 1}, {"dilation": 2}):
        ko = kiln.nn.functional.conv2d(kx, kw, kb, **kwargs)
        to = torch.nn.functional.conv2d(tx, tw, tb, **kwargs)
        assert ko.stride() == to.stride(), kwargs
        np.testing.assert_allclose(ko.numpy(), to.numpy(), rtol=1e-5, atol=1e-5)


def test_module_to_channels_last_trains_as_torch():
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1))
    km = kiln.nn.Sequential(kiln.nn.Conv2d(3, 4, 3), kiln.nn.ReLU(), kiln.nn.Conv2d(4, 2, 1))
    km.load_state_dict({k: kiln.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    tm, km = tm.to(memory_format=torch.channels_last), km.to(memory_format=kiln.channels_last)
    for (name, kp), (_, tp) in zip(km.named_parameters(), tm.named_parameters()):
        assert kp.stride() == tp.stride(), name
        assert isinstance(kp, kiln.nn.Parameter)
    kx, tx = pair((2, 3, 6, 6))
    kx, tx = kx.contiguous(memory_format=kiln.channels_last), tx.contiguous(memory_format=torch.channels_last)
    ky, ty = km(kx), tm(tx)
    assert ky.stride() == ty.stride()
    ky.square().sum().backward()
    ty.square().sum().backward()
    for (name, kp), (_, tp) in zip(km.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(kp.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_channels_last_convolution(backend):
    kx, _ = pair((2, 3, 6, 5))
    kw, _ = pair((4, 3, 3, 3))
    kx = kx.contiguous(memory_format=kiln.channels_last)

    def f(x, w):
        return kiln.nn.functional.conv2d(x.relu(), w, padding=1).sigmoid()

    kiln._dynamo.reset()
    xe, xc = kx.clone().requires_grad_(), kx.clone().requires_grad_()
    expected = f(xe, kw)
    got = kiln.compile(f, backend=backend, fullgraph=True)(xc, kw)
    assert got.stride() == expected.stride()
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    expected.sum().backward()
    got.sum().backward()
    np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6)
