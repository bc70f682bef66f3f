"""kiln.amp.GradScaler: dynamic loss scaling with PyTorch's algorithm and state (torch.amp.GradScaler).

    scaler = kiln.amp.GradScaler("cpu")
    scaler.scale(loss).backward()      # loss * scale
    scaler.step(optimizer)             # grads /= scale; optimizer.step() unless a grad is inf/NaN
    scaler.update()                    # scale *= backoff_factor after a skipped step, else
                                       # *= growth_factor after growth_interval clean steps

The scale and the growth tracker are 0-d tensors (float32 and int32) on the device of the first
scaled output, created lazily as in PyTorch; per optimizer, a stage (READY -> UNSCALED -> STEPPED)
catches unscale_ or step called twice in one iteration. GradScaler("cuda") — PyTorch's default
device — warns and disables itself, since kiln has no CUDA: scale() then returns its input and
step() just calls optimizer.step(), exactly as on a CPU-only PyTorch build.
"""

import warnings
from collections import abc, defaultdict
from enum import Enum

import kiln
from kiln import _C

__all__ = ["OptState", "GradScaler"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    """PyTorch's _amp_foreach_non_finite_check_and_unscale_: sets found_inf to 1.0 if any grad holds
    an inf or NaN, and multiplies every grad by inv_scale in place (also when one is non-finite)."""
    for g in grads:
        if not bool(kiln.isfinite(g).all()):
            found_inf.fill_(1.0)
        if inv_scale.item() != 1.0:
            g.mul_(inv_scale)


def _update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """PyTorch's _amp_update_scale_ (its CPU kernel, step by step; arithmetic in double, stored as float32)."""
    if found_inf.item():
        scale.fill_(scale.item() * backoff_factor)
        growth_tracker.fill_(0)
        return
    successful = growth_tracker.item() + 1
    if successful == growth_interval:
        new_scale = kiln.tensor(scale.item() * growth_factor, dtype=kiln.float32)
        if bool(kiln.isfinite(new_scale)):
            scale.copy_(new_scale)
        growth_tracker.fill_(0)
    else:
        growth_tracker.fill_(successful)


class GradScaler:
    """Loss scaling for mixed-precision training; see the module docstring and torch.amp.GradScaler.

    device: "cuda" (the default, as in PyTorch; disabled with a warning, since kiln has no CUDA) or "cpu".
    enabled=False makes every method a no-op except step(), which calls optimizer.step()."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if self._device == "cuda" and enabled and not _C._cuda_is_available():
            warnings.warn("kiln.amp.GradScaler is enabled on device 'cuda', but CUDA is not available.  "
                          "Disabling.", UserWarning, stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev):
        self._scale = kiln.full((), self._init_scale, dtype=kiln.float32, device=dev)
        self._growth_tracker = kiln.full((), self._init_growth_tracker, dtype=kiln.int32, device=dev)

    def scale(self, outputs):
        """outputs (a tensor, or nested lists/tuples/iterables of tensors) times the scale; unchanged
        when disabled."""
        if not self._enabled:
            return outputs

        def apply_scale(val):
            if isinstance(val, kiln.Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale.to(device=val.device)
            if isinstance(val, abc.Iterable):
                iterable = map(apply_scale, val)
                return type(val)(iterable) if isinstance(val, (list, tuple)) else iterable
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        """Unscales the optimizer's grads grouped by device and dtype; {device: found_inf}."""
        per_device_and_dtype_grads = defaultdict(lambda: defaultdict(list))
        with kiln.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    if not allow_fp16 and param.grad.dtype == kiln.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    per_device_and_dtype_grads[param.grad.device][param.grad.dtype].append(param.grad)
            found_per_device = {}
            for device, per_dtype_grads in per_device_and_dtype_grads.items():
                found_per_device[device] = found_inf.to(device=device, copy=True)
                inv = inv_scale.to(device=device)
                for grads in per_dtype_grads.values():
                    _non_finite_check_and_unscale_(grads, found_per_device[device], inv)
        return found_per_device

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale (optional before step(); once per step)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = kiln.full((), 0.0, dtype=kiln.float32, device=self._scale.device)
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):
            return optimizer.step(*args, **kwargs)
        return None

    def step(self, optimizer, *args, **kwargs):
        """Unscales (unless unscale_ ran) and calls optimizer.step(*args, **kwargs) unless a gradient
        is inf/NaN; returns what optimizer.step returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(optimizer_state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Backs the scale off if any step this iteration was skipped, else grows it every
        growth_interval clean steps; new_scale (a float or 1-element tensor) sets it instead."""
        if not self._enabled:
            return
        _scale, _growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element kiln.FloatTensor with requires_grad=False.")
                if new_scale.device.type != self._device or new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                self._scale.copy_(new_scale)
        else:
            found_infs = [found_inf.to(device=_scale.device)
                          for state in self._per_optimizer_states.values()
                          for found_inf in state["found_inf_per_device"].values()]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            found_inf_combined = found_infs[0]
            for other in found_infs[1:]:
                found_inf_combined += other
            _update_scale_(_scale, _growth_tracker, found_inf_combined, self._growth_factor,
                           self._backoff_factor, self._growth_interval)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _get_scale_async(self):
        return self._scale

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if self._enabled:
            return self._init_scale if self._scale is None else self._scale.item()
        return 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if self._enabled:
            return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker.item()
        return 0

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} as
        Python numbers ({} when disabled): PyTorch's format, so checkpoints load in either."""
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning "
                                     "of an iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
