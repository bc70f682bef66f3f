"""The model zoo's harness: train one model three steps in PyTorch (the oracle) and in kiln, eagerly
or under kiln.compile, from the same weights on the same batches, and compare every step's loss,
every parameter's gradient, and every updated weight and buffer.

A zoo model is a `Recipe`: its code is written once against a module argument `torch` (either `torch`
or `kiln`), so both frameworks run the same source line for line; only the weights cross over, from
PyTorch's freshly initialised model to kiln's through the state dict (numpy copies)."""

import dataclasses
from typing import Callable, Optional

import numpy as np

import kiln

# None is plain kiln eager; the rest are kiln.compile backends.
BACKENDS = [None, "eager", "aot_eager", "inductor"]


@dataclasses.dataclass
class Recipe:
    name: str
    build: Callable  # build(torch) -> nn.Module, fresh weights
    batches: Callable  # batches(rng) -> one tuple of numpy arrays per step
    loss: Callable  # loss(torch, model, *batch) -> 0-d loss; the part that is compiled
    optimizer: Callable  # optimizer(torch, model) -> object with zero_grad() and step()
    clip: Optional[float] = None  # clip_grad_norm_ max norm after backward, as nanoGPT and the LSTM LM do
    steps: int = 3


def _to(lib, array):
    return lib.from_numpy(np.ascontiguousarray(array).copy())


def _numpy(t):
    return t.detach().numpy().copy()


def _train(lib, recipe, model, batches, compile_fn=None):
    """Runs the recipe; returns one (loss, {param: grad}, {state_dict key: value}) per step."""
    opt = recipe.optimizer(lib, model)

    def step(*batch):
        return recipe.loss(lib, model, *batch)

    if compile_fn is not None:
        step = compile_fn(step)
    record = []
    for batch in batches:
        tensors = [_to(lib, a) for a in batch]
        opt.zero_grad()
        loss = step(*tensors)
        loss.backward()
        # Gradients before clipping: clipping scales them all by one factor that hides a single bad one less.
        grads = {n: (None if p.grad is None else _numpy(p.grad)) for n, p in model.named_parameters()}
        if recipe.clip is not None:
            lib.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
        opt.step()
        record.append((loss.item(), grads, {k: _numpy(v) for k, v in model.state_dict().items()}))
    return record


def _close(got, want, rtol, what):
    """rtol relative to the tensor's own scale (its largest magnitude), so that entries that are
    zero up to rounding do not demand an impossible relative precision."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
    assert err <= rtol * scale, f"{what}: max abs error {err:.3g} > {rtol:g} x scale {scale:.3g}"


def check(recipe, backend, torch, rtol=1e-4):
    """Trains `recipe` in PyTorch and in kiln (eager when backend is None, else kiln.compile with it)."""
    rng = np.random.default_rng(0)
    batches = [tuple(b) for b in recipe.batches(rng)][: recipe.steps]
    torch.manual_seed(0)
    t_model = recipe.build(torch)
    k_model = recipe.build(kiln)
    k_model.load_state_dict({k: _to(kiln, _numpy(v)) for k, v in t_model.state_dict().items()})
    want = _train(torch, recipe, t_model, batches)
    compile_fn = None
    if backend is not None:
        kiln._dynamo.reset()
        compile_fn = lambda f: kiln.compile(f, backend=backend)  # noqa: E731
    try:
        got = _train(kiln, recipe, k_model, batches, compile_fn)
    finally:
        kiln._dynamo.reset()
    for i, ((k_loss, k_grads, k_state), (t_loss, t_grads, t_state)) in enumerate(zip(got, want)):
        where = f"{recipe.name}[{backend}] step {i}"
        assert abs(k_loss - t_loss) <= rtol * max(abs(t_loss), 1e-6), f"{where}: loss {k_loss} != {t_loss}"
        assert sorted(k_grads) == sorted(t_grads), f"{where}: parameters {sorted(k_grads)} != {sorted(t_grads)}"
        for name, t_grad in t_grads.items():
            assert (k_grads[name] is None) == (t_grad is None), f"{where}: {name}.grad presence"
            if t_grad is not None:
                _close(k_grads[name], t_grad, rtol, f"{where}: {name}.grad")
        assert sorted(k_state) == sorted(t_state), f"{where}: state keys"
        for name, t_value in t_state.items():
            _close(k_state[name], t_value, rtol, f"{where}: {name} after the step")
