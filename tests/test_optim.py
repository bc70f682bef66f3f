"""kiln.optim against torch.optim (2.13): N steps of every optimizer and option combination from the
same weights and gradients, param groups, state_dict format and round trips, argument checks, and the
learning-rate schedulers' lr sequences."""

import itertools
import math

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

SHAPES = [(3, 4), (5,), ()]


def _param(lib, array, dtype):
    t = lib.tensor(array, dtype=getattr(lib, dtype))
    try:
        t.requires_grad_(True)
    except NotImplementedError:  # kiln before autograd: .grad is a plain attribute
        pass
    return t


def _set_grad(p, lib, array, dtype):
    p.grad = lib.tensor(array, dtype=getattr(lib, dtype))


def _run(name, kwargs, steps=12, dtype="float32", groups=None, seed=0, skip_grad=None):
    """Runs `steps` steps of kiln.optim.<name> and torch.optim.<name> (foreach=False) on the same
    weights and gradient sequence; returns (kiln params, torch params, kiln opt, torch opt)."""
    rng = np.random.default_rng(seed)
    inits = [rng.standard_normal(s) for s in SHAPES]
    kp = [_param(kiln, a, dtype) for a in inits]
    tp = [_param(torch, a, dtype) for a in inits]
    if groups is None:
        kparams, tparams = kp, tp
    else:
        kparams = [dict(g, params=[kp[i] for i in g["params"]]) for g in groups]
        tparams = [dict(g, params=[tp[i] for i in g["params"]]) for g in groups]
    kopt = getattr(kiln.optim, name)(kparams, **kwargs)
    topt = getattr(torch.optim, name)(tparams, foreach=False, **kwargs)
    for step in range(steps):
        for i, (k, t) in enumerate(zip(kp, tp)):
            if skip_grad is not None and skip_grad(step, i):
                k.grad = t.grad = None
                continue
            g = rng.standard_normal(SHAPES[i])
            _set_grad(k, kiln, g, dtype)
            _set_grad(t, torch, g, dtype)
        kopt.step()
        topt.step()
    return kp, tp, kopt, topt


def _assert_params_close(kp, tp, rtol=1e-5, atol=1e-6):
    for k, t in zip(kp, tp):
        np.testing.assert_allclose(np.array(k.tolist()), t.detach().numpy(), rtol=rtol, atol=atol)


def _grid(**options):
    keys = list(options)
    return [dict(zip(keys, values)) for values in itertools.product(*options.values())]


SGD_CASES = [c for c in _grid(lr=[0.05], momentum=[0, 0.9], dampening=[0, 0.3], nesterov=[False, True],
                              weight_decay=[0, 0.1], maximize=[False, True])
             if not (c["nesterov"] and (c["momentum"] == 0 or c["dampening"] != 0))]
ADAM_CASES = _grid(lr=[0.01], betas=[(0.9, 0.999), (0.8, 0.9)], weight_decay=[0, 0.1], amsgrad=[False, True],
                   maximize=[False, True])
RMSPROP_CASES = _grid(lr=[0.01], alpha=[0.99, 0.9], weight_decay=[0, 0.1], momentum=[0, 0.5],
                      centered=[False, True], maximize=[False, True])
CASES = ([("SGD", c) for c in SGD_CASES] + [("Adam", c) for c in ADAM_CASES]
         + [("AdamW", c) for c in ADAM_CASES] + [("RMSprop", c) for c in RMSPROP_CASES])


@requires_torch
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in c.items())}"
                                                     for n, c in CASES])
def test_matches_torch(name, kwargs):
    kp, tp, _, _ = _run(name, kwargs)
    _assert_params_close(kp, tp)


@requires_torch
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_defaults_float64_and_long_runs(name):
    kwargs = {"lr": 0.01} if name == "SGD" else {}
    kp, tp, _, _ = _run(name, kwargs, steps=40, dtype="float64")
    _assert_params_close(kp, tp, rtol=1e-10, atol=1e-12)
    kp, tp, _, _ = _run(name, kwargs, steps=40)
    _assert_params_close(kp, tp)


@requires_torch
@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.01, amsgrad=True)),
                                         ("AdamW", dict(lr=0.01)), ("RMSprop", dict(lr=0.01, momentum=0.3,
                                                                                    centered=True))])
