"""Sampling ops against PyTorch 2.13: multinomial's shapes, dtypes, argument and value errors
(same exception class, same message) and, as kiln's generator is not PyTorch's, its draws
against the distribution they sample (frequencies within a few standard errors, draws without
replacement distinct and in the order of sequential sampling), reproducibility under
manual_seed and a Generator, and under kiln.compile."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch


def counts(samples, k):
    return np.bincount(np.asarray(samples).reshape(-1), minlength=k)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_multinomial_with_replacement_frequencies(dtype):
    p = kiln.tensor([0.1, 0.0, 0.6, 0.3], dtype=getattr(kiln, dtype))
    g = kiln.Generator().manual_seed(1)
    n = 40000
    out = kiln.multinomial(p, n, replacement=True, generator=g)
    assert out.dtype == kiln.int64 and tuple(out.shape) == (n,)
    c = counts(out.tolist(), 4)
    assert c[1] == 0  # probability 0 is never drawn
    want = np.array([0.1, 0.0, 0.6, 0.3]) * n
    sd = np.sqrt(want * (1 - want / n))
    assert np.all(np.abs(c - want) <= 5 * sd + 1), c


def test_multinomial_unnormalised_rows_and_one_draw():
    # weights need not sum to 1; each row is its own distribution; one draw takes the race path
    w = kiln.tensor([[1.0, 3.0, 0.0], [0.0, 0.0, 5.0], [2.0, 2.0, 4.0]])
    out = w.multinomial(3000, True)
    assert tuple(out.shape) == (3, 3000)
    rows = out.tolist()
    assert counts(rows[0], 3)[2] == 0 and abs(counts(rows[0], 3)[1] / 3000 - 0.75) < 0.04
    assert set(rows[1]) == {2}
    assert abs(counts(rows[2], 3)[2] / 3000 - 0.5) < 0.04
    ones = [int(kiln.multinomial(w[0], 1)) for _ in range(2000)]
    assert abs(ones.count(1) / 2000 - 0.75) < 0.04 and 2 not in ones


def test_multinomial_without_replacement():
    p = kiln.tensor([0.5, 0.2, 0.0, 0.3])
    draws = [kiln.multinomial(p, 3).tolist() for _ in range(3000)]
    assert all(len(set(d)) == 3 and 2 not in d for d in draws)  # distinct, never probability 0
    firsts = counts([d[0] for d in draws], 4) / 3000  # the first draw follows p
    assert np.allclose(firsts, [0.5, 0.2, 0.0, 0.3], atol=0.035)
    # the second, given the first was 0, follows the rest renormalised: 0.2 / 0.5 and 0.3 / 0.5
    after0 = [d[1] for d in draws if d[0] == 0]
    assert abs(after0.count(1) / len(after0) - 0.4) < 0.06
    # all categories: a permutation; more than the positive ones: they come first, then zeros
    assert sorted(kiln.multinomial(p, 4).tolist()) == [0, 1, 2, 3]
    assert kiln.multinomial(kiln.tensor([0.0, 1.0, 0.0]), 2).tolist()[0] == 1


def test_multinomial_is_reproducible():
    p = kiln.rand(4, 50)
    kiln.manual_seed(3)
    a = kiln.multinomial(p, 20, True)
    kiln.manual_seed(3)
    assert kiln.multinomial(p, 20, True).tolist() == a.tolist()
    g1, g2 = kiln.Generator().manual_seed(9), kiln.Generator().manual_seed(9)
    assert kiln.multinomial(p, 7, generator=g1).tolist() == kiln.multinomial(p, 7, generator=g2).tolist()
    # threads do not change draws
    kiln.set_num_threads(1)
    kiln.manual_seed(5)
    one = kiln.multinomial(p, 30, True).tolist()
    kiln.set_num_threads(2)
    kiln.manual_seed(5)
    assert kiln.multinomial(p, 30, True).tolist() == one


@requires_torch
@pytest.mark.parametrize("case", [
    ("int input", lambda T: T.multinomial(T.tensor([1, 2]), 1)),
    ("3-d", lambda T: T.multinomial(T.ones(2, 2, 2), 1)),
    ("0-d", lambda T: T.multinomial(T.tensor(1.0), 1)),
    ("no samples", lambda T: T.multinomial(T.ones(3), 0)),
    ("more than categories", lambda T: T.multinomial(T.ones(3), 4)),
    ("negative", lambda T: T.multinomial(T.tensor([1.0, -1.0]), 1)),
    ("negative, replacement", lambda T: T.multinomial(T.tensor([1.0, -1.0]), 3, True)),
    ("nan, replacement", lambda T: T.multinomial(T.tensor([1.0, float("nan")]), 3, True)),
    ("inf, replacement", lambda T: T.multinomial(T.tensor([1.0, float("inf")]), 3, True)),
    ("inf, one draw", lambda T: T.multinomial(T.tensor([1.0, float("inf")]), 1, True)),
    ("all zero", lambda T: T.multinomial(T.tensor([0.0, 0.0]), 1)),
    ("a zero row", lambda T: T.multinomial(T.tensor([[0.0, 0.0], [1.0, 1.0]]), 2, True)),
    ("no rows", lambda T: T.multinomial(T.ones(0, 3), 2)),
    ("no categories", lambda T: T.multinomial(T.ones(2, 0), 1, True)),
], ids=lambda c: c[0])
def test_multinomial_errors_and_shapes_match_torch(case):
    _, fn = case
    try:
        want = fn(torch)
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            fn(kiln)
        assert str(got.value) == str(e)
        return
    got = fn(kiln)
    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype) == str(want.dtype).replace("torch", "kiln")


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_multinomial_compiled(backend):
    # a sampling step: logits -> softmax -> multinomial; the draw comes from the same generator
    def step(logits):
        probs = (logits / 0.8).softmax(-1)
        return kiln.multinomial(probs, 1), probs

    logits = kiln.tensor([[2.0, 0.5, -1.0, 0.0]] * 3)
    kiln.manual_seed(11)
    want = step(logits)
    kiln.manual_seed(11)
    got = kiln.compile(step, backend=backend)(logits)
    assert got[0].tolist() == want[0].tolist()
    assert np.allclose(got[1].tolist(), want[1].tolist(), rtol=1e-6)


@requires_torch
def test_normal_forms_shapes_gradients_and_errors_match_torch():
    # torch.normal: a factory for float mean and std, else tensors broadcast together; mean and std
    # get zero gradients (PyTorch's formula: the sample is not reparameterized)
    def run(T):
        out = []
        m = T.zeros(2, 3, requires_grad=True)
        s = T.ones(3, requires_grad=True)
        r = T.normal(m, s)
        r.sum().backward()
        out.append((tuple(r.shape), r.requires_grad, m.grad.tolist(), s.grad.tolist()))
        out.append(str(T.normal(2.0, 3.0, (2, 2)).dtype).split(".")[1])
        out.append(str(T.normal(T.zeros(2, dtype=T.float64), 1.0).dtype).split(".")[1])
        out.append(tuple(T.normal(0.0, T.ones(4)).shape))
        for bad in (lambda: T.normal(0.0, -1.0, (2,)), lambda: T.normal(T.zeros(2), -1.5),
                    lambda: T.normal(T.zeros(2), T.tensor([1.0, -1.0])), lambda: T.normal(T.zeros(2), T.ones(3)),
                    lambda: T.normal(T.zeros(2, dtype=T.long), 1.0)):
            try:
                bad()
                out.append("ok")
            except Exception as e:  # noqa: BLE001 - the exception is the result
                out.append((type(e).__name__, str(e)))
        return out

    assert run(kiln) == run(torch)
    g = kiln.Generator().manual_seed(3)
    x = kiln.normal(3.0, 2.0, (40000,), generator=g)
    assert abs(float(x.mean()) - 3.0) < 0.05 and abs(float(x.std()) - 2.0) < 0.05
    y = kiln.normal(kiln.tensor([0.0, 100.0]).expand(20000, 2), kiln.tensor([1.0, 0.5]))
    assert np.allclose(np.array(y.mean(0).tolist()), [0.0, 100.0], atol=0.05)
    assert np.allclose(np.array(y.std(0).tolist()), [1.0, 0.5], atol=0.05)
