"""Shared by the Dynamo suites (test_dynamo_fallbacks.py, test_dynamo_side_effects.py): a fresh
Dynamo around each test and the tensor comparison they use."""

import numpy as np
import pytest

import kiln._dynamo as dynamo


@pytest.fixture(autouse=True)
def fresh_dynamo():
    dynamo.reset()
    yield
    dynamo.reset()


def close(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
