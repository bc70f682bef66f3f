"""Random sampling on CUDA (tensor/cuda/kernels/random.cu, compiled by nvcc at build time): the same
Philox blocks and conversions as the CPU kernels, so a CUDA generator and a CPU generator with one seed
give the same values (uniform_, bernoulli_, random_ exactly; normal_ up to the last bit of log/cos).
The CPU kernels are the oracle (their distributions are tested against PyTorch's in tests/). Also the
per-device default generators (kiln.manual_seed seeds them; kiln.cuda.manual_seed, get/set_rng_state),
dropout forward and backward, nn layers made on the device, and PyTorch's generator-device errors."""

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F

from cuda_util import ALL, CUDA, FLOATS, needs_kernels

needs_cuda = pytest.mark.skipif(not CUDA, reason="needs CUDA (a GPU or the fake driver)")
SHAPES = [(7,), (33, 65), (1 << 20) + 3]


def gens(seed):
    return kiln.Generator().manual_seed(seed), kiln.Generator("cuda").manual_seed(seed)


def same(got, want, tol=0.0, what=""):
    assert got.device.type == "cuda" and got.dtype == want.dtype and got.shape == want.shape, what
    g, w = got.cpu().double().numpy(), want.double().numpy()
    if tol == 0:
        np.testing.assert_array_equal(g, w, err_msg=str(what))
    else:
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=str(what))


def shape_of(s):
    return s if isinstance(s, tuple) else (s,)


@needs_kernels
@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_uniform_and_normal_match_the_cpu(name, shape):
    dt = getattr(kiln, name)
    shape = shape_of(shape)
    for op, args, tol in [("uniform_", (), 0.0), ("uniform_", (-2.5, 4.0), 0.0), ("normal_", (), 1e-6),
                          ("normal_", (1.5, 0.25), 1e-6)]:
        gc, gg = gens(11)
        want = getattr(kiln.empty(shape, dtype=dt), op)(*args, generator=gc)
        got = getattr(kiln.empty(shape, dtype=dt, device="cuda"), op)(*args, generator=gg)
        same(got, want, tol if name in ("float32", "float64") else 1e-2, (op, args))
        assert gg.get_state()[2].item() == gc.get_state()[2].item(), "the same number of blocks is reserved"


@needs_kernels
@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("op", ["uniform_", "normal_"])
def test_outputs_not_aligned_to_a_block_are_stored_element_by_element(name, op):
    # a block's values are stored as one vector where the output is aligned to the block's bytes;
    # a contiguous view starting one element in is not, and takes the element-wise stores
    dt = getattr(kiln, name)
    for n in (1, 6, 1001):
        gc, gg = gens(5)
        want = getattr(kiln.zeros(n + 1, dtype=dt)[1:], op)(generator=gc)
        base = kiln.zeros(n + 2, dtype=dt, device="cuda")
        got = getattr(base[1:n + 1], op)(generator=gg)
        same(got, want, 0.0 if op == "uniform_" else (1e-6 if name in ("float32", "float64") else 1e-2), (op, n))
        assert base.cpu()[0].item() == 0 and base.cpu()[n + 1].item() == 0, "nothing written outside the view"


@needs_kernels
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_non_contiguous_outputs_are_filled_in_row_major_order(name):
    dt = getattr(kiln, name)
    gc, gg = gens(3)
    want = kiln.zeros(40, 30, dtype=dt).t()
    got = kiln.zeros(40, 30, dtype=dt, device="cuda").t()
    want.normal_(generator=gc)
    got.normal_(generator=gg)
    same(got, want, 1e-6)
    base = kiln.zeros(20, 20, dtype=dt, device="cuda")
    base[::2, 1::3].uniform_(generator=gg)
    assert (base.cpu()[1::2] == 0).all() and (base.cpu()[::2, 0::3] == 0).all(), "only the view is written"


@needs_kernels
@pytest.mark.parametrize("name", ALL)
def test_bernoulli_and_random_match_the_cpu(name):
    dt = getattr(kiln, name)
    shape = (129, 31)
    gc, gg = gens(5)
    same(kiln.empty(shape, dtype=dt, device="cuda").bernoulli_(0.3, generator=gg),
         kiln.empty(shape, dtype=dt).bernoulli_(0.3, generator=gc), what="bernoulli_(float)")
    p = kiln.rand(shape[1], dtype=kiln.float32)
    same(kiln.empty(shape, dtype=dt, device="cuda").bernoulli_(p.cuda(), generator=gg),
         kiln.empty(shape, dtype=dt).bernoulli_(p, generator=gc), what="bernoulli_(tensor, broadcast)")
    same(kiln.empty(shape, dtype=dt, device="cuda").random_(generator=gg),
         kiln.empty(shape, dtype=dt).random_(generator=gc), what="random_()")
    hi = 2 if name == "bool" else 100
    same(kiln.empty(shape, dtype=dt, device="cuda").random_(0, hi, generator=gg),
         kiln.empty(shape, dtype=dt).random_(0, hi, generator=gc), what="random_(from, to)")
    if name in ("int64", "float64"):
        same(kiln.empty(shape, dtype=dt, device="cuda").random_(-(2**40), 2**40, generator=gg),
             kiln.empty(shape, dtype=dt).random_(-(2**40), 2**40, generator=gc), what="wide range")


