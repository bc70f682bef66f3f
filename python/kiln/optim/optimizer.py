"""kiln.optim.Optimizer: the base class of optimizers, with PyTorch's semantics.

Param groups are dicts ({"params": [...], "lr": ..., ...}) whose missing options are filled from
the optimizer's defaults; `state` maps each parameter (the tensor object itself) to a dict of its
buffers; `state_dict()` is PyTorch's format: parameters replaced by integer ids numbered in
param-group order, {"state": {id: {...}}, "param_groups": [{..., "params": [ids]}]}.
"""

import contextlib
import functools
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

import kiln
from kiln import Tensor
from kiln.utils.hooks import RemovableHandle


class _RequiredParameter:
    """Singleton class representing a required parameter for an Optimizer."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _grad_mode(name):
    """kiln.no_grad / kiln.enable_grad when autograd provides them, else a do-nothing context."""
    ctx = getattr(kiln, name, None)
    return ctx() if ctx is not None else contextlib.nullcontext()


def _no_grad_step(step):
    """Runs an optimizer's step under kiln.no_grad() (updates are not recorded by autograd)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with _grad_mode("no_grad"):
            return step(self, *args, **kwargs)

    return wrapper


def _use_grad_for_differentiable(step):
    """Runs a step with grad mode = the optimizer's `differentiable` option, as PyTorch's decorator of
    the same name: a differentiable step is recorded by autograd, so its parameters must not be leaves
    that require grad (an in-place update of one raises autograd's error)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with kiln.set_grad_enabled(bool(self.defaults["differentiable"])):
            return step(self, *args, **kwargs)

    return wrapper


def _scalar_dtype():
    """The dtype of scalar state ("step", NAdam's "mu_product", ASGD's "eta"/"mu"): float64 when it is
    the default dtype, else float32 (PyTorch's _get_scalar_dtype)."""
    return kiln.float64 if kiln.get_default_dtype() == kiln.float64 else kiln.float32


# PyTorch's capturable optimizers run on these device types only; kiln's tensors are CPU tensors, so a
# capturable step fails as PyTorch's does on CPU (an AssertionError naming the supported devices).
_CAPTURABLE_DEVICES = ["cuda", "xpu", "hpu", "privateuseone"]


def _refuse_cpu_only_paths(group, params, single=("params and state_steps", True),
                           foreach=("params and state_steps", False)):
    """PyTorch's step-time refusals on CPU, before any update: the multi-tensor path (foreach=True) does
    not record autograd, and capturable needs an accelerator. `single`/`foreach` are what each path's
    capturable message names and whether its device list includes "xla" (they differ per optimizer)."""
    if not params:
        return
    if group["foreach"] and group["differentiable"]:
        raise AssertionError("_foreach ops don't support autograd")
    if group.get("capturable"):
        what, xla = foreach if group["foreach"] else single
        devices = _CAPTURABLE_DEVICES + (["xla"] if xla else [])
        raise AssertionError(f"If capturable=True, {what} must be on supported devices: {devices}.")


def _check_adam_arguments(lr, eps, betas, weight_decay):
    """The constructor checks Adam, AdamW, Adamax, NAdam and RAdam share, in PyTorch's order."""
    if isinstance(lr, kiln.Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _refuse_sparse(grad, name):
    if getattr(grad, "is_sparse", False):
        raise RuntimeError(f"{name} does not support sparse gradients")


_global_step_pre_hooks = OrderedDict()
_global_step_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """A hook(optimizer, args, kwargs) called before every optimizer's step."""
    handle = RemovableHandle(_global_step_pre_hooks)
    _global_step_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """A hook(optimizer, args, kwargs) called after every optimizer's step."""
    handle = RemovableHandle(_global_step_post_hooks)
    _global_step_post_hooks[handle.id] = hook
    return handle


def _with_step_hooks(step):
    """Wraps a class's step so registered step hooks run around it (a dict check when there are none)."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if not (self._optimizer_step_pre_hooks or self._optimizer_step_post_hooks or _global_step_pre_hooks
                or _global_step_post_hooks):
            return step(self, *args, **kwargs)
        for pre_hook in chain(_global_step_pre_hooks.values(), self._optimizer_step_pre_hooks.values()):
            result = pre_hook(self, args, kwargs)
            if result is not None:
                if isinstance(result, tuple) and len(result) == 2:
                    args, kwargs = result
                else:
                    raise RuntimeError(f"{pre_hook} must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {result}.")
        out = step(self, *args, **kwargs)
        for post_hook in chain(self._optimizer_step_post_hooks.values(), _global_step_post_hooks.values()):
            post_hook(self, args, kwargs)
        return out

    wrapper._kiln_hooked = True
    return wrapper


def _to_scalar(x):
    """A 1-element tensor option (lr, betas) as a Python number."""
    if isinstance(x, Tensor):
        if x.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        return x.item()
    return x


def _lr_scalar(x):
    """PyTorch's optim._to_scalar, as the newer optimizers use it: a tensor option (lr) stays a 0-d
    tensor, so the arithmetic on it rounds in its dtype exactly as PyTorch's; a number stays a number."""
    if isinstance(x, Tensor) and x.dim() != 0:
        return x.squeeze()
    return x


def _typename(obj):
    if isinstance(obj, Tensor):
        return "kiln.Tensor"
    t = type(obj)
    return t.__qualname__ if t.__module__ in ("builtins", "__builtin__") else f"{t.__module__}.{t.__qualname__}"


class Optimizer:
    """Base class for all optimizers. `params` is an iterable of tensors or of dicts (param groups)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._patch_step_function()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    # Group options a state saved by an older version may lack, filled in on load; and whether the
    # per-parameter "step" count is kept as a tensor (Adam, RMSprop), as in PyTorch.
    _group_option_defaults = {}
    _tensor_step = False

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_optimizer_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_optimizer_step_post_hooks", OrderedDict())
        for group in self.__dict__.get("param_groups", ()):
            for key, value in self._group_option_defaults.items():
                group.setdefault(key, value)
            if not self._tensor_step:
                continue
            for p in group["params"]:
                p_state = self.state.get(p, [])
                if len(p_state) != 0 and not isinstance(p_state["step"], kiln.Tensor):
                    p_state["step"] = kiln.tensor(float(p_state["step"]), dtype=kiln.float32)

    def _patch_step_function(self):
        cls = type(self)
        if not getattr(cls.step, "_kiln_hooked", False):
            cls.step = _with_step_hooks(cls.step)

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs), called before step()."""
        handle = RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) -> None, called after step()."""
        handle = RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def __repr__(self):
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += f"    {key}: {group[key]}\n"
        return format_string + ")"

    # --- param groups ---------------------------------------------------------------------------
    def add_param_group(self, param_group):
        """Adds a param group (a dict with "params" and per-group options) to `param_groups`."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)

        tensors, names = [], []
        for param in param_group["params"]:
            if isinstance(param, tuple):  # named_parameters()
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names

        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not self.defaults.get("differentiable", None) and not (
                    getattr(param, "is_leaf", True) or getattr(param, "retains_grad", False)):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)

        param_set = set()
        for group in self.param_groups:
            param_set.update(set(group["params"]))
            if ("param_names" in param_group) != ("param_names" in group):
                current = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {current} to the optimizer")
        if not param_set.isdisjoint(set(param_group["params"])):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # --- gradients and steps --------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Resets the gradients of all optimized tensors (to None, or to zeros in place)."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if getattr(g, "grad_fn", None) is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        """Performs one optimization step; `closure` re-evaluates the model and returns the loss."""
        raise NotImplementedError

    @staticmethod
    def _closure_loss(closure):
        if closure is None:
            return None
        with _grad_mode("enable_grad"):
            return closure()

    def _params_with_grad(self, group, name, new_state):
        """The group's parameters that have a gradient (a sparse one refused, as PyTorch's `name`
        does); a parameter's state is created at its first gradient: a 0-d `step`, then
        new_state(p, group)'s entries, in PyTorch's key order."""
        params = []
        for p in group["params"]:
            if p.grad is None:
                continue
            _refuse_sparse(p.grad, name)
            params.append(p)
            p_state = self.state[p]
            if len(p_state) == 0:
                p_state["step"] = kiln.zeros((), dtype=_scalar_dtype())
                p_state.update(new_state(p, group))
        return params

    # --- state dicts ------------------------------------------------------------------------------
    def state_dict(self):
        """The optimizer state in PyTorch's format (parameters replaced by integer ids)."""
        param_mappings = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": param_groups}

    @staticmethod
    def _process_value_according_to_param_policy(param, value, param_id, param_groups, key=None):
        if key == "step":
            return value  # steps stay float32 CPU scalars (the non-capturable, non-fused layout)
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict):
        """Loads a state produced by `state_dict()` (of an optimizer with the same group layout)."""
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict or "state" not in state_dict:
            raise ValueError("optimizer state dict must be a dict with 'state' and 'param_groups' entries")
        state_dict = state_dict.copy()
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def _cast(param, value, param_id=None, key=None):
            if isinstance(value, Tensor):
                return Optimizer._process_value_according_to_param_policy(param, value, param_id,
                                                                          state_dict["param_groups"], key)
            if isinstance(value, dict):
                return {k: _cast(param, v, param_id=param_id, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(_cast(param, v, param_id=param_id) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = _cast(param, v, param_id=k)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})


def _check_unsupported(**options):
    """kiln runs the single-tensor path only; options that need another one are refused clearly."""
    for name, value in options.items():
        if value:
            raise NotImplementedError(f"kiln.optim: {name}=True is not supported (kiln implements the "
                                      f"single-tensor path only)")
