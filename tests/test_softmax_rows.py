"""float32 softmax / log_softmax over contiguous rows (tensor/ops/softmax_rows.h, Note [Softmax
rows]): vectorised max, exp and lane sums, forward and backward, against PyTorch 2.13 on row
lengths around the lane count, special values (NaN, +-inf, rows of -inf), strided inputs and
cross_entropy. Values within a few ulps (exp is ExpF in kiln, Sleef's in PyTorch); NaN, inf and
exact-zero positions exactly."""

import math

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

LENGTHS = [1, 3, 15, 16, 17, 31, 32, 33, 100, 1000, 2049]


def rows(n, rng, special):
    x = (rng.standard_normal((6, n)) * 5).astype(np.float32)
    if special:
        x[1, n // 2] = math.nan
        x[2, :] = -math.inf
        x[3, n - 1] = math.inf
        x[4, 0] = -math.inf
        x[5, :] = 88.0  # large equal values: exp(0) = 1 each
    return x


def close(got, want, rtol=4e-6, atol=1e-30):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got == 0, want == 0)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("special", [False, True], ids=["normal", "special"])
@pytest.mark.parametrize("n", LENGTHS)
def test_forward_matches_torch(n, special, log):
    x = rows(n, np.random.default_rng(n), special)
    fk = kiln.nn.functional.log_softmax if log else kiln.nn.functional.softmax
    ft = torch.nn.functional.log_softmax if log else torch.nn.functional.softmax
    got, want = fk(kiln.tensor(x), -1).numpy(), ft(torch.tensor(x), -1).numpy()
    if not log:
        return close(got, want)
    # log_softmax is (x - max) - log(sum): at a row's largest values the two terms nearly cancel,
    # so an ulp of log(sum) is a large relative error of the result. PyTorch sums in its vector
    # width's lanes (8 on AVX2, 16 on AVX-512), kiln in 16 on every CPU (Note [Softmax rows]), and
    # the two orders may round the sum a few ulps apart, a few float epsilons of log(sum): the
    # tolerance is on the terms' scale plus that.
    close(got, want, rtol=1.0, atol=np.inf)  # NaN, inf and zero positions
    finite = np.isfinite(want)
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = x.astype(np.float64) - x.max(-1, keepdims=True)
        scale = np.abs(shifted) + np.abs(np.log(np.exp(shifted).sum(-1, keepdims=True)))
    excess = np.abs(got - want)[finite] - (4e-6 * scale[finite] + 4 * np.finfo(np.float32).eps)
    assert (excess <= 0).all(), f"off by {excess.max():.3g} beyond 4e-6 of |x - max| + |log(sum)| + 4 eps"


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("n", LENGTHS)
def test_backward_matches_torch(n, log):
    rng = np.random.default_rng(100 + n)
    x = rows(n, rng, special=False)
    g = rng.standard_normal(x.shape).astype(np.float32)
    grads = []
    for lib in (kiln, torch):
        xt = lib.tensor(x, requires_grad=True)
        y = (lib.nn.functional.log_softmax if log else lib.nn.functional.softmax)(xt, -1)
        y.backward(lib.tensor(g))
        grads.append(xt.grad.numpy())
    # the backward subtracts a row sum from each term: absolute error on the sum's scale
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=2e-6 * np.abs(g).sum(1, keepdims=True).max())


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_strided_and_batched_inputs(log):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 40, 24)) * 3).astype(np.float32)
    for k_in, t_in in ((kiln.tensor(x).transpose(1, 2), torch.tensor(x).transpose(1, 2)),
                       (kiln.tensor(x)[:, ::2, 1:], torch.tensor(x)[:, ::2, 1:]),
                       (kiln.tensor(x).unsqueeze(-1), torch.tensor(x).unsqueeze(-1))):
        for dim in (-1, 1, -2):
            fk = kiln.log_softmax if log else kiln.softmax
            ft = torch.log_softmax if log else torch.softmax
            # log_softmax near 0 is (x - max) - log(sum): absolute error on the scale of x - max
            close(fk(k_in, dim).numpy(), ft(t_in, dim).numpy(), atol=1e-6 if log else 1e-30)


def test_cross_entropy_and_its_gradient():
    rng = np.random.default_rng(3)
    logits = (rng.standard_normal((257, 1000)) * 4).astype(np.float32)
    target = rng.integers(0, 1000, 257)
    out = []
    for lib in (kiln, torch):
        x = lib.tensor(logits, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x, lib.tensor(target), label_smoothing=0.1)
        loss.backward()
        out.append((loss.item(), x.grad.numpy()))
    assert out[0][0] == pytest.approx(out[1][0], rel=1e-6)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-5, atol=1e-9)


def test_rows_sum_to_one_and_logs_are_not_positive():
    x = kiln.randn(64, 3001) * 10
    p = kiln.softmax(x, -1)
    np.testing.assert_allclose(p.sum(-1).numpy(), 1.0, rtol=2e-6)
    assert bool((kiln.log_softmax(x, -1) <= 0).all())