@needs_kernels
def test_factories_and_default_generators():
    for factory, args in [(kiln.rand, ((300, 7),)), (kiln.randn, ((300, 7),)), (kiln.randint, (-5, 9, (300, 7)))]:
        kiln.manual_seed(21)
        want = factory(*args)
        kiln.manual_seed(21)  # seeds the CPU's and every CUDA device's default generator
        got = factory(*args, device="cuda")
        same(got, want, 1e-6, factory.__name__)
    kiln.cuda.manual_seed(8)
    a = kiln.randn(1000, device="cuda")
    state = kiln.cuda.get_rng_state()
    b = kiln.randn(1000, device="cuda")
    kiln.cuda.set_rng_state(state)
    same(kiln.randn(1000, device="cuda"), b.cpu(), what="set_rng_state replays")
    same(a, kiln.randn(1000, generator=kiln.Generator().manual_seed(8)), 1e-6, "cuda.manual_seed")
    assert kiln.cuda.initial_seed() == 8
    kiln.manual_seed(4)
    want = kiln.randperm(50)
    kiln.manual_seed(4)
    got = kiln.randperm(50, device="cuda")
    same(got, want, what="randperm draws from the output device's generator")
    like = kiln.rand_like(kiln.empty(5, 6, device="cuda", dtype=kiln.float64))
    assert like.device.type == "cuda" and like.dtype == kiln.float64 and bool(((like >= 0) & (like < 1)).all())


@needs_kernels
@pytest.mark.parametrize("name", FLOATS)
def test_dropout_matches_the_cpu_forward_and_backward(name):
    dt = getattr(kiln, name)
    x = kiln.randn(37, 129).to(dt)
    for p in [0.0, 0.2, 0.5, 1.0]:
        kiln.manual_seed(9)
        xc = x.clone().requires_grad_()
        want = F.dropout(xc, p)
        want.backward(kiln.ones_like(want))
        kiln.manual_seed(9)
        xg = x.cuda().requires_grad_()
        got = F.dropout(xg, p)
        got.backward(kiln.ones_like(got))
        same(got, want.detach(), what=("dropout", p))
        same(xg.grad, xc.grad, what=("dropout grad", p))
    kiln.manual_seed(2)
    out_c, mask_c = kiln.native_dropout(x, 0.4, True)
    kiln.manual_seed(2)
    out_g, mask_g = kiln.native_dropout(x.cuda(), 0.4, True)
    same(mask_g, mask_c, what="mask")
    same(out_g, out_c, what="native_dropout")
    xt = x.t()
    kiln.manual_seed(2)
    want = F.dropout(xt, 0.4)
    kiln.manual_seed(2)
    same(F.dropout(xt.cuda(), 0.4), want, what="non-contiguous input")


@needs_kernels
def test_layers_made_on_the_device_match_the_cpu():
    for make in [lambda d: nn.Linear(64, 32, device=d), lambda d: nn.Conv2d(3, 8, 3, device=d),
                 lambda d: nn.Embedding(100, 16, device=d), lambda d: nn.LayerNorm(16, device=d)]:
        kiln.manual_seed(0)
        cpu = make("cpu")
        kiln.manual_seed(0)
        gpu = make("cuda")
        for (name, a), (_, b) in zip(cpu.named_parameters(), gpu.named_parameters()):
            same(b.detach(), a.detach(), 1e-6, name)


@needs_cuda
def test_generator_devices_and_errors():
    g = kiln.Generator("cuda")
    assert g.device.type == "cuda" and g.device.index == kiln.cuda.current_device()
    assert g.manual_seed(5).initial_seed() == 5
    assert kiln.Generator(device="cuda:1").device == kiln.device("cuda", 1)
    x = kiln.empty(4, device="cuda")
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
        x.uniform_(generator=kiln.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'cuda'"):
        kiln.empty(4).normal_(generator=g)
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
        kiln.randn(3, device="cuda", generator=kiln.Generator())
    with pytest.raises(NotImplementedError, match="'Long'"):
        kiln.empty(3, dtype=kiln.int64, device="cuda").uniform_()


@needs_cuda
def test_seeding_needs_no_device_and_reaches_generators_made_later():
    kiln.cuda.manual_seed_all(77)
    assert kiln.Generator("cuda", _cdata=kiln._C._default_cuda_generator(1)).initial_seed() == 77
    kiln.manual_seed(78)
    assert kiln.cuda.get_rng_state(1)[0].item() == 78
    assert [s[0].item() for s in kiln.cuda.get_rng_state_all()] == [78] * kiln.cuda.device_count()


@needs_kernels
def test_bernoulli_rejects_probabilities_out_of_range():
    x = kiln.empty(4, device="cuda")
    with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
        x.bernoulli_(kiln.tensor([0.5, 1.5, 0.2, 0.1], device="cuda"))
    with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
        x.bernoulli_(kiln.tensor([0.5, float("nan"), 0.2, 0.1], device="cuda"))
    with pytest.raises(RuntimeError, match="bernoulli_ expects p to be in"):
        x.bernoulli_(1.5)
