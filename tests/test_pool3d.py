"""3-D pooling, power-average pooling, unpooling and the 3-D/circular padding layers against PyTorch 2.13
(issue 17): F.max_pool3d(_with_indices), F.avg_pool3d, F.adaptive_avg_pool3d, F.adaptive_max_pool3d
(_with_indices), F.lp_pool1d/2d/3d, F.max_unpool1d/2d/3d and their modules, CircularPad1d/2d/3d,
ReflectionPad3d, ReplicationPad3d, ZeroPad3d.

Each functional runs on the same data in both libraries (float32 and float64, contiguous and strided):
values, indices, dtypes and shapes equal, float64 gradients equal. Integer and half inputs follow
torch's dtype support. Modules print as torch's and compute the same. Bad input raises torch's class
with torch's message. One program using every functional is compiled with inductor and aot_eager and
must match eager in values and gradients.
"""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as KF
from conftest import assert_same, requires_torch, torch

pytestmark = requires_torch
if torch is None:  # the case tables below are built with torch
    pytest.skip("PyTorch is the oracle and is only installed for 3.11", allow_module_level=True)

if torch is not None:
    import torch.nn.functional as TF

RNG = np.random.default_rng(3)


def arr(*shape):
    return RNG.uniform(-2.0, 2.0, size=shape)


def lib_of(F):
    return kiln if F is KF else torch


def make(lib, a, dtype, strided, requires_grad=False):
    """numpy array -> tensor of lib; strided: a view with stride 2 in the last dimension."""
    dt = getattr(lib, dtype)
    t = lib.tensor(np.repeat(a, 2, axis=-1), dtype=dt)[..., ::2] if strided else lib.tensor(a, dtype=dt)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _unpool_case(dims, kernel, stride, padding, shape, output_size=None):
    """A max_unpool call fed the values and indices of torch's max pooling of one fixed input (the
    indices are data, the same tensor for both libraries)."""
    pool = {1: torch.nn.functional.max_pool1d, 2: torch.nn.functional.max_pool2d,
            3: torch.nn.functional.max_pool3d}[dims]
    values, indices = pool(torch.tensor(arr(*shape)), kernel, stride, padding, return_indices=True)

    def call(F, x):
        idx = indices if F is TF else kiln.tensor(indices.numpy())
        return getattr(F, f"max_unpool{dims}d")(x, idx, kernel, stride, padding, output_size)

    return call, [values.numpy()]


