"""How gradients reach .grad, against PyTorch 2.13: accumulation across backward calls,
backward(gradient=), broadcast gradients reduced, a fresh gradient kept without a copy (Note
[Stealing gradients]) and the x.grad setter. The rest of autograd's graph machinery is in
test_autograd.py."""

import numpy as np
import pytest

import kiln
from autograd_util import assert_like_torch, both, t64
from conftest import assert_same, requires_torch, torch

pytestmark = [pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")]

# --- accumulation and backward(gradient=) -------------------------------------------------------


def test_grad_accumulates_across_backward_calls():
    x = kiln.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0, 9.0]
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]
    x.grad.zero_()
    x.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_grad_is_not_an_alias_of_the_gradient_given():
    x = kiln.zeros(3, requires_grad=True)
    g = kiln.ones(3)
    (x * 1).backward(g)
    (x * 1).backward(g)
    assert g.tolist() == [1.0, 1.0, 1.0] and x.grad.tolist() == [2.0, 2.0, 2.0]
    y = kiln.zeros(3, requires_grad=True)
    y.backward(g)  # the leaf itself as root: .grad must be a copy of g
    y.grad.add_(1)
    assert g.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("lib", ["kiln", "torch"])
def test_fresh_gradient_becomes_grad_without_a_copy(lib):
    # Note [Stealing gradients]: a gradient nothing else holds is stored as .grad itself (the
    # engine once kept a second reference to every node's inputs, and each .grad was a copy)
    if lib == "torch" and torch is None:
        pytest.skip("needs PyTorch")
    m = kiln if lib == "kiln" else torch
    x = m.randn(64, 32, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.data_ptr()))
    (x * 3).backward(m.ones(64, 32))
    assert x.grad.data_ptr() == seen[0]
    assert x.grad.tolist() == (m.ones(64, 32) * 3).tolist()
    # so is a view of one whose root nothing else holds (TBackward0's t() of t(): Linear's weight)
    x.grad = None
    (x.t().t() * 2).sum().backward()
    assert x.grad.data_ptr() == seen[1] and x.grad.tolist() == [[2.0] * 32] * 64
    # a node with a post hook still sees its gradients, and .grad stays right
    w = m.randn(5, requires_grad=True)
    y = w * 2
    post = []
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: post.append(grad_outputs[0].tolist()))
    y.backward(m.ones(5))
    assert post == [[1.0] * 5] and w.grad.tolist() == [2.0] * 5


def test_leaf_used_twice_sums():
    x = kiln.tensor([1.0, 2.0], requires_grad=True)
    (x * 2 + x * x + x).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]


@requires_torch
def test_backward_with_gradient_for_non_scalar():
    def f(lib):
        x = t64(lib, [[1.0, 2.0], [3.0, 4.0]])
        y = x * x
        y.backward(lib.tensor([[1.0, 0.5], [2.0, 0.0]], dtype=lib.float64))
        return x.grad

    assert_like_torch(f)


@requires_torch
def test_non_scalar_without_gradient_raises():
    assert_like_torch(lambda lib: (t64(lib, [1.0, 2.0]) * 2).backward(),
                      match="grad can be implicitly created only for scalar outputs")


@requires_torch
def test_one_element_non_scalar_without_gradient():
    def f(lib):
        x = t64(lib, [[3.0]])
        (x * x).backward()
        return x.grad

    assert_like_torch(f)


@requires_torch
def test_backward_gradient_shape_mismatch_raises():
    assert_like_torch(lambda lib: (t64(lib, [1.0, 2.0]) * 2).backward(lib.ones(3, dtype=lib.float64)),
                      match="Mismatch in shape")


@requires_torch
def test_backward_on_tensor_without_grad_raises():
    assert_like_torch(lambda lib: lib.ones(2).sum().backward(),
                      match="does not require grad and does not have a grad_fn")


@requires_torch
def test_backward_inputs_restricts_accumulation():
    def f(lib):
        a, b = t64(lib, [1.0, 2.0]), t64(lib, [3.0, 4.0])
        (a * b).sum().backward(inputs=[a])
        return a.grad, b.grad is None

    k, t = both(f)
    assert_same(k[0], t[0])
    assert k[1] == t[1] is True


def test_multiple_roots_backward():
    a = kiln.tensor([1.0, 2.0], requires_grad=True)
    kiln.autograd.backward([(a * 2).sum(), (a * a).sum()])
    assert a.grad.tolist() == [4.0, 6.0]


