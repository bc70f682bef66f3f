"""Writes that overlap themselves or what they read, against PyTorch 2.13.

PyTorch refuses, before writing anything, an in-place or out= op whose written tensor repeats an
element (`x.expand(3, 4).add_(1)`) or partially overlaps a tensor the op reads
(`x[1:].add_(x[:-1])`, which would read values it has already written); gathers and scatters
refuse full overlap too (`x.index_add_(0, i, x)`). A few ops let such writes through (fill_,
zero_, masked_fill_, index_put_, tril_, triu_, threshold_). kiln used to compute whatever its
loop order gave: a cumulative sum for `x[1:].add_(x[:-1])`. Each case runs in both libraries:
both raise the same exception class with the same message, or both return the same values.
"""

import pytest

import kiln
from conftest import requires_torch, torch

pytestmark = requires_torch


def _expanded(lib, dtype="float32"):
    return lib.zeros(1, 4, dtype=getattr(lib, dtype)).expand(3, 4)


def _ones(lib):
    return lib.ones(3, 4)


# (name, call(lib, x)) with x an expanded (3, 4) float32 tensor of zeros
EXPANDED = [
    ("add_", lambda lib, x: x.add_(1)),
    ("mul_ tensor", lambda lib, x: x.mul_(_ones(lib))),
    ("sub_ of itself", lambda lib, x: x.sub_(x)),
    ("copy_", lambda lib, x: x.copy_(_ones(lib))),
    ("copy_ of itself", lambda lib, x: x.copy_(x)),
    ("relu_", lambda lib, x: x.relu_()),
    ("exp_", lambda lib, x: x.exp_()),
    ("clamp_", lambda lib, x: x.clamp_(0, 1)),
    ("addcmul_", lambda lib, x: x.addcmul_(_ones(lib), _ones(lib))),
    ("lerp_", lambda lib, x: x.lerp_(_ones(lib), 0.5)),
    ("cumsum_", lambda lib, x: x.cumsum_(0)),
    ("uniform_", lambda lib, x: x.uniform_()),
    ("scatter_", lambda lib, x: x.scatter_(0, lib.tensor([[0]]), 1.0)),
    ("index_add_", lambda lib, x: x.index_add_(0, lib.tensor([0]), lib.ones(1, 4))),
    ("column add_", lambda lib, x: x[:, 0].add_(1)),
    ("row add_ (no repeat)", lambda lib, x: x[0].add_(1)),
    ("F.leaky_relu_", lambda lib, x: lib.nn.functional.leaky_relu_(x)),
    ("F.hardtanh_", lambda lib, x: lib.nn.functional.hardtanh_(x)),
    ("F.elu_", lambda lib, x: lib.nn.functional.elu_(x)),
    ("setitem of a column", lambda lib, x: x.__setitem__((slice(None), 0), lib.ones(3))),
    # PyTorch lets these through
    ("fill_", lambda lib, x: x.fill_(1)),
    ("zero_", lambda lib, x: x.zero_()),
    ("setitem of a number", lambda lib, x: x.__setitem__(0, 1.0)),
    ("masked_fill_", lambda lib, x: x.masked_fill_(lib.ones(3, 4, dtype=lib.bool), 1)),
    ("index_put_", lambda lib, x: x.index_put_((lib.tensor([0]),), lib.ones(4))),
    ("tril_", lambda lib, x: x.tril_()),
    ("F.threshold_", lambda lib, x: lib.nn.functional.threshold_(x, 0.5, 2.0)),
    ("t_ (a view)", lambda lib, x: x.t_()),
    ("empty expansion", lambda lib, x: lib.zeros(0, 1).expand(0, 3).add_(1)),
]