# (id, fn(F, *inputs), input arrays); every input is differentiable
FUNCS = [
    ("max_pool3d", lambda F, x: F.max_pool3d(x, 2), [arr(2, 3, 4, 5, 6)]),
    ("max_pool3d-indices", lambda F, x: F.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), return_indices=True),
     [arr(2, 2, 5, 6, 5)]),
    ("max_pool3d-dilation-ceil", lambda F, x: F.max_pool3d(x, 3, 2, 1, (2, 1, 2), ceil_mode=True, return_indices=True),
     [arr(1, 2, 7, 6, 8)]),
    ("max_pool3d-unbatched", lambda F, x: F.max_pool3d_with_indices(x, (1, 2, 3), padding=(0, 1, 1)), [arr(3, 4, 5, 6)]),
    ("max_pool3d-ties", lambda F, x: F.max_pool3d(x, 3, 1, 1, return_indices=True),
     [np.round(arr(1, 2, 4, 4, 4))]),
    ("avg_pool3d", lambda F, x: F.avg_pool3d(x, 2), [arr(2, 3, 4, 5, 6)]),
    ("avg_pool3d-pad-ceil", lambda F, x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True), [arr(2, 2, 6, 7, 8)]),
    ("avg_pool3d-exclude-pad", lambda F, x: F.avg_pool3d(x, (3, 2, 3), (2, 1, 2), (1, 1, 1), True, False),
     [arr(1, 2, 6, 5, 7)]),
    ("avg_pool3d-divisor", lambda F, x: F.avg_pool3d(x, 2, 1, 1, divisor_override=3), [arr(2, 4, 3, 5)]),
    ("adaptive_avg_pool3d", lambda F, x: F.adaptive_avg_pool3d(x, (3, 2, 4)), [arr(2, 3, 7, 5, 6)]),
    ("adaptive_avg_pool3d-none", lambda F, x: F.adaptive_avg_pool3d(x, (None, 3, 5)), [arr(3, 4, 7, 9)]),
    ("adaptive_avg_pool3d-one", lambda F, x: F.adaptive_avg_pool3d(x, 1), [arr(2, 3, 4, 5, 6)]),
    ("adaptive_avg_pool3d-grow", lambda F, x: F.adaptive_avg_pool3d(x, 5), [arr(1, 2, 3, 4, 3)]),
    ("adaptive_max_pool3d", lambda F, x: F.adaptive_max_pool3d(x, (3, 2, 4), return_indices=True),
     [arr(2, 3, 7, 5, 6)]),
    ("adaptive_max_pool3d-unbatched", lambda F, x: F.adaptive_max_pool3d_with_indices(x, (2, None, 5)),
     [arr(3, 5, 4, 7)]),
    ("adaptive_max_pool3d-ties", lambda F, x: F.adaptive_max_pool3d(x, 3, True), [np.round(arr(1, 2, 5, 5, 5))]),
    ("lp_pool1d", lambda F, x: F.lp_pool1d(x, 2.0, 3), [arr(2, 3, 10)]),
    ("lp_pool1d-p3-stride-ceil", lambda F, x: F.lp_pool1d(x, 3, 3, 2, True), [arr(3, 10)]),
    ("lp_pool1d-inf", lambda F, x: F.lp_pool1d(x, float("inf"), 2), [arr(2, 3, 8)]),
    ("lp_pool2d", lambda F, x: F.lp_pool2d(x, 2, (2, 3)), [arr(2, 3, 6, 7)]),
    ("lp_pool2d-p1.5-stride", lambda F, x: F.lp_pool2d(x.abs() + 0.1, 1.5, 3, (1, 2), True), [arr(1, 2, 7, 8)]),
    ("lp_pool2d-minus-inf", lambda F, x: F.lp_pool2d(x, -float("inf"), 2), [arr(2, 4, 6)]),
    ("lp_pool3d", lambda F, x: F.lp_pool3d(x, 2, 2), [arr(2, 2, 4, 5, 6)]),
    ("lp_pool3d-p4-stride", lambda F, x: F.lp_pool3d(x, 4, (2, 3, 2), 1), [arr(2, 4, 5, 4)]),
    ("max_unpool1d", *_unpool_case(1, 2, None, 0, (2, 3, 8))),
    ("max_unpool1d-size", *_unpool_case(1, 3, 2, 1, (3, 9), output_size=[10])),
    ("max_unpool2d", *_unpool_case(2, 2, None, 0, (2, 3, 4, 6))),
    ("max_unpool2d-size", *_unpool_case(2, (3, 2), (2, 1), (1, 0), (1, 2, 7, 5), output_size=(1, 2, 8, 5))),
    ("max_unpool3d", *_unpool_case(3, 2, None, 0, (2, 2, 4, 4, 6))),
    ("max_unpool3d-unbatched", *_unpool_case(3, (2, 3, 2), (2, 2, 1), (1, 1, 0), (2, 5, 6, 4), output_size=(5, 6, 4))),
]


