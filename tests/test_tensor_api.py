"""The Python API of eager tensors: creation, metadata, printing, operators, indexing, numpy."""

import numpy as np
import pytest

import kiln
from conftest import requires_torch, torch


def test_creation_and_metadata():
    x = kiln.zeros(2, 3)
    assert x.shape == (2, 3) and isinstance(x.shape, kiln.Size)
    assert x.size() == kiln.Size([2, 3]) and x.size(1) == 3 and x.size(-1) == 3
    assert x.stride() == (3, 1) and x.stride(0) == 3
    assert x.dtype == kiln.float32 and x.ndim == 2 and x.dim() == 2 and x.numel() == 6
    assert x.device == kiln.device("cpu") and str(x.device) == "cpu"
    assert kiln.ones((2, 2), dtype=kiln.int32).dtype == kiln.int32
    assert kiln.full((2,), 7).dtype == kiln.int64
    assert kiln.full((2,), True).dtype == kiln.bool
    assert kiln.full((2,), 1.5).tolist() == [1.5, 1.5]
    assert kiln.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert kiln.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert kiln.arange(0, 1, 0.1).shape == (10,)
    assert kiln.empty(0).shape == (0,)
    assert kiln.zeros_like(x).shape == (2, 3)
    assert kiln.tensor(3.5).dim() == 0 and kiln.tensor(3.5).item() == 3.5
    assert kiln.tensor([[1, 2], [3, 4]]).dtype == kiln.int64
    assert kiln.tensor([True, False]).dtype == kiln.bool
    assert kiln.tensor([1, 2.5]).dtype == kiln.float32


def test_default_dtype():
    assert kiln.get_default_dtype() == kiln.float32
    kiln.set_default_dtype(kiln.float64)
    try:
        assert kiln.tensor([1.0]).dtype == kiln.float64
        assert kiln.ones(2).dtype == kiln.float64
        assert (kiln.tensor([1, 2]) * 0.5).dtype == kiln.float64
    finally:
        kiln.set_default_dtype(kiln.float32)
    with pytest.raises(TypeError):
        kiln.set_default_dtype(kiln.int64)