def test_param_groups_and_missing_grads(name, kwargs):
    groups = [{"params": [0, 2], "lr": 0.003}, {"params": [1], "weight_decay": 0.2}]
    # param 1 has no gradient on some steps: it is skipped (and its state created lazily) as in torch
    kp, tp, kopt, topt = _run(name, kwargs, groups=groups, skip_grad=lambda step, i: i == 1 and step % 3 != 2)
    _assert_params_close(kp, tp)
    assert len(kopt.param_groups) == 2
    for kg, tg in zip(kopt.param_groups, topt.param_groups):
        assert {k: v for k, v in kg.items() if k != "params"} == {k: v for k, v in tg.items() if k != "params"} \
            | {"foreach": None}  # torch's ran with foreach=False
        assert kg["params"][0] is not None


@requires_torch
def test_grad_none_creates_no_state():
    _, _, kopt, topt = _run("Adam", {}, steps=3, skip_grad=lambda step, i: i == 0)
    assert len(kopt.state) == len(topt.state) == 2


def _to_py(x):
    """state_dict values as plain Python (tensors -> (dtype name, nested lists))."""
    if hasattr(x, "tolist") and hasattr(x, "dtype"):
        return str(x.dtype).split(".")[1], x.tolist()
    if isinstance(x, dict):
        return {k: _to_py(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_py(v) for v in x)
    return x


@requires_torch
@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("Adam", dict(amsgrad=True)), ("AdamW", {}),
                                         ("RMSprop", dict(momentum=0.5, centered=True))])
def test_state_dict_format_and_resume(name, kwargs):
    groups = [{"params": [0], "lr": 0.02}, {"params": [1, 2]}]
    kp, tp, kopt, topt = _run(name, kwargs, steps=5, groups=groups)
    ksd, tsd = kopt.state_dict(), topt.state_dict()
    assert list(ksd) == ["state", "param_groups"]
    ks, ts = _to_py(ksd), _to_py(tsd)
    assert ks["param_groups"] == [dict(g, foreach=None) for g in ts["param_groups"]]
    assert sorted(ks["state"]) == sorted(ts["state"])
    for pid in ts["state"]:
        assert ks["state"][pid].keys() == ts["state"][pid].keys()
        for key, (tdt, tval) in ts["state"][pid].items():
            kdt, kval = ks["state"][pid][key]
            assert kdt == tdt, key
            np.testing.assert_allclose(kval, tval, rtol=1e-5, atol=1e-6)

    # a fresh optimizer loading the state after 5 steps continues exactly as torch does
    rng = np.random.default_rng(7)
    kp2 = [_param(kiln, np.array(p.tolist()), "float32") for p in kp]
    kopt2 = getattr(kiln.optim, name)([{"params": [kp2[0]], "lr": 0.5}, {"params": kp2[1:]}], **kwargs)
    kopt2.load_state_dict(ksd)
    assert kopt2.param_groups[0]["lr"] == 0.02 and kopt2.param_groups[0]["params"][0] is kp2[0]
    for _ in range(4):
        for i, (k, t) in enumerate(zip(kp2, tp)):
            g = rng.standard_normal(SHAPES[i])
            _set_grad(k, kiln, g, "float32")
            _set_grad(t, torch, g, "float32")
        kopt2.step()
        topt.step()
    _assert_params_close(kp2, tp)


def test_load_state_dict_casts_to_param_dtype_and_checks_layout():
    p = kiln.zeros(3, dtype=kiln.float64)
    opt = kiln.optim.Adam([p])
    sd = {"state": {0: {"step": kiln.tensor(2.0), "exp_avg": kiln.ones(3), "exp_avg_sq": kiln.ones(3)}},
          "param_groups": [dict(opt.state_dict()["param_groups"][0])]}
    opt.load_state_dict(sd)
    assert opt.state[p]["exp_avg"].dtype == kiln.float64
    assert opt.state[p]["step"].dtype == kiln.float32  # steps are not cast
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    bad = {"state": {}, "param_groups": [dict(sd["param_groups"][0], params=[0, 1])]}
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(bad)


@requires_torch
def test_load_state_dict_errors_like_torch():
    for lib in (kiln, torch):
        a, b = lib.zeros(2), lib.zeros(3)
        src = lib.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).state_dict()
        dst = lib.optim.SGD([a, b], lr=0.1)
        with pytest.raises(ValueError) as e:
            dst.load_state_dict(src)
        assert str(e.value) == "loaded state dict has a different number of parameter groups"
        src = lib.optim.SGD([a], lr=0.1).state_dict()
        with pytest.raises(ValueError) as e:
            dst.load_state_dict(src)
        assert "doesn't match the size of optimizer's group" in str(e.value)