def test_grad_dtype_matches_leaf():
    x = kiln.tensor([1.0, 2.0], dtype=kiln.float64, requires_grad=True)
    (x.float() * 2).sum().backward()
    assert x.grad.dtype == kiln.float64 and x.grad.tolist() == [2.0, 2.0]


def test_broadcast_gradient_is_reduced():
    x = kiln.ones(3, 1, requires_grad=True)
    y = kiln.ones(1, 4, requires_grad=True)
    (x * y).sum().backward()
    assert x.grad.shape == (3, 1) and x.grad.tolist() == [[4.0]] * 3
    assert y.grad.shape == (1, 4) and y.grad.tolist() == [[3.0] * 4]


# --- x.grad setter --------------------------------------------------------------------------------


@requires_torch
def test_grad_setter_validation():
    assert_like_torch(lambda lib: setattr(lib.ones(2, 3, requires_grad=True), "grad", lib.ones(3, 2)),
                      match=r"attempting to assign a gradient of size '\[3, 2\]' to a tensor of size '\[2, 3\]'")
    assert_like_torch(lambda lib: setattr(lib.ones(2, requires_grad=True), "grad", lib.ones(2, dtype=lib.float64)),
                      match="attempting to assign a gradient with dtype")
    assert_like_torch(lambda lib: setattr(lib.ones(2, requires_grad=True), "grad", [1.0, 2.0]))


def test_grad_setter_accepts_and_accumulates():
    x = kiln.ones(2, requires_grad=True)
    x.grad = kiln.tensor([1.0, 1.0])
    (x * 2).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    x.grad = None
    assert x.grad is None


@requires_torch
def test_matrix_product_gradients_come_back_in_their_matrices_layout():
    """mm/addmm give a column-major matrix (nn.Linear's weight.t()) its gradient column-major, as
    PyTorch's mm_mat1_backward/mm_mat2_backward do: Linear's weight gradient then arrives
    contiguous and is stolen into .grad, not copied into the weight's layout."""
    strides = {}
    for lib in (kiln, torch):
        lib.manual_seed(0)
        a, b = lib.randn(4, 6, requires_grad=True), lib.randn(5, 6, requires_grad=True)
        at, bt = lib.randn(6, 4, requires_grad=True).t(), b.t()
        got = [lib.autograd.grad(lib.mm(a, bt).sum(), [a, bt]), lib.autograd.grad(lib.mm(at, bt).sum(), [at, bt]),
               lib.autograd.grad(lib.addmm(lib.zeros(4, 5), at, bt, alpha=2).sum(), [at, bt])]
        strides[lib] = [g.stride() for pair in got for g in pair]
    assert strides[kiln] == strides[torch]


@requires_torch
def test_linear_weight_gradient_is_stolen_and_matches_torch():
    x_np = np.random.default_rng(3).standard_normal((32, 24)).astype(np.float32)
    grads = {}
    for lib in (kiln, torch):
        lib.manual_seed(0)
        lin = lib.nn.Linear(24, 16)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor(np.linspace(-1, 1, 16 * 24, dtype=np.float32).reshape(16, 24)))
            lin.bias.fill_(0.25)
        seen = []
        lin.weight.register_hook(lambda g: seen.append(g.data_ptr()))
        lin(lib.tensor(x_np)).square().sum().backward()
        # the contiguous view TBackward0 made of the product is stolen, not copied (Note [Stealing
        # gradients]), as PyTorch steals it
        assert lin.weight.grad.is_contiguous() and lin.weight.grad.data_ptr() == seen[0]
        assert lin.weight.grad._base is None
        grads[lib] = lin.weight.grad.numpy()
    np.testing.assert_allclose(grads[kiln], grads[torch], rtol=1e-5, atol=1e-5)


def test_a_gradient_viewing_a_users_tensor_is_copied():
    """A view of a fresh gradient is stolen (test_fresh_gradient_becomes_grad_without_a_copy); one
    of a tensor the user still holds is copied, so .grad never aliases it (PyTorch steals this one
    too, and its .grad then aliases the user's tensor)."""
    m = kiln
    v = m.randn(16, 8, requires_grad=True)
    held = m.ones(128)

    class Give(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return held.view(16, 8)  # contiguous, in w's layout: only its root is someone else's

    Give.apply(v).sum().backward()
    assert v.grad.data_ptr() != held.data_ptr()
    held.add_(1)
    assert v.grad.tolist() == [[1.0] * 8] * 16
