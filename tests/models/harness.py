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
import kiln._dynamo
from kiln._dynamo.testing import CompileCounterWithBackend

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
    frames: int = 1  # graphs PyTorch's torch.compile makes over the steps (measured with its CompileCounter)
    # graphs kiln.compile makes where that differs from `frames` for a reason the recipe states (None: the same)
    kiln_frames: Optional[int] = None


def _to(lib, array):
    return lib.from_numpy(np.ascontiguousarray(array).copy())


def _numpy(t):
    return t.detach().numpy().copy()


def _train(lib, recipe, model, batches, compile_fn=None, pinned=None):
    """Runs the recipe; returns one (loss, {param: grad}, {state_dict key: value}) per step.
    pinned: per step, {param: (mask, float64 gradient)} for the entries whose gradient is at the
    rounding level, which the optimizer then gets from float64 (Note [Gradients at the rounding level])."""
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
        if pinned is not None:
            with lib.no_grad():
                for n, p in model.named_parameters():
                    if n in pinned[len(record)]:
                        mask, exact = pinned[len(record)][n]
                        p.grad.copy_(_to(lib, np.where(mask, exact, grads[n]).astype(grads[n].dtype)))
        if recipe.clip is not None:
            lib.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
        opt.step()
        record.append((loss.item(), grads, {k: _numpy(v) for k, v in model.state_dict().items()}))
    return record


def _error(got, want):
    """Largest absolute difference relative to `want`'s scale (its largest magnitude), so that
    entries that are zero up to rounding do not demand an impossible relative precision."""
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if want.size == 0:
        return 0.0
    scale = max(float(np.max(np.abs(want))), 1e-12)
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale


def _torch_run(torch, recipe, t_model, batches, dtype, pinned=None):
    """PyTorch trains a copy of t_model's weights with `dtype` as the default and float inputs cast to it."""
    old, threads = torch.get_default_dtype(), torch.get_num_threads()
    torch.set_default_dtype(dtype)
    # One thread: these tensors are tiny, and on a loaded machine PyTorch's spinning workers made one
    # 4x64 linear take 27 ms (the oracle cost more than kiln's compiles).
    torch.set_num_threads(1)
    try:
        model = recipe.build(torch)
        model.load_state_dict(t_model.state_dict())
        cast = [tuple(a.astype(np.float64) if a.dtype.kind == "f" and dtype == torch.float64 else a for a in b)
                for b in batches]
        return _train(torch, recipe, model, cast, pinned=pinned)
    finally:
        torch.set_default_dtype(old)
        torch.set_num_threads(threads)


# Note [The oracle's own rounding]: three steps of Adam amplify float32 rounding. Its first update is
# lr * g / |g| elementwise, so an entry whose gradient is zero up to rounding (the key bias of
# attention: softmax ignores a per-row shift) or merely tiny moves by +-lr in a direction chosen by
# rounding, and later gradients inherit that. PyTorch float32 itself then differs from float64 by up to
# ~1e-4 relative in some tensors. So the truth is PyTorch in float64, and kiln float32 must be within
# rtol of it or within SLACK times PyTorch float32's own error, whichever is larger: as accurate as
# PyTorch, never exact-by-luck. A doubled gradient is an error of 1.0 and fails either way.
SLACK = 8.0

# Note [Gradients at the rounding level]: a gradient entry that sums to zero up to float32's
# rounding of the gradient's scale (a GPT's c_proj.weight entry of -7.5e-9 whose tensor's largest is
# 1.9e-2: a coincidental cancellation) holds no signal, yet Adam divides it by its own magnitude
# plus eps = 1e-8, so rounding alone decides how far it moves, and every later step inherits that:
# PyTorch float32 itself moved that entry 1e-3 off float64 in one process and 3e-5 in another,
# and kiln's trajectory passed or failed by the same luck. Both float32 runs (PyTorch's and
# kiln's) therefore hand the optimizer float64's value for such entries; the gradients recorded
# and compared are their own (an entry at the rounding level is right up to that level anyway).
ROUNDING_LEVEL = 1e-6


def _rounding_level_entries(grads):
    """{param: (mask, gradient)} of the float64 gradients' entries at the rounding level."""
    out = {}
    for name, g in grads.items():
        if g is not None and g.size:
            mask = np.abs(g) <= ROUNDING_LEVEL * np.max(np.abs(g))
            if mask.any() and not mask.all():
                out[name] = (mask, g)
    return out


def check(recipe, backend, torch, rtol=1e-4):
    """Trains `recipe` in PyTorch and in kiln (eager when backend is None, else kiln.compile with it)."""
    rng = np.random.default_rng(0)
    batches = [tuple(b) for b in recipe.batches(rng)][: recipe.steps]
    torch.manual_seed(0)
    t_model = recipe.build(torch)
    k_model = recipe.build(kiln)
    k_model.load_state_dict({k: _to(kiln, _numpy(v)) for k, v in t_model.state_dict().items()})
    ref64 = _torch_run(torch, recipe, t_model, batches, torch.float64)
    pinned = [_rounding_level_entries(grads) for _, grads, _ in ref64]
    ref32 = _torch_run(torch, recipe, t_model, batches, torch.float32, pinned)
    compile_fn, counter = None, None
    if backend is not None:
        kiln._dynamo.reset()
        counter = CompileCounterWithBackend(backend)
        compile_fn = lambda f: kiln.compile(f, backend=counter)  # noqa: E731
    try:
        got = _train(kiln, recipe, k_model, batches, compile_fn, pinned)
    finally:
        kiln._dynamo.reset()
    # A step that silently ran eagerly (a frame given up on, everything behind graph breaks) would pass
    # trivially. PyTorch captures each of these steps as recipe.frames graphs over all three steps.
    if counter is not None:
        assert counter.op_count > 0, f"{recipe.name}[{backend}]: nothing was compiled"
        want = recipe.frames if recipe.kiln_frames is None else recipe.kiln_frames
        assert counter.frame_count == want, \
            f"{recipe.name}[{backend}]: {counter.frame_count} graphs (breaks or recompiles), want {want} " \
            f"(PyTorch has {recipe.frames})"

    def compare(k, t32, t64, what):
        k, t32, t64 = (np.asarray(v) for v in (k, t32, t64))
        err, own = _error(k, t64), _error(t32, t64)
        assert err <= max(rtol, SLACK * own), \
            f"{what}: relative error {err:.3g} against PyTorch float64 (PyTorch float32's: {own:.3g})"

    for i, (k_step, t32_step, t64_step) in enumerate(zip(got, ref32, ref64)):
        where = f"{recipe.name}[{backend or 'kiln eager'}] step {i}"
        (k_loss, k_grads, k_state), (t_loss, t_grads, t_state), (_, w_grads, w_state) = k_step, t32_step, t64_step
        compare(k_loss, t_loss, t64_step[0], f"{where}: loss")
        assert sorted(k_grads) == sorted(t_grads), f"{where}: parameters {sorted(k_grads)} != {sorted(t_grads)}"
        for name, t_grad in t_grads.items():
            assert (k_grads[name] is None) == (t_grad is None), f"{where}: {name}.grad presence"
            if t_grad is not None:
                compare(k_grads[name], t_grad, w_grads[name], f"{where}: {name}.grad")
        assert sorted(k_state) == sorted(t_state), f"{where}: state keys"
        for name, t_value in t_state.items():
            compare(k_state[name], t_value, w_state[name], f"{where}: {name} after the step")