# (name, call(lib, x)) with x = arange(6.)
PARTIAL = [
    ("add_ of a shifted view", lambda lib, x: x[1:].add_(x[:-1])),
    ("add_ of itself", lambda lib, x: x.add_(x)),
    ("add_ of an interleaved view", lambda lib, x: x[::2].add_(x[1::2])),
    ("copy_ of a shifted view", lambda lib, x: x[1:].copy_(x[:-1])),
    ("mul_ of a transposed view", lambda lib, x: x.view(2, 3).mul_(x.view(3, 2).t())),
    ("addcmul_ of a shifted view", lambda lib, x: x[1:].addcmul_(x[:-1], x[:-1])),
    ("clamp_ by a shifted view", lambda lib, x: x[1:].clamp_(x[:-1], None)),
    ("lerp_ toward a shifted view", lambda lib, x: x[1:].lerp_(x[:-1], 0.5)),
    ("add out= a shifted view", lambda lib, x: lib.add(x[:3], 1, out=x[1:4])),
    ("add out= itself", lambda lib, x: lib.add(x, 1, out=x)),
    ("index_add_ of itself", lambda lib, x: x.view(2, 3).index_add_(0, lib.tensor([1, 0]), x.view(2, 3))),
    ("index_add_ of a shifted view", lambda lib, x: x[:4].view(2, 2).index_add_(0, lib.tensor([1, 0]),
                                                                                 x[2:].view(2, 2))),
    ("index_add_ of a strided view", lambda lib, x: x.view(2, 3)[:, :2].index_add_(1, lib.tensor([1, 1]),
                                                                                    x.view(2, 3)[:, 2:].clone())),
    ("scatter_add_ of a shifted view", lambda lib, x: x[:3].scatter_add_(0, lib.tensor([1, 0, 2]), x[1:4])),
    ("scatter_ of itself", lambda lib, x: x.scatter_(0, lib.tensor([1, 0]), x)),
]


# (name, call(lib, x)) with x of shape [1, 1, 3]: size-1 dims, whose strides are conventions
ONES = [
    ("setitem of itself", lambda lib, x: x.__setitem__(0, x)),  # expanded first: the same elements
    ("copy_ of itself with more dims", lambda lib, x: x[0].copy_(x)),
    ("copy_ of a row with fewer dims", lambda lib, x: x[0].copy_(x[0, 0])),
    ("add_ of itself with more dims", lambda lib, x: x[0].add_(x)),
    ("copy_ of the same elements", lambda lib, x: x[0, 0].copy_(x.view(3))),
]

# (name, call(lib, y)) with y of shape [3, 1]: one-element views whose size-1 strides differ, which
# PyTorch compares (fuzz seed 221, program 8805: `v0[0] = x0` with v0 a permuted view of x0 [1, 1])
ONE_ELEMENT = [
    ("setitem of a slice with a leading 1", lambda lib, y: y.__setitem__(0, y[0:1])),
    ("setitem of another row", lambda lib, y: y.__setitem__(0, y[1:2])),
    ("setitem of itself", lambda lib, y: y.__setitem__(0, y[0])),
    ("setitem through a permuted view", lambda lib, y: y[:1].t().permute(1, 0).__setitem__(0, y[:1])),
    ("copy_ of an expanded 0-d view", lambda lib, y: y[0].copy_(y[0, 0].expand(1))),
    ("add_ of an expanded 0-d view", lambda lib, y: y[0].add_(y[0, 0].expand(1))),
    ("mul out= a row", lambda lib, y: lib.mul(y[0, 0].expand(1), 2, out=y[0])),
    ("copy_ into a 0-d view", lambda lib, y: y[0, 0].copy_(y[0:1, 0:1])),
    ("copy_ of a view with another size-1 stride", lambda lib, y: y[0].copy_(y.as_strided((1,), (7,)))),
    # view keeps the stride of a size-1 dim, so this is full overlap (fuzz seed 361, program 16116)
    ("add_ of its own view", lambda lib, y: y.view(-1)[::2][:1].add_(y.view(-1)[::2][:1].view(-1))),
]

# (view of) -> (view sizes): view carries a size-1 dim's stride over, as PyTorch's computeStride
VIEWS = [(lambda t: t[::2][:1], (-1,)), (lambda t: t.reshape(2, 12)[:, :1], (1, -1)),
         (lambda t: t.reshape(4, 6)[:1], (-1, 1)), (lambda t: t.reshape(2, 3, 4)[1:, :1, :], (1, 1, -1)),
         (lambda t: t.reshape(2, 12)[:1, ::3], (-1,)), (lambda t: t.reshape(1, 24).t(), (1, -1)),
         (lambda t: t.reshape(24, 1), (2, 12, 1)), (lambda t: t.reshape(4, 6)[1:2, 2:3], (1,))]

# expand's strides for new dims of size 1 (PyTorch's: the extent inside them), on which the
# overlap checks above depend
EXPANDS = [((), (1,)), ((), (1, 1)), ((), (2, 1)), ((3,), (1, 3)), ((3,), (1, 1, 3)), ((3,), (2, 1, 3)),
           ((3, 1), (1, 3, 1)), ((3, 1), (1, 3, 4)), ((3, 1), (1, 1, 3, 4)), ((1, 2), (2, 1, 1, 2))]