BAD_ARGS = [("SGD", dict(lr=-1)), ("SGD", dict(lr=0.1, momentum=-0.5)), ("SGD", dict(lr=0.1, weight_decay=-1)),
            ("SGD", dict(lr=0.1, nesterov=True)), ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)),
            ("Adam", dict(lr=-1)), ("Adam", dict(eps=-1e-8)), ("Adam", dict(betas=(1.0, 0.999))),
            ("Adam", dict(betas=(0.9, -0.1))), ("Adam", dict(weight_decay=-0.1)), ("AdamW", dict(lr=-0.5)),
            ("AdamW", dict(betas=(-0.1, 0.9))), ("Adam", dict(betas=(0, 0.9))), ("Adam", dict(betas=(0.9, 1))),
            ("RMSprop", dict(lr=-1)), ("RMSprop", dict(eps=-1)),
            ("RMSprop", dict(momentum=-1)), ("RMSprop", dict(weight_decay=-1)), ("RMSprop", dict(alpha=-1))]


@requires_torch
@pytest.mark.parametrize("name,kwargs", BAD_ARGS)
def test_bad_arguments_like_torch(name, kwargs):
    with pytest.raises(Exception) as expected:
        getattr(torch.optim, name)([torch.zeros(2)], **kwargs)
    with pytest.raises(Exception) as got:
        getattr(kiln.optim, name)([kiln.zeros(2)], **kwargs)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


@requires_torch
def test_bad_params_like_torch():
    for make in [lambda lib: lib.zeros(2), lambda lib: [], lambda lib: [{"params": {lib.zeros(2)}}], lambda lib: [1.0],
                 lambda lib: [{"params": [lib.zeros(1)]}, {"params": []}, "x"]]:
        with pytest.raises(Exception) as expected:
            torch.optim.SGD(make(torch), lr=0.1)
        with pytest.raises(Exception) as got:
            kiln.optim.SGD(make(kiln), lr=0.1)
        assert type(got.value) is type(expected.value), (got.value, expected.value)


def test_add_param_group():
    a, b, c = kiln.zeros(2), kiln.zeros(3), kiln.zeros(4)
    opt = kiln.optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["lr"] == 0.01
    assert opt.param_groups[1]["momentum"] == 0.9  # defaults filled
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        opt.add_param_group({"params": [c, a]})
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([c])
    with pytest.warns(UserWarning, match="duplicate parameters"):
        kiln.optim.SGD([c, c], lr=0.1)
    assert "Parameter Group 1" in repr(opt)


def test_zero_grad_and_closure():
    p = kiln.ones(3)
    opt = kiln.optim.SGD([p], lr=0.5)
    p.grad = kiln.ones(3)
    calls = []
    loss = opt.step(lambda: calls.append(1) or 4.0)
    assert loss == 4.0 and calls == [1]
    assert p.tolist() == [0.5, 0.5, 0.5]
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no gradient: nothing changes
    assert p.tolist() == [0.5, 0.5, 0.5]


def test_unsupported_options_are_refused():
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        kiln.optim.Adam([kiln.zeros(2)], fused=True, foreach=True)
    with pytest.raises(NotImplementedError, match="capturable"):
        kiln.optim.RMSprop([kiln.zeros(2)], capturable=True)


@requires_torch
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_fused_adam_on_the_cpu_matches_torch_fused(name):
    """fused=True (nanoGPT passes it) runs the single-tensor step on the CPU; PyTorch's fused CPU
    kernel computes the same step."""
    rng = np.random.default_rng(0)
    init = rng.standard_normal((5, 7)).astype(np.float32)
    k, t = kiln.tensor(init).requires_grad_(), torch.tensor(init).requires_grad_()
    kopt = getattr(kiln.optim, name)([k], lr=0.01, weight_decay=0.1, fused=True)
    topt = getattr(torch.optim, name)([t], lr=0.01, weight_decay=0.1, fused=True)
    for step in range(4):
        g = rng.standard_normal((5, 7)).astype(np.float32)
        k.grad, t.grad = kiln.tensor(g), torch.tensor(g)
        kopt.step()
        topt.step()
        np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-7, err_msg=str(step))


