"""kiln.special against torch.special: the registry's special_* ops (special_ndtr, a row of
tensor/ops/unary.cc) and aliases (special_expit of sigmoid: Note [Op aliases] in
tensor/dispatcher.h), and its functions written in Python, under their torch.special names."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch
from kiln import _C


@requires_torch
@pytest.mark.parametrize("name", dir(kiln.special))
def test_names_are_torch_specials(name):
    assert hasattr(torch.special, name)
    assert callable(getattr(kiln.special, name))


def test_registry_aliases_are_the_ops_they_name():
    aliases = {alias: name for alias, name, variants in _C._op_aliases() if alias.startswith("special_")}
    assert aliases["special_expit"] == "sigmoid" and aliases["special_gammaln"] == "lgamma"
    for alias, name in aliases.items():
        assert getattr(kiln.special, alias[len("special_"):]) is getattr(kiln, name)
        assert not hasattr(kiln, alias) and not hasattr(kiln.Tensor, alias)  # kiln.special's alone
    assert {"expit", "psi", "gammaln", "logsumexp", "softmax", "gammainc", "sinc"} <= set(dir(kiln.special))


@requires_torch
@pytest.mark.parametrize("name", ["ndtr", "expit", "gammaln", "psi", "erfc", "i0", "log1p", "exp2", "sinc"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_values_match_torch(name, dtype):
    x = np.linspace(-4.0, 4.0, 37).astype(dtype)
    got = getattr(kiln.special, name)(kiln.tensor(x)).numpy()
    want = getattr(torch.special, name)(torch.tensor(x)).numpy()
    rtol, atol = (2e-6, 1e-7) if dtype == "float32" else (1e-12, 0)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@requires_torch
def test_softmax_takes_torchs_arguments():
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    np.testing.assert_allclose(kiln.special.softmax(kiln.tensor(x), 1).numpy(),
                               torch.special.softmax(torch.tensor(x), 1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(kiln.special.log_softmax(kiln.tensor(x), dim=0).numpy(),
                               torch.special.log_softmax(torch.tensor(x), dim=0).numpy(), rtol=1e-6, atol=1e-6)


def test_ndtr_is_a_function_of_the_module_only():
    assert "ndtr" in dir(kiln.special)
    assert not hasattr(kiln.Tensor, "special_ndtr")  # torch.special's ops are no Tensor methods
    with pytest.raises(AttributeError, match="torch.special.zeta is not in kiln"):
        kiln.special.zeta