def _outcome(lib, case, make):
    x = make(lib)
    try:
        out = case(lib, x)
    except Exception as e:  # noqa: BLE001 - the class and message are what is compared
        return ("raised", next(c for c in type(e).__mro__ if c.__module__ == "builtins").__name__, str(e).split("\n")[0],
                x.tolist())
    return ("returned", out.tolist() if out is not None else None, x.tolist())


def _compare(case, make):
    want, got = _outcome(torch, case, make), _outcome(kiln, case, make)
    assert got == want


@pytest.mark.filterwarnings("ignore:Use of .* on expanded tensors is deprecated")
@pytest.mark.parametrize("name,case", EXPANDED, ids=[c[0] for c in EXPANDED])
def test_writes_into_an_expanded_tensor_match_torch(name, case):
    _compare(case, _expanded)


@pytest.mark.parametrize("name,case", PARTIAL, ids=[c[0] for c in PARTIAL])
def test_writes_overlapping_their_inputs_match_torch(name, case):
    _compare(case, lambda lib: lib.arange(6.0))


@pytest.mark.parametrize("name,case", ONES, ids=[c[0] for c in ONES])
def test_overlap_ignores_the_strides_of_size_one_dims(name, case):
    # `x[0] = x` raised where PyTorch writes (fuzz seed 81, program 566)
    _compare(case, lambda lib: lib.arange(3.0).view(1, 1, 3))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled_write_into_an_expanded_input_raises_as_eager(backend):
    def f(x):
        return x.add_(1) * 2

    x = kiln.zeros(1, 4).expand(3, 4)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        kiln.compile(f, backend=backend)(x)
    assert x.tolist() == [[0.0] * 4] * 3


@pytest.mark.parametrize("name,case", ONE_ELEMENT, ids=[c[0] for c in ONE_ELEMENT])
def test_one_element_overlap_compares_size_one_strides(name, case):
    _compare(case, lambda lib: lib.arange(3.0).view(3, 1))


@pytest.mark.parametrize("i", range(len(VIEWS)))
def test_view_strides_of_size_one_dims_match_torch(i):
    make, sizes = VIEWS[i]
    got, want = make(kiln.arange(24.0)), make(torch.arange(24.0))
    assert got.stride() == want.stride()
    assert got.view(*sizes).stride() == want.view(*sizes).stride()


@pytest.mark.parametrize("shape,size", EXPANDS, ids=[f"{s}->{z}" for s, z in EXPANDS])
def test_expand_strides_of_new_size_one_dims_match_torch(shape, size):
    got, want = kiln.zeros(shape).expand(*size), torch.zeros(shape).expand(*size)
    assert got.stride() == want.stride()


@pytest.mark.parametrize("op", ["add", "mul", "gt", "div", "maximum"])
def test_elementwise_layout_follows_the_cast_of_a_promoted_input(op):
    # PyTorch's CPU TensorIterator casts an input of another dtype before it orders the dims, and
    # the cast of an expanded tensor is row-major: an expanded int64 x1 plus a transposed float32
    # x3 is row-major, and its .view(3, 3, 5)-like reshapes are views (fuzz seed 291, program 16413)
    cases = [
        (lambda lib: lib.ones(1, 3, 1, dtype=lib.int64).expand(5, 3, 3), lambda lib: lib.ones(3, 3).t()),
        (lambda lib: lib.ones(3, 1, dtype=lib.int32).expand(3, 4), lambda lib: lib.ones(4, 3, dtype=lib.float64).t()),
        (lambda lib: lib.ones(1, 4, dtype=lib.bool).expand(3, 4), lambda lib: lib.ones(4, 3, dtype=lib.bool).t()),
        (lambda lib: lib.ones(4, 3).t(), lambda lib: lib.ones(4, 3, dtype=lib.int64).t()),
        (lambda lib: lib.ones(2, 3, 4, dtype=lib.int64).permute(2, 0, 1), lambda lib: lib.ones(4, 2, 3)),
    ]
    for make_a, make_b in cases:
        want = getattr(torch, op)(make_a(torch), make_b(torch))
        got = getattr(kiln, op)(make_a(kiln), make_b(kiln))
        big = lambda t: [st for st, n in zip(t.stride(), t.shape) if n > 1]  # noqa: E731
        assert big(got) == big(want) and str(got.dtype)[5:] == str(want.dtype)[6:]