def _differentiable(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("strided", [False, True], ids=["contig", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, arrays", FUNCS, ids=[f[0] for f in FUNCS])
def test_functional_matches_torch(name, fn, arrays, dtype, strided):
    grad = dtype == "float64"
    k_in = [make(kiln, a, dtype, strided, grad) for a in arrays]
    t_in = [make(torch, a, dtype, strided, grad) for a in arrays]
    got, want = fn(KF, *k_in), fn(TF, *t_in)
    assert_same(got, tuple(w.detach() for w in want) if isinstance(want, tuple) else want.detach())
    if grad:
        got, want = _differentiable(got), _differentiable(want)
        g = np.random.default_rng(1).uniform(-1, 1, size=tuple(want.shape))
        k_grads = kiln.autograd.grad(got, k_in, kiln.tensor(g))
        t_grads = torch.autograd.grad(want, t_in, torch.tensor(g))
        for kg, tg in zip(k_grads, t_grads):
            assert_same(kg, tg, 1e-6, 1e-9)


DTYPE_CASES = [
    ("max_pool3d-int64", lambda F, x: F.max_pool3d(x, 2, 1, 1, return_indices=True), "int64"),
    ("max_pool3d-int32", lambda F, x: F.max_pool3d(x, (2, 1, 3)), "int32"),
    ("max_pool3d-uint8", lambda F, x: F.max_pool3d(x.abs(), 2, ceil_mode=True), "uint8"),
    ("max_pool3d-float16", lambda F, x: F.max_pool3d(x, 2, return_indices=True), "float16"),
    ("avg_pool3d-int64", lambda F, x: F.avg_pool3d(x, 3, 2, 1), "int64"),
    ("avg_pool3d-int64-exclude-pad", lambda F, x: F.avg_pool3d(x, 3, 2, 1, True, False), "int64"),
    ("avg_pool3d-int64-divisor", lambda F, x: F.avg_pool3d(x, 2, divisor_override=3), "int64"),
    ("adaptive_avg_pool3d-float16", lambda F, x: F.adaptive_avg_pool3d(x, (2, 3, 2)), "float16"),
    ("adaptive_avg_pool3d-bfloat16", lambda F, x: F.adaptive_avg_pool3d(x, 3), "bfloat16"),
    ("adaptive_max_pool3d-bfloat16", lambda F, x: F.adaptive_max_pool3d(x, (2, 3, 2), True), "bfloat16"),
    # distinct indices per plane: where two elements share one, which write wins is unspecified
    ("max_unpool2d-float16", lambda F, x: F.max_unpool2d(x[0], lib_of(F).arange(42).reshape(6, 7)
                                                         .expand(x[0].shape) * 3, 2), "float16"),
    ("empty-batch", lambda F, x: F.max_pool3d(x[:0], 2, return_indices=True), "float32"),
    ("empty-output", lambda F, x: F.adaptive_max_pool3d(x, (0, 2, 2), True), "float32"),
]


@pytest.mark.parametrize("name, fn, dtype", DTYPE_CASES, ids=[c[0] for c in DTYPE_CASES])
def test_dtypes_like_torch(name, fn, dtype):
    data = np.round(arr(2, 3, 5, 6, 7) * 20)
    assert_same(fn(KF, kiln.tensor(data).to(getattr(kiln, dtype))),
                fn(TF, torch.tensor(data).to(getattr(torch, dtype))))


def _bad_unpool_indices(F, L):
    indices = L.tensor([[[[0, 1], [2, 100]]]])
    return F.max_unpool2d(L.ones(1, 1, 2, 2), indices, 2)


ERRORS = [
    ("max_pool3d-rank", lambda F, L: F.max_pool3d(L.ones(3, 4, 5), 2)),
    ("max_pool3d-kernel-len", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), (2, 2))),
    ("max_pool3d-stride-len", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, (1, 1))),
    ("max_pool3d-padding-len", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, padding=(1, 1))),
    ("max_pool3d-dilation-len", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, dilation=(1, 1))),
    ("max_pool3d-pad-big", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, padding=2)),
    ("max_pool3d-pad-negative", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, padding=-1)),
    ("max_pool3d-dilation-0", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, dilation=0)),
    ("max_pool3d-kernel-0", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 0, 1)),
    ("max_pool3d-stride-0", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4), 2, 0)),
    ("max_pool3d-too-small", lambda F, L: F.max_pool3d(L.ones(2, 3, 4, 5, 6), 5)),
    ("max_pool3d-empty", lambda F, L: F.max_pool3d(L.ones(2, 0, 4, 5, 6), 2)),
    ("max_pool3d-bool", lambda F, L: F.max_pool3d(L.ones(1, 1, 4, 4, 4, dtype=L.bool), 2)),
    ("avg_pool3d-rank", lambda F, L: F.avg_pool3d(L.ones(3, 4, 5), 2)),
    ("avg_pool3d-kernel-len", lambda F, L: F.avg_pool3d(L.ones(1, 1, 4, 4, 4), (2, 2))),
    ("avg_pool3d-padding-len", lambda F, L: F.avg_pool3d(L.ones(1, 1, 4, 4, 4), 2, padding=(1, 1))),
    ("avg_pool3d-pad-big", lambda F, L: F.avg_pool3d(L.ones(1, 1, 4, 4, 4), 2, padding=2)),
    ("avg_pool3d-smaller-than-kernel", lambda F, L: F.avg_pool3d(L.ones(2, 3, 4, 5, 6), 5)),
    ("avg_pool3d-divisor-0", lambda F, L: F.avg_pool3d(L.ones(1, 1, 4, 4, 4), 2, divisor_override=0)),
    ("avg_pool3d-int32", lambda F, L: F.avg_pool3d(L.ones(1, 1, 4, 4, 4, dtype=L.int32), 2)),
    ("avg_pool3d-float16", lambda F, L: F.avg_pool3d(L.ones(1, 1, 4, 4, 4, dtype=L.float16), 2)),
    ("adaptive_avg_pool3d-rank", lambda F, L: F.adaptive_avg_pool3d(L.ones(3, 4, 5), 2)),
    ("adaptive_avg_pool3d-negative", lambda F, L: F.adaptive_avg_pool3d(L.ones(1, 1, 4, 4, 4), -1)),
    ("adaptive_avg_pool3d-len", lambda F, L: F.adaptive_avg_pool3d(L.ones(1, 1, 4, 4, 4), (2, 2))),
    ("adaptive_avg_pool3d-empty", lambda F, L: F.adaptive_avg_pool3d(L.ones(2, 0, 4, 5, 6), 2)),
    ("adaptive_avg_pool3d-int", lambda F, L: F.adaptive_avg_pool3d(L.ones(1, 1, 4, 4, 4, dtype=L.int64), 2)),
    ("adaptive_max_pool3d-rank", lambda F, L: F.adaptive_max_pool3d(L.ones(3, 4, 5), 2)),
    ("adaptive_max_pool3d-negative", lambda F, L: F.adaptive_max_pool3d(L.ones(2, 3, 4, 5, 6), -1)),
    ("adaptive_max_pool3d-len", lambda F, L: F.adaptive_max_pool3d(L.ones(1, 1, 4, 4, 4), (2, 2))),
    ("adaptive_max_pool3d-empty", lambda F, L: F.adaptive_max_pool3d(L.ones(2, 0, 4, 5, 6), 2)),
    ("adaptive_max_pool3d-int", lambda F, L: F.adaptive_max_pool3d(L.ones(1, 1, 4, 4, 4, dtype=L.int64), 2)),
    ("lp_pool3d-rank", lambda F, L: F.lp_pool3d(L.ones(3, 4, 5), 2, 2)),
    ("lp_pool2d-kernel-len", lambda F, L: F.lp_pool2d(L.ones(1, 4, 5), 2, (2, 2, 2))),
    ("max_unpool2d-bad-index", _bad_unpool_indices),
    ("max_unpool1d-negative-index", lambda F, L: F.max_unpool1d(L.ones(1, 1, 2), L.tensor([[[0, -1]]]), 2)),
    ("max_unpool3d-bad-index", lambda F, L: F.max_unpool3d(L.ones(1, 1, 2, 2, 2), L.full((1, 1, 2, 2, 2), 100), 2)),
    ("max_unpool2d-shapes", lambda F, L: F.max_unpool2d(L.ones(1, 1, 2, 2), L.zeros(1, 1, 2, 3, dtype=L.int64), 2)),
    ("max_unpool2d-index-dtype", lambda F, L: F.max_unpool2d(L.ones(1, 1, 2, 2), L.zeros(1, 1, 2, 2), 2)),
    ("max_unpool2d-output-size", lambda F, L: F.max_unpool2d(L.ones(1, 1, 2, 2), L.zeros(1, 1, 2, 2, dtype=L.int64),
                                                             2, output_size=(9, 9))),
    ("max_unpool2d-output-size-len", lambda F, L: F.max_unpool2d(L.ones(1, 1, 2, 2),
                                                                 L.zeros(1, 1, 2, 2, dtype=L.int64), 2,
                                                                 output_size=(4, 4, 4))),
    ("max_unpool2d-int64", lambda F, L: F.max_unpool2d(L.ones(1, 1, 2, 2, dtype=L.int64),
                                                       L.zeros(1, 1, 2, 2, dtype=L.int64), 2)),
    ("max_unpool2d-rank", lambda F, L: F.max_unpool2d(L.ones(2, 2), L.zeros(2, 2, dtype=L.int64), 2)),
    ("max_unpool3d-rank", lambda F, L: F.max_unpool3d(L.ones(2, 2, 2), L.zeros(2, 2, 2, dtype=L.int64), 2)),
    ("max_unpool3d-stride-0", lambda F, L: F.max_unpool3d(L.ones(1, 1, 2, 2, 2), L.zeros(1, 1, 2, 2, 2, dtype=L.int64),
                                                          2, (0, 1, 1), output_size=(2, 2, 2))),
    ("max_unpool3d-empty", lambda F, L: F.max_unpool3d(L.ones(1, 0, 2, 2, 2), L.zeros(1, 0, 2, 2, 2, dtype=L.int64),
                                                       2)),
    ("circular-pad-rank", lambda F, L: L.nn.CircularPad2d(1)(L.ones(2, 3))),
    ("circular-pad-too-big", lambda F, L: L.nn.CircularPad1d(4)(L.ones(1, 2, 3))),
    ("reflection-pad3d-too-big", lambda F, L: L.nn.ReflectionPad3d(3)(L.ones(1, 1, 3, 3, 3))),
]