# --- learning-rate schedulers ------------------------------------------------------------------
SCHEDULERS = [
    ("StepLR", dict(step_size=4, gamma=0.5), "SGD"),
    ("StepLR", dict(step_size=1), "Adam"),
    ("MultiStepLR", dict(milestones=[3, 7, 7, 20], gamma=0.3), "SGD"),
    ("ConstantLR", dict(factor=0.25, total_iters=6), "SGD"),
    ("ExponentialLR", dict(gamma=0.9), "SGD"),
    ("CosineAnnealingLR", dict(T_max=10), "SGD"),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001), "Adam"),
    ("LambdaLR", dict(lr_lambda=lambda e: 0.95 ** e + 0.01 * (e % 3)), "SGD"),
    ("LinearLR", dict(start_factor=0.1, end_factor=1.0, total_iters=8), "SGD"),
    ("LinearLR", dict(start_factor=1.0, end_factor=0.05, total_iters=12), "AdamW"),
    ("PolynomialLR", dict(total_iters=20, power=2.0), "SGD"),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.9 if e % 2 else 1.01), "SGD"),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=4), "SGD"),
    ("CyclicLR", dict(base_lr=0.001, max_lr=[0.01, 0.02], step_size_up=3, step_size_down=5, mode="triangular2"),
     "Adam"),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.97), "SGD"),
    ("CosineAnnealingWarmRestarts", dict(T_0=5), "SGD"),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.001), "AdamW"),
    ("OneCycleLR", dict(max_lr=0.1, total_steps=31), "SGD"),
    ("OneCycleLR", dict(max_lr=[0.1, 0.02], total_steps=31, anneal_strategy="linear"), "SGD"),
    ("OneCycleLR", dict(max_lr=0.01, epochs=3, steps_per_epoch=11, three_phase=True), "Adam"),
    ("OneCycleLR", dict(max_lr=0.01, total_steps=40, cycle_momentum=False, pct_start=0.25), "AdamW"),
]


def _scheduled(lib, opt_name, sched_name, kwargs):
    a, b = lib.zeros(2), lib.zeros(3)
    opt_kwargs = {"lr": 0.1, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.01}
    opt = getattr(lib.optim, opt_name)([{"params": [a]}, {"params": [b], "lr": 0.05}], **opt_kwargs)
    sched = getattr(lib.optim.lr_scheduler, sched_name)(opt, **kwargs)
    return opt, sched


def _momenta(opt):
    return [g["betas"][0] if "betas" in g else g.get("momentum") for g in opt.param_groups]


@requires_torch
@pytest.mark.parametrize("sched_name,kwargs,opt_name", SCHEDULERS,
                         ids=[f"{s}-{i}" for i, (s, _, _) in enumerate(SCHEDULERS)])
def test_scheduler_sequence_matches_torch(sched_name, kwargs, opt_name):
    kopt, ks = _scheduled(kiln, opt_name, sched_name, kwargs)
    topt, ts = _scheduled(torch, opt_name, sched_name, kwargs)
    steps = 30
    for _ in range(steps):
        assert ks.get_last_lr() == ts.get_last_lr()  # exactly the same floats
        assert [g["lr"] for g in kopt.param_groups] == [g["lr"] for g in topt.param_groups]
        assert _momenta(kopt) == _momenta(topt)
        assert ks.last_epoch == ts.last_epoch
        kopt.step()
        topt.step()
        ks.step()
        ts.step()
    ksd, tsd = ks.state_dict(), ts.state_dict()
    tsd = {k: v for k, v in tsd.items() if not k.startswith("_get_lr_called") and k != "_is_initial"}
    assert {k: v for k, v in ksd.items() if k in tsd} == {k: v for k, v in tsd.items() if k != "lr_lambdas"} \
        | ({"lr_lambdas": ksd["lr_lambdas"]} if "lr_lambdas" in tsd else {})


@requires_torch
@pytest.mark.parametrize("sched_name,kwargs", [("StepLR", dict(step_size=3, gamma=0.5)),
                                               ("CosineAnnealingLR", dict(T_max=10, eta_min=0.01)),
                                               ("LinearLR", dict(start_factor=0.2, total_iters=6)),
                                               ("MultiStepLR", dict(milestones=[2, 5])),
                                               ("ExponentialLR", dict(gamma=0.8))])
def test_scheduler_closed_form_step_epoch(sched_name, kwargs):
    kopt, ks = _scheduled(kiln, "SGD", sched_name, kwargs)
    topt, ts = _scheduled(torch, "SGD", sched_name, kwargs)
    for epoch in [3, 4, 9, 15, 2]:
        with pytest.warns(UserWarning):
            ks.step(epoch)
        with pytest.warns(UserWarning):
            ts.step(epoch)
        assert ks.get_last_lr() == ts.get_last_lr()


