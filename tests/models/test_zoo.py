"""The model zoo: each small training program (see README.md) trains three steps in kiln, eagerly
and under kiln.compile with each backend, and must match PyTorch eager's loss, every parameter
gradient and every updated weight and buffer. Known compiler bugs are strict xfails naming the bug,
so that they turn into failures the day they are fixed."""

import pytest

from conftest import requires_torch, torch  # noqa: F401
from harness import BACKENDS, check

from encoder import ENCODER
from gpt import GPT_MASKED, GPT_SDPA
from llama import LLAMA
from makemore import MAKEMORE
from mnist import MNIST
from resnet import RESNET
from rnn import GRU, LSTM
from vae import VAE, VAE_NOISE

RECIPES = [GPT_MASKED, GPT_SDPA, LLAMA, VAE, VAE_NOISE, LSTM, GRU, ENCODER, MAKEMORE, RESNET, MNIST]

# (recipe name, backend) -> the bug, one line; see README.md for the narrowed-down repros.
KNOWN = {}


def _cases():
    for recipe in RECIPES:
        for backend in BACKENDS:
            marks = []
            if (recipe.name, backend) in KNOWN:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN[recipe.name, backend]))
            yield pytest.param(recipe, backend, marks=marks, id=f"{recipe.name}-{backend or 'kiln_eager'}")


@requires_torch
@pytest.mark.parametrize("recipe,backend", list(_cases()))
def test_zoo(recipe, backend):
    check(recipe, backend, torch)