@pytest.mark.parametrize("desc, call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_torch(desc, call):
    with pytest.raises(Exception) as want:
        call(TF, torch)
    with pytest.raises(Exception) as got:
        call(KF, kiln)
    want_cls = next(c for c in type(want.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(got.value, want_cls), f"{desc}: kiln {type(got.value)} {got.value}; torch {want.value!r}"
    if not desc.startswith(("circular-pad-too-big", "reflection-pad3d")):  # F.pad's messages are kiln's own
        assert str(got.value) == str(want.value)


# --- modules: constructor for both libraries, inputs -----------------------------------------------
MODULES = [
    (lambda nn: nn.MaxPool3d(2), [arr(2, 3, 4, 4, 6)]),
    (lambda nn: nn.MaxPool3d((3, 2, 2), stride=(2, 1, 2), padding=1, dilation=(1, 2, 1), ceil_mode=True),
     [arr(1, 2, 7, 6, 5)]),
    (lambda nn: nn.MaxPool3d(2, return_indices=True), [arr(2, 4, 4, 4)]),
    (lambda nn: nn.AvgPool3d(2), [arr(2, 3, 4, 4, 6)]),
    (lambda nn: nn.AvgPool3d((3, 1, 2), 1, (1, 0, 1), True, False), [arr(1, 2, 5, 4, 6)]),
    (lambda nn: nn.AvgPool3d(2, divisor_override=5), [arr(3, 4, 4, 4)]),
    (lambda nn: nn.AdaptiveAvgPool3d((2, 3, None)), [arr(2, 3, 5, 6, 4)]),
    (lambda nn: nn.AdaptiveAvgPool3d(1), [arr(2, 3, 5, 6, 4)]),
    (lambda nn: nn.AdaptiveMaxPool3d(3), [arr(2, 3, 5, 6, 4)]),
    (lambda nn: nn.AdaptiveMaxPool3d((2, 2, 1), return_indices=True), [arr(3, 5, 6, 4)]),
    (lambda nn: nn.LPPool1d(2, 3), [arr(2, 3, 9)]),
    (lambda nn: nn.LPPool1d(3, 2, stride=1, ceil_mode=True), [arr(3, 8)]),
    (lambda nn: nn.LPPool2d(2, (2, 3)), [arr(2, 3, 6, 6)]),
    (lambda nn: nn.LPPool2d(float("inf"), 2, 1), [arr(2, 5, 6)]),
    (lambda nn: nn.LPPool3d(1.5, 2), [arr(1, 2, 4, 4, 4).__abs__()]),
    (lambda nn: nn.ZeroPad3d(1), [arr(1, 2, 3, 2, 3)]),
    (lambda nn: nn.ZeroPad3d((1, 0, 2, 0, 0, 1)), [arr(2, 3, 2, 3)]),
    (lambda nn: nn.ReflectionPad3d(1), [arr(1, 2, 3, 3, 4)]),
    (lambda nn: nn.ReflectionPad3d((2, 0, 1, 2, 0, 1)), [arr(2, 3, 4, 3)]),
    (lambda nn: nn.ReplicationPad3d(2), [arr(1, 2, 3, 2, 3)]),
    (lambda nn: nn.ReplicationPad3d((1, 0, 2, 1, 0, 3)), [arr(2, 2, 3, 2)]),
    (lambda nn: nn.CircularPad1d(2), [arr(2, 3, 4)]),
    (lambda nn: nn.CircularPad1d((3, 1)), [arr(3, 5)]),
    (lambda nn: nn.CircularPad2d(1), [arr(1, 2, 3, 4)]),
    (lambda nn: nn.CircularPad2d((2, 0, 1, 2)), [arr(2, 3, 4)]),
    (lambda nn: nn.CircularPad3d(1), [arr(1, 2, 3, 3, 4)]),
    (lambda nn: nn.CircularPad3d((1, 0, 2, 1, 0, 2)), [arr(2, 3, 4, 3)]),
]


@pytest.mark.parametrize("ctor, arrays", MODULES, ids=range(len(MODULES)))
def test_module_matches_torch(ctor, arrays):
    tm, km = ctor(torch.nn), ctor(kiln.nn)
    assert repr(km) == repr(tm)
    assert list(km.state_dict()) == list(tm.state_dict()) == []
    got = km(*[kiln.tensor(a, dtype=kiln.float32) for a in arrays])
    want = tm(*[torch.tensor(a, dtype=torch.float32) for a in arrays])
    assert_same(got, tuple(w.detach() for w in want) if isinstance(want, tuple) else want.detach())


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_max_unpool_module_inverts_max_pool_module(dims):
    shape = (2, 3) + (6,) * dims
    x = arr(*shape)
    results = []
    for lib in (kiln, torch):
        pool = getattr(lib.nn, f"MaxPool{dims}d")(2, stride=2, return_indices=True)
        unpool = getattr(lib.nn, f"MaxUnpool{dims}d")(2, stride=2)
        values, indices = pool(lib.tensor(x))
        results.append((unpool(values, indices), unpool(values, indices, output_size=[7] * dims)))
        assert repr(unpool) == repr(getattr(torch.nn, f"MaxUnpool{dims}d")(2, stride=2))
    assert_same(results[0], results[1])


# --- one compiled program over every functional -----------------------------------------------------
def _program(F, x, v):
    """x: (2, 3, 6, 7, 8); v: (2, 3, 9, 10)."""
    lib = lib_of(F)
    pooled, indices = F.max_pool3d(x, 3, 2, 1, return_indices=True)
    amax, _ = F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True)
    parts = [
        (pooled * pooled).sum(), F.max_pool3d(x, (2, 3, 2), ceil_mode=True).sum(),
        F.avg_pool3d(x, 3, 2, 1, count_include_pad=False).pow(2).sum(), F.avg_pool3d(x, 2, divisor_override=3).sum(),
        F.adaptive_avg_pool3d(x, (3, 2, 5)).pow(2).sum(), (amax * amax).sum(),
        F.lp_pool1d(v.flatten(2), 2, 3).sum(), F.lp_pool2d(v, 3, 2).sum(), F.lp_pool3d(x, 2, 2).sum(),
        (F.max_unpool3d(pooled, indices, 3, 2, 1, output_size=x.shape[2:]) * x).sum(),
        F.pad(x, (1, 1, 0, 2, 1, 0), mode="circular").pow(2).sum(), F.pad(x, (1, 2, 2, 1, 1, 1), mode="reflect").sum(),
        F.pad(x, (0, 2, 1, 0, 2, 1), mode="replicate").pow(2).sum(),
    ]
    return lib.stack(parts)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_compiled_program_matches_eager(backend):
    kiln._dynamo.reset()
    arrays = [arr(2, 3, 6, 7, 8), arr(2, 3, 9, 10)]
    ins = [kiln.tensor(a, dtype=kiln.float32, requires_grad=True) for a in arrays]
    eager = _program(KF, *ins)
    compiled = kiln.compile(lambda *a: _program(KF, *a), backend=backend)(*ins)
    assert_same(compiled, eager.detach(), 1e-4, 1e-4)
    t_ins = [torch.tensor(a, dtype=torch.float32, requires_grad=True) for a in arrays]
    assert_same(eager, _program(TF, *t_ins).detach(), 1e-4, 1e-4)
    g = kiln.tensor(arr(eager.shape[0]), dtype=kiln.float32)
    for ge, gc in zip(kiln.autograd.grad(eager, ins, g), kiln.autograd.grad(compiled, ins, g)):
        assert_same(gc, ge, 1e-4, 1e-4)
    kiln._dynamo.reset()