def test_printing_matches_pytorch_style():
    assert repr(kiln.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(kiln.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(kiln.tensor([1, 2], dtype=kiln.int32)) == "tensor([1, 2], dtype=kiln.int32)"
    assert repr(kiln.tensor(2.5)) == "tensor(2.5000)"
    assert repr(kiln.tensor([True, False])) == "tensor([ True, False])"
    assert repr(kiln.tensor([1e-5, 1.0])) == "tensor([1.0000e-05, 1.0000e+00])"
    assert repr(kiln.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(kiln.zeros(2, device="meta")) == "tensor(..., device='meta', size=(2,))"
    assert repr(kiln.arange(4.0).view(2, 2)) == "tensor([[0., 1.],\n        [2., 3.]])"


@requires_torch
@pytest.mark.parametrize("shape", [(2000,), (40, 50), (3, 400, 2), (7,), (1001,)])
def test_printing_equals_torch(shape):
    n = int(np.prod(shape))
    data = (np.arange(n) * 0.37 - 5).reshape(shape)
    k = repr(kiln.tensor(data.tolist(), dtype=kiln.float32))
    t = repr(torch.tensor(data.tolist(), dtype=torch.float32))
    assert k == t
    ints = np.arange(n).reshape(shape)
    assert repr(kiln.tensor(ints.tolist())) == repr(torch.tensor(ints.tolist()))


@requires_torch
@pytest.mark.parametrize("values", [[0.0, -0.0], [-0.0, 1.0], [float("nan"), 1.0, 100.0], [float("-inf"), 1.0],
                                    [-0.0, 0.25], [float("-inf"), -0.0], [1e-5, -0.0], [[0.0, -0.0], [1.5, float("-inf")]],
                                    [1e10, float("nan")], [float("nan")], [-0.0]])
def test_printing_special_values_equals_torch(values):
    # only the nonzero finite values set the width: zeros, infs and NaNs are padded to it
    assert repr(kiln.tensor(values)) == repr(torch.tensor(values))
    kiln.set_printoptions(sci_mode=True)
    torch.set_printoptions(sci_mode=True)
    try:
        assert repr(kiln.tensor(values)) == repr(torch.tensor(values))
    finally:
        kiln.set_printoptions(sci_mode=None)
        torch.set_printoptions(sci_mode=None)


def test_operators_and_reflected():
    x = kiln.tensor([1.0, 2.0, 4.0])
    assert (x + 1).tolist() == [2, 3, 5]
    assert (1 + x).tolist() == [2, 3, 5]
    assert (1 - x).tolist() == [0, -1, -3]
    assert (2 * x).tolist() == [2, 4, 8]
    assert (1 / x).tolist() == [1, 0.5, 0.25]
    assert (x ** 2).tolist() == [1, 4, 16]
    assert (2 ** x).tolist() == [2, 4, 16]
    assert (-x).tolist() == [-1, -2, -4]
    assert (x // 3).tolist() == [0, 0, 1]
    assert (x % 3).tolist() == [1, 2, 1]
    assert (x > 1.5).tolist() == [False, True, True]
    assert (x == 2).dtype == kiln.bool
    assert (x != x).tolist() == [False] * 3
    y = x.clone()
    y += 1
    assert y.tolist() == [2, 3, 5] and x.tolist() == [1, 2, 4]
    z = y
    z *= 2
    assert z is y and y.tolist() == [4, 6, 10]
    assert (kiln.tensor([3]) & kiln.tensor([5])).tolist() == [1]
    assert (kiln.tensor([3]) << 2).tolist() == [12] and (kiln.tensor([-8]) >> 1).tolist() == [-4]
    w = kiln.tensor([1, 2])
    w <<= 3
    assert w.tolist() == [8, 16]
    assert (~kiln.tensor([True, False])).tolist() == [False, True]
    assert abs(kiln.tensor([-2])).tolist() == [2]
    assert (x == None) is False  # noqa: E711


def test_inplace_returns_same_object_and_bumps_version():
    x = kiln.zeros(3)
    v0 = x._version
    assert x.add_(1) is x
    assert x._version == v0 + 1
    view = x[1:]
    view.mul_(5)
    assert x.tolist() == [1, 5, 5] and x._version == v0 + 2


def test_bool_int_float_conversions():
    assert bool(kiln.tensor([1]))
    assert not bool(kiln.tensor(0.0))
    assert int(kiln.tensor(3.7)) == 3 and float(kiln.tensor(2)) == 2.0
    assert [10, 20, 30][kiln.tensor(1)] == 20
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(kiln.tensor([1, 2]))
    with pytest.raises(TypeError):
        [1, 2][kiln.tensor(1.0)]


def test_views_share_storage():
    x = kiln.arange(12.0)
    v = x.view(3, 4)
    v[0, 0] = 100
    assert x[0].item() == 100
    assert x.view(3, 4).t().stride() == (1, 4)
    assert x.view(3, 4).t().contiguous().stride() == (3, 1)
    assert x.view(2, 6).permute(1, 0).shape == (6, 2)
    assert x.view(3, 4).transpose(0, 1).shape == (4, 3)
    assert x.unsqueeze(0).shape == (1, 12) and x.view(1, 12, 1).squeeze().shape == (12,)
    assert x.view(1, 12).expand(3, 12).stride() == (0, 1)
    assert x.view(3, 4).flatten().shape == (12,)
    assert x.unflatten(0, (3, -1)).shape == (3, 4)
    assert x.narrow(0, 2, 3).tolist() == [2, 3, 4]
    assert x.view(3, 4).diagonal().tolist() == [100, 5, 10]
    assert x.unfold(0, 4, 4).shape == (3, 4)
    assert x.as_strided((2, 2), (1, 2)).tolist() == [[100, 2], [1, 3]]
    assert x.view(3, 4).T.shape == (4, 3)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.view(3, 4).t().view(12)
    assert x.view(3, 4).t().reshape(12).shape == (12,)


def test_basic_indexing():
    x = kiln.arange(24).view(2, 3, 4)
    n = np.arange(24).reshape(2, 3, 4)
    for key in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 2), (None, 0), (slice(0, 2), None, slice(1, 3)),
                (slice(None, None, 2), Ellipsis, slice(1, None, 2)), (1, Ellipsis, None), ()]:
        assert x[key].tolist() == n[key].tolist(), key
    with pytest.raises(IndexError):
        x[2]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(ValueError):
        x[::-1]


def test_setitem():
    x = kiln.zeros(3, 4)
    x[1] = 5
    x[:, 0] = kiln.tensor([1.0, 2.0, 3.0])
    x[2, 1:3] = 7
    n = np.zeros((3, 4))
    n[1] = 5
    n[:, 0] = [1, 2, 3]
    n[2, 1:3] = 7
    assert x.tolist() == n.tolist()
    # an augmented assignment writes the slice back onto itself; a (1, 1) slice did so through an
    # aliasing 0-d view and raised the overlap error
    x[2:, 3:] -= kiln.ones(1, 1)
    x[1:, 2:] *= 2
    n[2:, 3:] -= 1
    n[1:, 2:] *= 2
    assert x.tolist() == n.tolist()
    y = kiln.zeros(2, 3)
    y[0] = kiln.ones(1, 1, 3)  # leading 1s still dropped before broadcasting
    assert y.tolist() == [[1, 1, 1], [0, 0, 0]]


@pytest.mark.parametrize("name", ["setitem_self", "copy_same_view", "copy_other_view"])
def test_copy_between_views_of_the_same_data_equals_torch(name):
    # copy_ returns before its internal-overlap check when self and src view the same elements
    # (fuzz program seed181-18010: `x[0] = x` on an expanded x); a different view still raises
    def run(lib):
        x = lib.tensor([[1], [2], [3]]).expand(3, 3).unsqueeze(0)
        try:
            if name == "setitem_self":
                x[0] = x
            elif name == "copy_same_view":
                x[0].copy_(x[0])
            else:
                x[0].copy_(x[0].t())
        except RuntimeError as e:
            return str(e)
        return x.tolist()

    torch = pytest.importorskip("torch")
    assert run(kiln) == run(torch)


def test_len_iter_contains():
    x = kiln.tensor([[1, 2], [3, 4]])
    assert len(x) == 2
    assert [r.tolist() for r in x] == [[1, 2], [3, 4]]
    with pytest.raises(TypeError):
        len(kiln.tensor(1))


def test_numpy_interop_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = kiln.from_numpy(a)
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t[1, 2] = -1
    assert a[1, 2] == -1
    back = t.numpy()
    back[0, 1] = 9
    assert t[0, 1].item() == 9
    assert np.asarray(t.t()).tolist() == a.T.tolist()
    assert kiln.tensor(np.array([1, 2], dtype=np.int32)).dtype == kiln.int32
    assert kiln.from_numpy(np.zeros(3, dtype=np.float16)).dtype == kiln.float16
    with pytest.raises(TypeError, match="BFloat16"):
        kiln.ones(2, dtype=kiln.bfloat16).numpy()
    assert kiln.from_numpy(np.zeros(2, dtype=np.complex64)).dtype == kiln.complex64
    with pytest.raises(TypeError):
        kiln.from_numpy(np.zeros(2, dtype=np.uint16))
    assert kiln.tensor(np.float64(2.5)).item() == 2.5


def test_to_and_conversions():
    x = kiln.tensor([1.7, -2.2])
    assert x.to(kiln.int32).tolist() == [1, -2]
    assert x.to(kiln.float32) is x
    assert x.to(kiln.float32, copy=True) is not x
    assert x.double().dtype == kiln.float64 and x.long().dtype == kiln.int64 and x.bool().dtype == kiln.bool
    assert x.to("cpu") is x
    assert x.to(dtype=kiln.float16).dtype == kiln.float16
    assert x.type() == "kiln.FloatTensor"
    if not kiln.cuda.is_available():  # as PyTorch's CUDA build on a machine with no driver
        with pytest.raises(RuntimeError, match="Found no NVIDIA driver"):
            x.to("cuda")


def test_ops_namespace():
    x = kiln.tensor([1.0, 2.0])
    assert kiln.ops.aten.add.Tensor(x, x).tolist() == [2, 4]
    assert str(kiln.ops.aten.add.Tensor._schema) == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    assert "Tensor" in kiln.ops.aten.add.overloads() and "Scalar" in kiln.ops.aten.add.overloads()
    assert kiln.ops.aten.add(x, 1).tolist() == [2, 3]
    assert kiln.ops.aten.add.Tensor.overloadpacket is kiln.ops.aten.add
    assert "pointwise" in kiln.ops.aten.add.Tensor.tags
    assert kiln.ops.aten.sum.default(x).item() == 3
    with pytest.raises(AttributeError):
        kiln.ops.aten.add.NoSuchOverload
    with pytest.raises(AttributeError):
        kiln.ops.aten.no_such_op


def test_bad_arguments_raise_type_errors_and_leave_inputs_alone():
    x = kiln.ones(2, 3)
    with pytest.raises(TypeError, match="add"):
        kiln.add(x, "a")
    with pytest.raises(TypeError, match="unexpected keyword"):
        x.sum(dimm=1)
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of tensor b \(4\)"):
        x + kiln.ones(4)
    y = kiln.ones(3)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        y.add_(kiln.ones(2, 3))
    assert y.tolist() == [1, 1, 1]
    with pytest.raises(RuntimeError, match="can't be cast"):
        kiln.ones(2, dtype=kiln.int64).add_(0.5)
    with pytest.raises(RuntimeError, match="negative dimension"):
        kiln.empty(-1)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.sum(5)
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor is not supported"):
        kiln.tensor([True]).neg()
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        kiln.tensor([True]).frac()


def test_generator_seeding_is_reproducible():
    g = kiln.Generator().manual_seed(3)
    assert g.initial_seed() == 3
    state = kiln.get_rng_state()
    kiln.set_rng_state(state)
    assert kiln.initial_seed() == kiln.default_generator.initial_seed()


@requires_torch
def test_is_contiguous_memory_format_matches_torch():
    cases = [lambda lib: lib.randn(2, 3, 4, 5),
             lambda lib: lib.randn(2, 5, 3, 4).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
             lambda lib: lib.randn(2, 1, 4, 5), lambda lib: lib.randn(1, 3, 1, 1), lambda lib: lib.randn(3, 4),
             lambda lib: lib.randn(2, 3, 4, 5)[:, :, ::2]]
    for make in cases:
        k, t = make(kiln), make(torch)
        for kf, tf in [(None, None), (kiln.contiguous_format, torch.contiguous_format),
                       (kiln.channels_last, torch.channels_last)]:
            got = k.is_contiguous() if kf is None else k.is_contiguous(memory_format=kf)
            want = t.is_contiguous() if tf is None else t.is_contiguous(memory_format=tf)
            assert got == want, (tuple(k.shape), k.stride(), kf)
    with pytest.raises(TypeError, match="memory_format"):
        kiln.randn(2).is_contiguous(memory_format=3)
    with pytest.raises(TypeError, match="unexpected keyword"):
        kiln.randn(2).is_contiguous(format=kiln.channels_last)


# --- issue 16: small eager API gaps ----------------------------------------------------------------
@requires_torch
@pytest.mark.parametrize("shape", [(2, 3), (3,), (), (1, 4)])
def test_t_and_transpose_in_place_match_torch(shape):
    for op in (lambda x: x.t_(), lambda x: x.transpose_(0, -1) if x.dim() else x.transpose_(0, 0)):
        k = kiln.arange(float(np.prod(shape))).reshape(shape)
        t = torch.arange(float(np.prod(shape))).reshape(shape)
        rk, rt = op(k), op(t)
        assert rk is k
        assert (k.shape, k.stride(), k._version, k.tolist()) == (t.shape, t.stride(), t._version, t.tolist())
        assert k.contiguous().tolist() == t.contiguous().tolist()


@requires_torch
def test_t_in_place_errors_and_autograd_match_torch():
    for lib in (kiln, torch):
        with pytest.raises(RuntimeError, match="t_\\(\\) expects a tensor with <= 2 dimensions"):
            lib.ones(2, 3, 4).t_()
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            lib.ones(2, 3, requires_grad=True).t_()
    grads = []
    for lib in (kiln, torch):
        w = lib.tensor(np.arange(6.0).reshape(2, 3).tolist(), requires_grad=True)
        y = w * w
        y.t_()
        assert y.shape == (3, 2)
        (y * lib.arange(6.0).reshape(3, 2)).sum().backward()
        grads.append(w.grad.tolist())
    assert grads[0] == grads[1]
    b = kiln.ones(2, 3)
    v = b[0:1]
    v.t_()  # a view that needs no grad: its own layout changes, the base's does not (as in torch)
    assert (v.shape, v.stride(), b.shape) == ((3, 1), (1, 3), (2, 3))


@requires_torch
@pytest.mark.parametrize("shape,reps", [((3, 4), (1, 1)), ((3,), (1,)), ((2, 3), (1, 1, 1)), ((0, 3), (1, 1))])
def test_repeat_always_copies(shape, reps):
    x = kiln.ones(*shape)
    r = x.repeat(*reps)
    assert r.shape == torch.ones(*shape).repeat(*reps).shape
    if r.numel():
        assert r.data_ptr() != x.data_ptr()
    r.add_(1)  # writing the result must not touch the input
    assert x.tolist() == torch.ones(*shape).tolist()
    y = kiln.ones(4, 3).t()  # non-contiguous
    assert y.repeat(1, 1).is_contiguous() and y.repeat(1, 1).tolist() == y.tolist()


@requires_torch
@pytest.mark.parametrize("shape,new", [((0, 3), (-1, 0)), ((0, 3), (0, -1)), ((3, 0), (-1, 0)), ((0,), (-1, 0, 2)),
                                       ((0,), (2, -1)), ((0, 3), (-1,)), ((0, 3), (-1, 3)), ((3,), (-1, 0)),
                                       ((0, 3), (3, -1, 0)), ((4,), (-1, 2))])
def test_reshape_with_inferred_dim_matches_torch(shape, new):
    # PyTorch refuses -1 only when it is ambiguous (0 elements and a 0 among the given sizes) or
    # impossible (elements left over); both messages are PyTorch's.
    for method in ("reshape", "view"):
        try:
            want = getattr(torch.ones(*shape), method)(*new)
        except RuntimeError as e:
            with pytest.raises(RuntimeError) as got:
                getattr(kiln.ones(*shape), method)(*new)
            assert str(got.value) == str(e)
            continue
        have = getattr(kiln.ones(*shape), method)(*new)
        assert (tuple(have.shape), have.stride()) == (tuple(want.shape), want.stride())


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_sign_of_nan_and_signed_zeros_is_zero_as_pytorch(dtype):
    values = [float("nan"), -0.0, 0.0, float("inf"), -float("inf"), 2.5, -3.0]
    k = kiln.tensor(values, dtype=getattr(kiln, dtype))
    t = torch.tensor(values, dtype=getattr(torch, dtype))
    want = torch.sign(t).float().tolist()
    assert kiln.sign(k).float().tolist() == want
    assert [v == 0 and np.signbit(v) for v in kiln.sign(k).float().tolist()] == \
           [v == 0 and np.signbit(v) for v in want]
    import kiln._dynamo as dynamo

    dynamo.reset()
    assert kiln.compile(kiln.sign, backend="inductor")(k).float().tolist() == want


@requires_torch
def test_zero_dim_tensors_bind_to_scalar_parameters_as_pytorch():
    # PyTorch takes a 0-d tensor that needs no grad for a Scalar (full's fill_value, clamp's bound
    # beside a number); kiln's second pass binds numbers to Tensor parameters instead, where it can
    for lib in (kiln, torch):
        s = lib.tensor(0.25)
        assert lib.full((2,), s).tolist() == [0.25, 0.25]
        assert lib.clamp(lib.tensor([0.0, 1.0]), s, 0.5).tolist() == [0.25, 0.5]
        assert lib.tensor([0.0, 1.0]).clamp(max=s).tolist() == [0.0, 0.25]


@requires_torch
@pytest.mark.parametrize("layout", ["transposed", "permuted", "strided", "broadcast", "expanded", "mixed"])
def test_elementwise_results_are_laid_out_like_their_inputs_as_pytorch(layout):
    # Note [Elementwise output layout] (tensor/ops/common.cc): x.t() + 1 is transposed like x.t()
    # in PyTorch; kiln made it contiguous, so (x.t() + 1).reshape(-1) was a view where PyTorch copies
    def inputs(lib):
        base = lib.arange(24.0).reshape(2, 3, 4)
        return {"transposed": lambda: (base[0].t(), base[1].t()),
                "permuted": lambda: (base.permute(2, 0, 1), base.permute(2, 0, 1) * 2),
                "strided": lambda: (base[:, :, ::2], base[:, :, 1::2]),
                "broadcast": lambda: (base[0].t(), lib.arange(3.0)),
                "expanded": lambda: (base[0, :1].expand(3, 4), base[1].t().t()),
                "mixed": lambda: (base.permute(2, 1, 0), base.transpose(0, 2).contiguous())}[layout]()

    ops = [lambda lib, a, b: a + b, lambda lib, a, b: a * 2, lambda lib, a, b: a.exp(),
           lambda lib, a, b: lib.where(a > 3, a, b), lambda lib, a, b: a.clamp(1, 5), lambda lib, a, b: a.double(),
           lambda lib, a, b: lib.lerp(a, b, 0.5), lambda lib, a, b: lib.nn.functional.gelu(a), lambda lib, a, b: a > b]
    for op in ops:
        k, t = op(kiln, *inputs(kiln)), op(torch, *inputs(torch))
        assert k.stride() == t.stride(), (layout, k.stride(), t.stride())
        np.testing.assert_allclose(np.array(k.tolist(), dtype=np.float64), np.array(t.tolist(), dtype=np.float64),
                                   rtol=1e-6)


@requires_torch
def test_elementwise_layout_over_size_one_dims_is_pytorchs():
    # Note [Fast setup] (tensor/ops/common.cc): inputs of the result's shape that are all row-major,
    # all channels-last, or all dense with equal strides give the result those strides without the
    # sort, size-1 dims' strides included; a Python number operand or broadcasting sorts. Random
    # layouts with size-1 dims, permuted, sliced, expanded; strides compared with PyTorch's.
    rng = np.random.default_rng(0)
    ops = [lambda lib, a, b: a.exp(), lambda lib, a, b: lib.logical_not(a), lambda lib, a, b: a + b,
           lambda lib, a, b: a * 2, lambda lib, a, b: a > 0, lambda lib, a, b: lib.where(a > b, a, b),
           lambda lib, a, b: a.clamp(0, 3), lambda lib, a, b: a + b.double(), lambda lib, a, b: a.flip(0),
           lambda lib, a, b: b.clone(), lambda lib, a, b: lib.empty_like(b), lambda lib, a, b: b.to(lib.int32)]
    for case in range(300):
        ndim = int(rng.integers(2, 5))
        sizes = [int(n) for n in rng.choice([1, 1, 2, 3], ndim)]
        perms = [list(rng.permutation(ndim)) for _ in range(2)]
        steps = [[int(s) for s in rng.choice([1, 1, 2], ndim)] for _ in range(2)]
        expand = rng.random() < 0.2
        same = rng.random() < 0.5

        def inputs(lib):
            made = []
            for i in range(2):
                p, st = perms[0 if same else i], steps[0 if same else i]
                full = [sizes[p.index(d)] * st[p.index(d)] for d in range(ndim)]
                t = lib.arange(float(np.prod(full))).reshape(full)
                t = t[tuple(slice(None, None, s) for s in st)].permute(*[int(d) for d in np.argsort(p)])
                made.append(t)
            if expand and made[1].shape[0] == 1:
                made[1] = made[1].expand(3, *made[1].shape[1:])
                made[0] = made[0].expand(3, *made[0].shape[1:]) if made[0].shape[0] == 1 else made[0]
            return made
        for j, op in enumerate(ops):
            try:
                t = op(torch, *inputs(torch))
            except RuntimeError:
                continue
            k = op(kiln, *inputs(kiln))
            assert k.stride() == t.stride(), (case, j, [tuple(x.stride()) for x in inputs(torch)], k.stride(), t.stride())
    for lib in (kiln, torch):  # the fuzzed program that found it: v[0] = v, a full overlap
        v = lib.where(lib.tensor([[[3], [0]]]).transpose(-1, -2) > 0, 1, 2)
        v[0] = lib.logical_not(v) * 1 + v
        w = lib.logical_not(lib.tensor([[[3], [0]]]).transpose(-1, -2)).long()
        w[0] = w
        assert w.tolist() == [[[0, 1]]]
    b4 = torch.arange(24.0).reshape(2, 3, 1, 4).contiguous(memory_format=torch.channels_last)
    k4 = kiln.arange(24.0).reshape(2, 3, 1, 4).contiguous(memory_format=kiln.channels_last)
    assert (k4 + k4).stride() == (b4 + b4).stride() and k4.exp().stride() == b4.exp().stride()


@requires_torch
def test_zero_dim_integer_tensor_index_is_a_view_as_pytorch():
    # PyTorch indexes with a 0-d integer tensor as with its value (select: a view), so a later
    # write to the base shows through; kiln gathered a copy (fuzz seed 61, program 1740)
    for lib in (kiln, torch):
        x = lib.arange(12).reshape(4, 3)
        v, w = x[lib.tensor(2)], x[lib.tensor(-1), lib.tensor(1, dtype=lib.int32)]
        x.zero_()
        assert v.tolist() == [0, 0, 0] and w.item() == 0
        y = lib.zeros(3, 2)
        y[lib.tensor(1)] = 5
        assert y.tolist() == [[0, 0], [5, 5], [0, 0]]
        with pytest.raises(IndexError):
            x[lib.tensor(7)]


@requires_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("weight", [0.1, -0.3, 0.5, 0.9, 1.7, float("nan")])
def test_lerp_by_a_number_gives_torchs_bits(dtype, weight):
    """lerp with a number weight (Adam's exp_avg.lerp_(grad, 1 - beta1)) takes a loop of its own,
    the weight a constant in opmath (float for bfloat16, as PyTorch's lerp_kernel_scalar reads it):
    PyTorch's values bit for bit, contiguous or strided, in place or not."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 64, 33)).astype(np.float32)
    results = {}
    for lib in (kiln, torch):
        x, y = (lib.tensor(v).to(getattr(lib, dtype)) for v in (a, b))
        out = [lib.lerp(x, y, weight), x.t().lerp(y.t(), weight), x[:, ::2].clone().lerp_(y[:, ::2], weight)]
        inplace = x.clone()
        inplace.lerp_(y, weight)
        results[lib] = [t.float().numpy() for t in (*out, inplace)]
    for got, want in zip(results[kiln], results[torch]):
        nan = np.isnan(want)  # a NaN weight: NaN everywhere, its sign bit PyTorch's own business
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.int32), want[~nan].view(np.int32))


# A float value filled into an integer tensor converts as PyTorch's c10::convert: straight to the
# type (a NaN or an out-of-range value is the 32- or 64-bit minimum on x86, truncated for 8- and
# 16-bit types), uint8 through int64. Through int64 for every type, `x1[0] = x.std()` of one
# element (NaN) into int32 gave 0 where PyTorch gives -2147483648 (fuzz seed 831, program 447).
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 1e20, 300.7, -300.7, -2.5])
def test_float_filled_into_integers_converts_as_pytorch(dtype, value):
    torch = pytest.importorskip("torch")
    results = []
    for lib in (kiln, torch):
        dt, v = getattr(lib, dtype), lib.tensor(value)
        a = lib.zeros(2, 3, dtype=dt)
        a[0] = v                       # setitem of a 0-d tensor
        b = lib.zeros(3, dtype=dt).fill_(v)
        results.append((a.tolist(), b.tolist()))
    assert results[0] == results[1]
