"""float erf by the Inductor code generator's polynomials (codegen/erf_polynomials.h, ErfPolyF in
tensor/vec_math.h): eager erf vectorises (libm's erff kept the loop scalar, 9x PyTorch's time) and
is within 2 ulp of the exact value, agrees with PyTorch's to a few ulp, keeps the specials, and
computes what compiled erf computes."""

import math

import numpy as np

import kiln
from conftest import requires_torch, torch


def _floats(lo, hi, step):
    """Every step-th float32 between the positive floats lo and hi, both signs, and the specials."""
    a = np.arange(np.float32(lo).view(np.int32), np.float32(hi).view(np.int32), step, dtype=np.int32).view(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 0.921875, np.nextafter(np.float32(0.921875), 0),
                         3.92, 4.0, 4.5, 3.4e38], np.float32)
    return np.concatenate([a, -a, specials])


X = _floats(1e-30, 6.0, 499)


def _exact(x):
    return np.array([math.erf(v) for v in x.astype(np.float64)])


def test_float_erf_within_two_ulp():
    got = kiln.from_numpy(X).erf().numpy()
    finite = np.isfinite(X)
    exact = _exact(X[finite])
    ulps = np.abs(got[finite].astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))
    assert ulps.max() <= 2.0, (ulps.max(), X[finite][ulps.argmax()])
    assert got[X == np.inf].tolist() == [1.0] and got[X == -np.inf].tolist() == [-1.0]
    assert np.isnan(got[np.isnan(X)]).all()
    assert np.signbit(got[X == 0]).tolist() == np.signbit(X[X == 0]).tolist()  # erf(-0.) = -0.


def test_other_dtypes_and_layouts():
    x = kiln.from_numpy(X[np.isfinite(X)][:4000].copy()).reshape(40, 100)
    want = x.double().erf()
    for t in (x.t(), x[:, ::3], x.to(kiln.bfloat16), x.to(kiln.float16)):
        got = t.erf()
        ref = want.t() if t.shape == x.t().shape else want[:, ::3] if t.shape[1] != 100 else want
        tol = 1e-6 if t.dtype == kiln.float32 else 1e-2
        np.testing.assert_allclose(got.double().numpy(), ref.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(x.double().erf().numpy(), _exact(x.numpy().ravel()).reshape(40, 100), rtol=1e-15)


@requires_torch
def test_agrees_with_torch():
    got = kiln.from_numpy(X).erf().numpy()
    want = torch.from_numpy(X).erf().numpy()
    finite = np.isfinite(X)
    np.testing.assert_allclose(got[finite], want[finite], rtol=3e-7, atol=2e-7)


def test_compiled_erf_matches_eager():
    x = kiln.from_numpy(X[np.isfinite(X)].copy())
    got = kiln.compile(lambda t: t.erf())(x)
    np.testing.assert_allclose(got.numpy(), x.erf().numpy(), rtol=2.5e-7, atol=1.2e-7)
