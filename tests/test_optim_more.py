"""kiln.optim's Adadelta, Adagrad, Adamax, NAdam, RAdam, Rprop, ASGD, Adafactor and LBFGS against torch.optim
(2.13):
every option combination steps the same weights with the same gradients in both libraries and the
parameters *and every state entry* are compared after each step (float64 tightly, float32 loosely);
state_dict layout and round trips; constructor and step errors; differentiable steps; LBFGS's
trajectory on least squares and Rosenbrock with both line searches; schedulers; compiled training."""

import copy

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch

# the last parameter never gets a gradient: it is skipped (and gets no state, except in Adagrad)
SHAPES = [(3, 4), (5,), (), (2,)]
NAMES = ["Adadelta", "Adagrad", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"]
TABLE = NAMES + ["Adafactor"]  # Adafactor has no capturable/differentiable options: not in the NAMES-only tests


class _T:
    """An option given as a 0-d tensor (lr=_T(0.01)): made in each library."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"tensor({self.value})"


def _options(lib, kwargs):
    return {k: (lib.tensor(v.value) if isinstance(v, _T) else v) for k, v in kwargs.items()}


def _params(lib, inits, dtype):
    return [lib.tensor(a, dtype=getattr(lib, dtype)).requires_grad_() for a in inits]


def _numpy(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.array(t.detach().tolist())


def _assert_close(k, t, rtol, atol, what=""):
    if isinstance(t, torch.Tensor):
        assert isinstance(k, kiln.Tensor), what
        assert str(k.dtype).split(".")[1] == str(t.dtype).split(".")[1], what
        assert tuple(k.shape) == tuple(t.shape), what
        np.testing.assert_allclose(_numpy(k), _numpy(t), rtol=rtol, atol=atol, err_msg=what)
    elif isinstance(t, (list, tuple)):
        assert type(k) is type(t) and len(k) == len(t), what
        for i, (kv, tv) in enumerate(zip(k, t)):
            _assert_close(kv, tv, rtol, atol, f"{what}[{i}]")
    elif isinstance(t, float):
        assert k == pytest.approx(t, rel=rtol, abs=atol), what
    else:
        assert k == t, what


def _assert_states_close(kopt, topt, kp, tp, rtol, atol):
    assert len(kopt.state) == len(topt.state)
    for i, (k, t) in enumerate(zip(kp, tp)):
        np.testing.assert_allclose(_numpy(k), _numpy(t), rtol=rtol, atol=atol, err_msg=f"param {i}")
        assert (k in kopt.state) == (t in topt.state), i
        if t in topt.state:
            ks, ts = kopt.state[k], topt.state[t]
            assert list(ks) == list(ts), i
            for key in ts:
                _assert_close(ks[key], ts[key], rtol, atol, f"param {i} state {key!r}")


TOL = {"float64": (1e-10, 1e-12), "float32": (2e-5, 2e-6)}


def _run(name, kwargs, steps=8, dtype="float64", seed=0, groups=None, torch_kwargs=None):
    """Steps kiln.optim.<name> and torch.optim.<name> (foreach=False) together, comparing parameters and
    state after every step; returns (kiln params, torch params, kiln opt, torch opt, rng)."""
    rng = np.random.default_rng(seed)
    inits = [rng.standard_normal(s) for s in SHAPES]
    kp, tp = _params(kiln, inits, dtype), _params(torch, inits, dtype)
    kparams, tparams = kp, tp
    if groups is not None:
        kparams = [dict(g, params=[kp[i] for i in g["params"]]) for g in groups]
        tparams = [dict(g, params=[tp[i] for i in g["params"]]) for g in groups]
    kopt = getattr(kiln.optim, name)(kparams, **_options(kiln, kwargs))
    extra = {"foreach": False} if torch_kwargs is None else torch_kwargs
    topt = getattr(torch.optim, name)(tparams, **_options(torch, kwargs), **extra)
    _step_both(kp, tp, kopt, topt, rng, steps, dtype)
    return kp, tp, kopt, topt, rng


def _step_both(kp, tp, kopt, topt, rng, steps, dtype, check=True):
    for _ in range(steps):
        for i, (k, t) in enumerate(zip(kp[:3], tp[:3])):
            g = rng.standard_normal(SHAPES[i])
            k.grad = kiln.tensor(g, dtype=getattr(kiln, dtype))
            t.grad = torch.tensor(g, dtype=getattr(torch, dtype))
        kopt.step()
        topt.step()
        if check:
            _assert_states_close(kopt, topt, kp, tp, *TOL[dtype])


CASES = {
    "Adadelta": [{}, dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1), dict(maximize=True, weight_decay=0.05),
                 dict(lr=_T(0.3), rho=0.95)],
    "Adagrad": [{}, dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-6),
                dict(maximize=True, lr_decay=0.01), dict(lr=_T(0.05), weight_decay=0.2)],
    "Adamax": [{}, dict(lr=0.01, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1), dict(maximize=True),
               dict(lr=_T(0.02), betas=(0.5, 0.99))],
    "NAdam": [{}, dict(lr=0.01, momentum_decay=0.01, weight_decay=0.1), dict(weight_decay=0.1,
                                                                              decoupled_weight_decay=True),
              dict(maximize=True, betas=(0.8, 0.95), eps=1e-4), dict(lr=_T(0.01), momentum_decay=0)],
    "RAdam": [{}, dict(weight_decay=0.1), dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
              dict(maximize=True, betas=(0.9, 0.99), eps=1e-4), dict(lr=_T(0.01), betas=(0.5, 0.9))],
    "Rprop": [{}, dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.15)), dict(maximize=True),
              dict(lr=_T(0.05), step_sizes=(0.02, 0.2))],
    "ASGD": [{}, dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=3, weight_decay=0.1), dict(maximize=True, t0=0),
             dict(lr=_T(0.1), lambd=0.1, t0=1)],
    # lr 0.5 > 1/sqrt(step) from step 5: both sides of the relative step size's min run; eps2=0.5 and
    # d=1.1 make the RMS floor and the update clipping bind
    "Adafactor": [{}, dict(lr=0.5, beta2_decay=-0.5, eps=(1e-4, 0.5), d=1.1, weight_decay=0.1),
                  dict(maximize=True, eps=(1e-20, 1e-3)), dict(lr=_T(0.02), weight_decay=0.5)],
}
ALL_CASES = [(n, c) for n in TABLE for c in CASES[n]]
RADAM_STEPS = 10  # rho_t passes 5 at step 6 with beta2=0.999: both of RAdam's branches run


@requires_torch
@pytest.mark.parametrize("name,kwargs", ALL_CASES, ids=[f"{n}-{c}" for n, c in ALL_CASES])
def test_params_and_state_match_torch_float64(name, kwargs):
    _run(name, kwargs, steps=RADAM_STEPS if name == "RAdam" else 8)


@requires_torch
@pytest.mark.parametrize("name", TABLE)
def test_float32_matches_torch(name):
    _run(name, CASES[name][1], steps=RADAM_STEPS if name == "RAdam" else 8, dtype="float32")


@requires_torch
def test_scalar_state_follows_default_dtype_like_torch():
    # with float64 as the default dtype, "step", "mu_product", "eta" and "mu" are float64 in both
    kiln.set_default_dtype(kiln.float64)
    torch.set_default_dtype(torch.float64)
    try:
        for name in TABLE:
            _, _, kopt, _, _ = _run(name, CASES[name][1], steps=3)
            assert next(iter(kopt.state.values()))["step"].dtype == kiln.float64
    finally:
        kiln.set_default_dtype(kiln.float32)
        torch.set_default_dtype(torch.float32)


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_adagrad_fused_like_torch_fused(dtype):
    # torch runs its fused CPU kernel; kiln runs the same formulas unfused
    _run("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, maximize=True), dtype=dtype,
         torch_kwargs=dict(fused=True))


@requires_torch
@pytest.mark.parametrize("name", TABLE)
def test_foreach_true_matches_torch_foreach(name):
    # torch's multi-tensor path computes the same updates (in another order): kiln accepts the flag
    _run(name, dict(CASES[name][1], foreach=True), dtype="float32", torch_kwargs={})


@requires_torch
@pytest.mark.parametrize("name", ["Adagrad", "NAdam", "Rprop", "ASGD"])
def test_param_groups(name):
    groups = [{"params": [0, 3], "lr": 0.003}, {"params": [1, 2], "weight_decay": 0.2}] if name != "Rprop" else \
        [{"params": [0, 3], "lr": 0.003}, {"params": [1, 2], "etas": (0.2, 1.1)}]
    _, _, kopt, topt, _ = _run(name, {}, groups=groups)
    for kg, tg in zip(kopt.param_groups, topt.param_groups):
        assert {k: v for k, v in kg.items() if k != "params"} == \
            {k: v for k, v in tg.items() if k != "params"} | {"foreach": None}


def _to_py(x):
    if hasattr(x, "tolist") and hasattr(x, "dtype"):
        return str(x.dtype).split(".")[1], x.tolist()
    if isinstance(x, dict):
        return {k: _to_py(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_py(v) for v in x)
    return x


@requires_torch
@pytest.mark.parametrize("name", TABLE)
def test_state_dict_layout_and_round_trip(name):
    kwargs = CASES[name][1]
    kp, tp, kopt, topt, rng = _run(name, kwargs, steps=4)
    ksd, tsd = _to_py(kopt.state_dict()), _to_py(topt.state_dict())
    assert ksd["param_groups"] == [dict(g, foreach=None) for g in tsd["param_groups"]]
    assert list(ksd["state"]) == list(tsd["state"])
    for pid in tsd["state"]:
        assert list(ksd["state"][pid]) == list(tsd["state"][pid])
        for key, (tdt, tval) in tsd["state"][pid].items():
            kdt, kval = ksd["state"][pid][key]
            assert kdt == tdt, key
            np.testing.assert_allclose(kval, tval, rtol=1e-10, atol=1e-12)

    # fresh optimizers loading a copy of the state continue in step (a state_dict holds the optimizer's
    # own tensors, in kiln as in torch: deepcopy it to keep one). Loading casts floating state to the
    # parameter's dtype except "step" (NAdam's mu_product and ASGD's eta, mu become float64) in both.
    kp2, tp2 = ([lib.tensor(p.tolist(), dtype=lib.float64).requires_grad_() for p in kp] for lib in (kiln, torch))
    kopt2 = getattr(kiln.optim, name)(kp2, **_options(kiln, dict(kwargs, lr=0.123)))
    topt2 = getattr(torch.optim, name)(tp2, foreach=False, **_options(torch, dict(kwargs, lr=0.123)))
    kopt2.load_state_dict(copy.deepcopy(kopt.state_dict()))
    topt2.load_state_dict(copy.deepcopy(topt.state_dict()))
    assert kopt2.param_groups[0]["lr"] == kopt.param_groups[0]["lr"]
    _assert_states_close(kopt2, topt2, kp2, tp2, *TOL["float64"])
    _step_both(kp2, tp2, kopt2, topt2, rng, 4, "float64")
    assert kopt.state[kp[0]]["step"].item() == 4 and kopt2.state[kp2[0]]["step"].item() == 8


@requires_torch
def test_adagrad_creates_state_in_constructor_like_torch():
    k, t = kiln.zeros(3, dtype=kiln.float64), torch.zeros(3, dtype=torch.float64)
    kopt = kiln.optim.Adagrad([k], initial_accumulator_value=0.25)
    topt = torch.optim.Adagrad([t], initial_accumulator_value=0.25)
    assert _to_py(kopt.state_dict()) == _to_py(topt.state_dict())
    kopt = kiln.optim.Adagrad([k], fused=True)
    topt = torch.optim.Adagrad([t], fused=True)
    assert _to_py(kopt.state_dict()) == _to_py(topt.state_dict())


BAD_ARGS = [
    ("Adadelta", dict(lr=-1)), ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(rho=-0.1)),
    ("Adadelta", dict(eps=-1)), ("Adadelta", dict(weight_decay=-1)),
    ("Adagrad", dict(lr=-0.1)), ("Adagrad", dict(lr_decay=-1)), ("Adagrad", dict(weight_decay=-1)),
    ("Adagrad", dict(initial_accumulator_value=-1)), ("Adagrad", dict(eps=-1)),
    ("Adagrad", dict(fused=True, differentiable=True)), ("Adagrad", dict(fused=True, foreach=True)),
    ("Adagrad", dict(capturable=True)),
    ("Adamax", dict(lr=-1)), ("Adamax", dict(eps=-1)), ("Adamax", dict(betas=(1.0, 0.9))),
    ("Adamax", dict(betas=(0.9, -0.1))), ("Adamax", dict(weight_decay=-1)), ("Adamax", dict(fused=True)),
    ("NAdam", dict(lr=-1)), ("NAdam", dict(eps=-1)), ("NAdam", dict(betas=(-0.1, 0.9))),
    ("NAdam", dict(betas=(0.9, 1.0))), ("NAdam", dict(weight_decay=-1)), ("NAdam", dict(momentum_decay=-1)),
    ("RAdam", dict(lr=-1)), ("RAdam", dict(eps=-1)), ("RAdam", dict(betas=(1.5, 0.9))),
    ("RAdam", dict(betas=(0.9, 1.5))), ("RAdam", dict(weight_decay=-1)), ("RAdam", dict(fused=False)),
    ("Rprop", dict(lr=-1)), ("Rprop", dict(etas=(1.5, 2.0))), ("Rprop", dict(etas=(0.5, 0.9))),
    ("Rprop", dict(etas=(0.0, 1.2))),
    ("ASGD", dict(lr=-1)), ("ASGD", dict(weight_decay=-1)),
    ("LBFGS", dict(lr=-1)), ("Adagrad", dict(lr=_T([0.1, 0.2]))), ("NAdam", dict(lr=_T(-1.0))),
    ("Adafactor", dict(lr=-1)), ("Adafactor", dict(lr=_T([0.1, 0.2]))), ("Adafactor", dict(beta2_decay=0.1)),
    ("Adafactor", dict(eps=(-1.0, 1e-3))), ("Adafactor", dict(eps=(None, -1e-3))), ("Adafactor", dict(d=0.5)),
    ("Adafactor", dict(weight_decay=-0.1)), ("Adafactor", dict(capturable=True)),
]


@requires_torch
@pytest.mark.parametrize("name,kwargs", BAD_ARGS, ids=[f"{n}-{c}" for n, c in BAD_ARGS])
def test_bad_arguments_like_torch(name, kwargs):
    with pytest.raises(Exception) as expected:
        getattr(torch.optim, name)([torch.zeros(2)], **_options(torch, kwargs))
    with pytest.raises(Exception) as got:
        getattr(kiln.optim, name)([kiln.zeros(2)], **_options(kiln, kwargs))
    assert type(got.value) is type(expected.value)
    assert str(got.value).replace("kiln.", "torch.") == str(expected.value)


def _step_error(lib, name, kwargs, dtype="float32"):
    p = lib.ones(3, dtype=getattr(lib, dtype)).requires_grad_(dtype.startswith("float"))
    p.grad = lib.ones(3, dtype=getattr(lib, dtype))
    opt = getattr(lib.optim, name)([p], **kwargs)
    with pytest.raises(Exception) as e:
        opt.step()
    return e.value


STEP_ERRORS = [(n, dict(capturable=True)) for n in NAMES if n != "Adagrad"] + \
    [(n, dict(capturable=True, foreach=True)) for n in NAMES if n != "Adagrad"] + \
    [(n, dict(differentiable=True)) for n in NAMES] + [(n, dict(differentiable=True, foreach=True)) for n in NAMES]


@requires_torch
@pytest.mark.parametrize("name,kwargs", STEP_ERRORS, ids=[f"{n}-{c}" for n, c in STEP_ERRORS])
def test_step_errors_like_torch(name, kwargs):
    """capturable needs an accelerator (CPU tensors fail the check); a differentiable step records the
    update, so it cannot update a leaf that requires grad in place; foreach=True cannot record it."""
    expected, got = _step_error(torch, name, kwargs), _step_error(kiln, name, kwargs)
    assert type(got) is type(expected) and str(got) == str(expected)


@requires_torch
def test_adagrad_fused_needs_floating_params_like_torch():
    expected, got = _step_error(torch, "Adagrad", dict(fused=True), "int64"), \
        _step_error(kiln, "Adagrad", dict(fused=True), "int64")
    assert type(got) is type(expected) and str(got).replace("kiln.", "torch.") == str(expected)


@requires_torch
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize("name", NAMES)
def test_differentiable_steps_like_torch(name):
    """differentiable=True: two steps of a non-leaf parameter are recorded by autograd; the gradient of a
    loss of the result reaches the leaf it came from and the leaf its gradients came from (or, for
    Rprop, whose second step overwrites a tensor the first one saved, backward fails in both)."""
    rng = np.random.default_rng(5)
    w_init, g_init = rng.standard_normal(4), rng.standard_normal((2, 4))
    kwargs = CASES[name][1]
    results = []
    for lib in (kiln, torch):
        w0 = lib.tensor(w_init, dtype=lib.float64).requires_grad_()
        g0 = lib.tensor(g_init, dtype=lib.float64).requires_grad_()
        w = w0 * 1.0
        opt = getattr(lib.optim, name)([w], differentiable=True, **_options(lib, kwargs))
        for i in range(2):
            w.grad = g0[i] * w0
            opt.step()
        assert w.grad_fn is not None
        try:
            (w * w).sum().backward()
        except RuntimeError as e:
            results.append(str(e).split(":")[0])
            continue
        results.append((_numpy(w), _numpy(w0.grad), _numpy(g0.grad)))
    if isinstance(results[1], str):
        assert results[0] == results[1]
        return
    for k, t in zip(*results):
        np.testing.assert_allclose(k, t, rtol=1e-9, atol=1e-12)


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_adafactor_factors_the_last_two_dimensions_like_torch(dtype):
    """A 3-D parameter keeps (2, 3, 1) row and (2, 1, 4) column statistics; a mixed-dtype group takes
    eps1 from its first parameter's dtype (PyTorch's loop), so a float32 first parameter sets it."""
    rng = np.random.default_rng(7)
    shapes = [(2, 3, 4), (4, 1), (1, 5), (3,)]
    inits = [rng.standard_normal(s) for s in shapes]
    kp, tp = _params(kiln, inits, dtype), _params(torch, inits, dtype)
    kopt, topt = kiln.optim.Adafactor(kp, lr=0.1), torch.optim.Adafactor(tp, lr=0.1, foreach=False)
    for _ in range(6):
        for k, t, s in zip(kp, tp, shapes):
            g = rng.standard_normal(s)
            k.grad, t.grad = kiln.tensor(g, dtype=k.dtype), torch.tensor(g, dtype=t.dtype)
        kopt.step()
        topt.step()
        _assert_states_close(kopt, topt, kp, tp, *TOL[dtype])
    assert tuple(kopt.state[kp[0]]["row_var"].shape) == (2, 3, 1)
    assert tuple(kopt.state[kp[0]]["col_var"].shape) == (2, 1, 4)


@requires_torch
def test_rprop_sign_flips_zero_the_step_like_torch():
    # gradients that alternate sign on some elements and keep it on others exercise every branch
    seq = [np.array([1.0, -1.0, 0.5, 0.0]), np.array([-1.0, -2.0, 0.5, 1.0]), np.array([1.0, -1.0, -0.5, 1.0])] * 3
    ps = []
    for lib in (kiln, torch):
        p = lib.zeros(4, dtype=lib.float64)
        opt = lib.optim.Rprop([p], lr=0.1, step_sizes=(0.01, 0.3))
        for g in seq:
            p.grad = lib.tensor(g, dtype=lib.float64)
            opt.step()
        ps.append((_numpy(p), _numpy(opt.state[p]["step_size"]), _numpy(opt.state[p]["prev"])))
    for k, t in zip(*ps):
        np.testing.assert_array_equal(k, t)


# --- LBFGS ---------------------------------------------------------------------------------------
def _least_squares(lib, dtype):
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((12, 4)), rng.standard_normal(12)
    w = lib.tensor(rng.standard_normal(4) * 0.1, dtype=getattr(lib, dtype)).requires_grad_()
    c = lib.tensor(0.0, dtype=getattr(lib, dtype)).requires_grad_()  # a 0-d parameter
    A, B = lib.tensor(a, dtype=getattr(lib, dtype)), lib.tensor(b, dtype=getattr(lib, dtype))
    return [w, c], lambda: ((A @ w + c - B) ** 2).mean()


def _rosenbrock(lib, dtype):
    x = lib.tensor([-1.5, 2.0], dtype=getattr(lib, dtype)).requires_grad_()
    y = lib.tensor([[0.5]], dtype=getattr(lib, dtype)).requires_grad_()
    unused = lib.zeros(3, dtype=getattr(lib, dtype)).requires_grad_()  # its grad stays None

    def f():
        return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2 + (1 - y.sum()) ** 2 + 10 * (y.sum() - x[0]) ** 2
    return [x, y, unused], f


LBFGS_CASES = [("least_squares", {}), ("least_squares", dict(line_search_fn="strong_wolfe")),
               ("least_squares", dict(lr=0.5, max_iter=3, history_size=2)),
               ("rosenbrock", dict(max_iter=5)), ("rosenbrock", dict(max_iter=5, line_search_fn="strong_wolfe")),
               ("rosenbrock", dict(lr=0.1, max_iter=4, max_eval=6, history_size=3, tolerance_change=1e-6,
                                   line_search_fn="strong_wolfe")),
               ("rosenbrock", dict(max_iter=50, tolerance_grad=1e-3, line_search_fn="strong_wolfe"))]


def _lbfgs_run(lib, problem, kwargs, dtype, steps):
    params, f = {"least_squares": _least_squares, "rosenbrock": _rosenbrock}[problem](lib, dtype)
    opt = lib.optim.LBFGS(params, **kwargs)
    calls = []

    def closure():
        opt.zero_grad()
        loss = f()
        loss.backward()
        calls.append(float(loss.detach()))
        return loss

    trajectory = []
    for _ in range(steps):
        loss = opt.step(closure)
        trajectory.append((float(loss.detach()), [_numpy(p).copy() for p in params]))
    return trajectory, calls, opt


# float32 runs of the ill-conditioned Rosenbrock problem with the line search are left out: its
# comparisons branch on differences at rounding level (kiln's dot products sum in another order)
LBFGS_RUNS = [(p, c, "float64") for p, c in LBFGS_CASES] + \
    [(p, c, "float32") for p, c in LBFGS_CASES if p == "least_squares" or "line_search_fn" not in c]


@requires_torch
@pytest.mark.parametrize("problem,kwargs,dtype", LBFGS_RUNS, ids=[f"{p}-{c}-{d}" for p, c, d in LBFGS_RUNS])
def test_lbfgs_trajectory_matches_torch(problem, kwargs, dtype):
    steps = 4
    ktraj, kcalls, kopt = _lbfgs_run(kiln, problem, kwargs, dtype, steps)
    ttraj, tcalls, topt = _lbfgs_run(torch, problem, kwargs, dtype, steps)
    rtol, atol = (1e-8, 1e-10) if dtype == "float64" else (2e-3, 1e-4)
    if dtype == "float64":
        assert len(kcalls) == len(tcalls)  # the same closure evaluations
    for (kl, kps), (tl, tps) in zip(ktraj, ttraj):
        assert kl == pytest.approx(tl, rel=rtol, abs=atol)
        for k, t in zip(kps, tps):
            np.testing.assert_allclose(k, t, rtol=rtol, atol=atol)
    if dtype == "float64":
        (kp0, ks), (tp0, ts) = next(iter(kopt.state.items())), next(iter(topt.state.items()))
        assert list(ks) == list(ts) and len(kopt.state) == len(topt.state) == 1
        for key in ("func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad",
                    "prev_loss"):
            _assert_close(ks[key], ts[key], 1e-6, 1e-8, key)


def _lbfgs_closure(opt, f):
    def closure():
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss
    return closure


@requires_torch
def test_lbfgs_state_dict_round_trip():
    kwargs = dict(max_iter=3, history_size=4, line_search_fn="strong_wolfe")
    params, f = _least_squares(kiln, "float64")
    opt = kiln.optim.LBFGS(params, **kwargs)
    tparams, tf = _least_squares(torch, "float64")
    topt = torch.optim.LBFGS(tparams, **kwargs)
    for _ in range(2):
        opt.step(_lbfgs_closure(opt, f))
        topt.step(_lbfgs_closure(topt, tf))
    ksd, tsd = opt.state_dict(), topt.state_dict()
    assert list(ksd["state"]) == list(tsd["state"]) == [0]
    assert list(ksd["state"][0]) == list(tsd["state"][0])
    assert _to_py(ksd["param_groups"]) == _to_py(tsd["param_groups"])

    params2, f2 = _least_squares(kiln, "float64")
    with kiln.no_grad():
        for p, q in zip(params2, params):
            p.copy_(q)
    opt2 = kiln.optim.LBFGS(params2, lr=0.5)
    opt2.load_state_dict(copy.deepcopy(ksd))
    assert opt2.param_groups[0]["lr"] == 1 and opt2.param_groups[0]["params"] == params2
    for _ in range(3):  # the copy continues exactly as the original
        opt.step(_lbfgs_closure(opt, f))
        opt2.step(_lbfgs_closure(opt2, f2))
        topt.step(_lbfgs_closure(topt, tf))
        for p, q, t in zip(params2, params, tparams):
            np.testing.assert_array_equal(_numpy(p), _numpy(q))
            np.testing.assert_allclose(_numpy(p), _numpy(t), rtol=1e-8, atol=1e-10)


@requires_torch
def test_lbfgs_errors_like_torch():
    def errors(lib):
        out = []
        p = lib.ones(2).requires_grad_()
        for make in (lambda: lib.optim.LBFGS([{"params": [p]}, {"params": [lib.ones(1)]}]),
                     lambda: lib.optim.LBFGS([p]).step(),
                     lambda: lib.optim.LBFGS([p], line_search_fn="wolfe").step(lambda: (p * p).sum().backward()
                                                                               or (p * p).sum())):
            with pytest.raises(Exception) as e:
                make()
            out.append((type(e.value), str(e.value)))
        return out

    assert errors(kiln) == errors(torch)


# --- schedulers and compiled training --------------------------------------------------------------
@requires_torch
@pytest.mark.parametrize("name", TABLE + ["LBFGS"])
def test_schedulers_drive_the_new_optimizers(name):
    seqs = []
    for lib in (kiln, torch):
        p = lib.zeros(2)
        opt = getattr(lib.optim, name)([p], lr=0.05)
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=12, cycle_momentum=False) \
            if name == "Rprop" else lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
        seq = []
        p.grad = lib.zeros(2)
        for _ in range(10):
            opt.step((lambda: 0.0) if name == "LBFGS" else None)  # LBFGS: a zero gradient returns at once
            sched.step()
            seq.append(opt.param_groups[0]["lr"])
        seqs.append(seq)
    assert seqs[0] == seqs[1]


@pytest.mark.parametrize("name,kwargs", [("Adagrad", dict(lr=0.05, lr_decay=0.01, weight_decay=1e-3)),
                                         ("NAdam", dict(lr=0.01, weight_decay=1e-3, decoupled_weight_decay=True)),
                                         ("Adafactor", dict(lr=0.05, weight_decay=1e-3))])
def test_compiled_training_equals_eager(name, kwargs):
    """kiln.compile's forward and backward, the optimizer stepping eagerly: the same weights as eager."""
    from training_util import assert_training_matches_eager

    assert_training_matches_eager(
        lambda: kiln.nn.Sequential(kiln.nn.Linear(64, 32), kiln.nn.Tanh(), kiln.nn.Linear(32, 10)),
        lambda m: kiln.compile(m), lambda params: getattr(kiln.optim, name)(params, **kwargs), steps=4)
    kiln._dynamo.reset()
