"""A helper shared by the compiler suites: train a model eagerly and through a compiled wrapper
from the same initial weights on the same digits-shaped batches, and compare the final states."""

import numpy as np

import kiln
import kiln.nn.functional as F


def assert_training_matches_eager(make, compile_model, make_optimizer, steps=3, batch=16, tol=1e-4):
    """make(): a fresh model; compile_model(model) -> callable; make_optimizer(params) -> optimizer."""
    kiln.manual_seed(0)
    eager = make()
    kiln.manual_seed(0)
    model = make()
    compiled = compile_model(model)
    runs = ((eager, make_optimizer(eager.parameters())), (compiled, make_optimizer(model.parameters())))
    rng = np.random.RandomState(0)
    for _ in range(steps):
        x = kiln.tensor(rng.rand(batch, 64).astype(np.float32))
        y = kiln.tensor(rng.randint(0, 10, batch))
        for run, opt in runs:
            loss = F.cross_entropy(run(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, want), (_, got) in zip(eager.state_dict().items(), model.state_dict().items()):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol, err_msg=name)
