"""nanoGPT's sampling loop (gpt.generate: crop, temperature, topk and a masked assignment, softmax,
multinomial, cat) on the zoo's GPT, with the model under kiln.compile as nanoGPT's sample.py does:
the prompt grows by a token a call, so the compiled model sees a new length each time. kiln's
random stream is its own, so sampled tokens are compared with PyTorch's where sampling is
deterministic (top_k=1: multinomial of a one-hot distribution), and compiled with eager under one
kiln seed otherwise."""

import numpy as np
import pytest

import kiln
import kiln._dynamo
from conftest import requires_torch, torch
from gpt import BLOCK, VOCAB, build, generate

PROMPT = np.array([[3, 17, 42], [60, 0, 9]])


def _models(flash):
    torch.manual_seed(0)
    t_model = build(torch, flash)
    k_model = build(kiln, flash)
    k_model.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy()) for k, v in t_model.state_dict().items()})
    return t_model.eval(), k_model.eval()


@requires_torch
@pytest.mark.parametrize("flash", [False, True])
def test_greedy_sampling_matches_torch(flash):
    t_model, k_model = _models(flash)
    new = BLOCK + 2  # past the block: the last calls crop to it
    want = generate(torch, t_model, torch.from_numpy(PROMPT), new, top_k=1).numpy()
    got = generate(kiln, k_model, kiln.from_numpy(PROMPT), new, top_k=1).numpy()
    np.testing.assert_array_equal(got, want)


@requires_torch
def test_compiled_sampling_draws_as_eager():
    _, k_model = _models(False)
    kiln.manual_seed(7)
    want = generate(kiln, k_model, kiln.from_numpy(PROMPT), 6, temperature=0.8, top_k=9).numpy()
    assert len(np.unique(want[:, PROMPT.shape[1]:])) > 4 and want.max() < VOCAB  # it samples, not argmax
    kiln._dynamo.reset()
    try:
        compiled = kiln.compile(k_model)
        kiln.manual_seed(7)
        got = generate(kiln, compiled, kiln.from_numpy(PROMPT), 6, temperature=0.8, top_k=9).numpy()
    finally:
        kiln._dynamo.reset()
    np.testing.assert_array_equal(got, want)


@requires_torch
def test_sampling_loop_compiles_as_few_graphs_as_torch():
    from kiln._dynamo.testing import CompileCounter

    _, k_model = _models(False)
    kiln._dynamo.reset()
    counter = CompileCounter()
    try:
        generate(kiln, kiln.compile(k_model, backend=counter), kiln.from_numpy(PROMPT), BLOCK + 4, top_k=1)
    finally:
        kiln._dynamo.reset()
    # PyTorch 2.13: 4. kiln: static, dynamic length, then the cropped idx[:, -BLOCK:] with a stride
    # symbol (its outer stride grows each call; it recompiled for each until the cache limit, 8)
    assert counter.frame_count <= 4, counter.frame_count