def test_scheduler_state_dict_round_trip():
    opt, s = _scheduled(kiln, "SGD", "CosineAnnealingLR", dict(T_max=10))
    for _ in range(4):
        opt.step()
        s.step()
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4
    opt2, s2 = _scheduled(kiln, "SGD", "CosineAnnealingLR", dict(T_max=10))
    s2.load_state_dict(sd)
    opt2.load_state_dict(opt.state_dict())
    for _ in range(5):
        s.step()
        s2.step()
        assert s.get_last_lr() == s2.get_last_lr()


@requires_torch
def test_scheduler_errors_like_torch():
    cases = [("OneCycleLR", dict(max_lr=0.1)), ("OneCycleLR", dict(max_lr=0.1, total_steps=0)),
             ("OneCycleLR", dict(max_lr=0.1, total_steps=10, anneal_strategy="x")),
             ("OneCycleLR", dict(max_lr=0.1, total_steps=10, pct_start=2.0)),
             ("OneCycleLR", dict(max_lr=[0.1, 0.2, 0.3], total_steps=10)),
             ("LinearLR", dict(start_factor=0)), ("LinearLR", dict(end_factor=2)),
             ("ConstantLR", dict(factor=2)), ("LambdaLR", dict(lr_lambda=[lambda e: 1.0] * 3))]
    for name, kwargs in cases:
        with pytest.raises(Exception) as expected:
            _scheduled(torch, "SGD", name, kwargs)
        with pytest.raises(Exception) as got:
            _scheduled(kiln, "SGD", name, kwargs)
        assert type(got.value) is type(expected.value) and str(got.value) == str(expected.value), name
    with pytest.raises(TypeError, match="is not an Optimizer"):
        kiln.optim.lr_scheduler.StepLR(object(), step_size=1)
    # stepping OneCycleLR past total_steps
    opt, s = _scheduled(kiln, "SGD", "OneCycleLR", dict(max_lr=0.1, total_steps=3))
    s.step()
    s.step()
    s.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        s.step()
    assert math.isfinite(opt.param_groups[0]["lr"])


def test_step_hooks():
    calls = []
    p = kiln.ones(2)
    p.grad = kiln.ones(2)
    opt = kiln.optim.SGD([p], lr=0.5)
    h1 = opt.register_step_pre_hook(lambda o, a, k: calls.append(("pre", o is opt)))
    h2 = opt.register_step_post_hook(lambda o, a, k: calls.append(("post", p.tolist())))
    h3 = kiln.optim.register_optimizer_step_pre_hook(lambda o, a, k: calls.append("global"))
    opt.step()
    assert calls == ["global", ("pre", True), ("post", [0.5, 0.5])]
    for h in (h1, h2, h3):
        h.remove()
    opt.step()
    assert len(calls) == 3 and p.tolist() == [0.0, 0.0]

    class Plain(kiln.optim.Optimizer):  # a user's optimizer gets the hooks too
        def __init__(self, params):
            super().__init__(params, {"lr": 1.0})

        def step(self, closure=None):
            calls.append("user step")

    o = Plain([kiln.zeros(1)])
    o.register_step_pre_hook(lambda *a: calls.append("user pre"))
    o.step()
    assert calls[-2:] == ["user pre", "user step"]


@requires_torch
def test_sequential_lr_warmup_then_cosine_matches_torch():
    def make(lib):
        a = lib.zeros(2)
        opt = lib.optim.SGD([a], lr=0.1, momentum=0.9)
        warm = lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.01, total_iters=5)
        cos = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20)
        return opt, lib.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[5])

    (kopt, ks), (topt, ts) = make(kiln), make(torch)
    for _ in range(30):
        assert ks.get_last_lr() == ts.get_last_lr()
        assert kopt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]
        kopt.step()
        topt.step()
        ks.step()
        ts.step()


@requires_torch
@pytest.mark.parametrize("kwargs", [dict(), dict(mode="max", patience=2, cooldown=1, factor=0.5),
                                    dict(threshold_mode="abs", threshold=0.1, patience=1, min_lr=0.03)])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    metrics = [1.0, 0.9, 0.95, 0.95, 0.91, 0.89, 0.89, 0.9, 0.88, 0.88, 0.88, 0.9] * 3
    seqs = []
    for lib in (kiln, torch):
        opt = lib.optim.Adam([lib.zeros(2)], lr=0.1)
        s = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        seq = []
        for m in metrics:
            s.step(m)
            seq.append((opt.param_groups[0]["lr"], s.get_last_lr(), s.num_bad_epochs, s.best))
        seqs.append(seq)
    assert seqs[0] == seqs[1]


def _has_autograd():
    try:
        kiln.zeros(1).requires_grad_(True)
        return True
    except NotImplementedError:
        return False


@requires_torch
@pytest.mark.skipif(not _has_autograd(), reason="needs kiln autograd")
@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
                                         ("Adam", dict(lr=0.01, amsgrad=True)), ("AdamW", dict(lr=0.01)),
                                         ("RMSprop", dict(lr=0.005, momentum=0.5, centered=True))])
def test_training_loop_with_autograd_matches_torch(name, kwargs):
    """A two-layer model trained with loss.backward(), closures, zero_grad and a scheduler, in both."""
    rng = np.random.default_rng(3)
    x, target = rng.standard_normal((16, 6)), rng.standard_normal((16, 2))
    inits = [rng.standard_normal((6, 8)) * 0.3, np.zeros(8), rng.standard_normal((8, 2)) * 0.3, np.zeros(2)]
    runs = []
    for lib in (kiln, torch):
        params = [lib.tensor(a, dtype=lib.float32).requires_grad_() for a in inits]
        xs, ts = lib.tensor(x, dtype=lib.float32), lib.tensor(target, dtype=lib.float32)
        extra = {"foreach": False} if lib is torch else {}
        opt = getattr(lib.optim, name)(params, **kwargs, **extra)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)

        def closure():
            opt.zero_grad()
            w1, b1, w2, b2 = params
            h = xs @ w1 + b1
            loss = ((h * h) @ w2 + b2 - ts).pow(2).mean()
            loss.backward()
            return loss

        losses = []
        for step in range(15):
            if step % 2:
                losses.append(opt.step(closure).item())
            else:
                losses.append(closure().item())
                opt.step()
            sched.step()
        opt.zero_grad(set_to_none=False)
        assert all(p.grad is not None and not p.grad.any().item() for p in params)
        assert all(p.is_leaf and p.requires_grad and p.grad_fn is None for p in params)
        runs.append((losses, [p.detach().tolist() for p in params]))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-5, atol=1e-6)
    for k, t in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(k, t, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not _has_autograd(), reason="needs kiln autograd")
def test_step_runs_without_grad_and_closure_with_grad():
    p = kiln.ones(2).requires_grad_()
    seen = []

    class Probe(kiln.optim.SGD):
        def step(self, closure=None):
            seen.append(("step", kiln.is_grad_enabled()))
            return super().step(closure)

    opt = Probe([p], lr=0.1)

    def closure():
        seen.append(("closure", kiln.is_grad_enabled()))
        loss = (p * p).sum()
        loss.backward()
        return loss

    opt.step(closure)
    assert ("closure", True) in seen
    assert p.grad_fn is None and p.is_leaf and p.tolist() == pytest.approx([0.8, 0.8])


@requires_torch
@pytest.mark.skipif(not _has_autograd(), reason="needs kiln autograd")
@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_non_leaf_and_create_graph_grads_like_torch():
    for lib in (kiln, torch):
        p = lib.ones(2).requires_grad_()
        with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
            lib.optim.SGD([p * 2], lr=0.1)
        (p * p).sum().backward(create_graph=True)
        assert p.grad.grad_fn is not None
        opt = lib.optim.SGD([p], lr=0.1)
        opt.zero_grad(set_to_none=False)  # detaches a grad that has history, then zeroes it
        assert p.grad.grad_fn is None and p.grad.tolist() == [0.0, 0.0]


@requires_torch
def test_chained_scheduler_matches_torch():
    def make(lib):
        opt = lib.optim.SGD([lib.zeros(2)], lr=1.0)
        s1 = lib.optim.lr_scheduler.ConstantLR(opt, factor=0.1, total_iters=3)
        s2 = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
        return opt, lib.optim.lr_scheduler.ChainedScheduler([s1, s2])

    (kopt, ks), (topt, ts) = make(kiln), make(torch)
    for _ in range(12):
        assert ks.get_last_lr() == ts.get_last_lr()
        kopt.step()
        topt.step()
        ks.step()
        ts.step()
