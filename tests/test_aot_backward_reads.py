"""What a compiled backward reads, against eager (kiln/_functorch/backward_reads.py): outputs the
loss never used (absent tangents) and inputs eager would have saved. Each case runs kiln eager,
kiln compiled with aot_eager and inductor (both partitioners), and PyTorch eager."""

import numpy as np
import pytest

import kiln
import kiln._dynamo as dynamo
from conftest import requires_torch, torch

pytestmark = requires_torch
BACKENDS = ["aot_eager", "inductor"]


def compiled(fn, backend):
    dynamo.reset()
    return kiln.compile(fn, backend=backend)


def outcome(run):
    """run() -> its value as nested lists, or ("raises", builtin class, message)."""
    try:
        value = run()
    except Exception as e:  # noqa: BLE001 - the exception is the result
        return ("raises", RuntimeError if isinstance(e, RuntimeError) else type(e), str(e))
    return [None if v is None else v.tolist() for v in value]


def same(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert isinstance(a, tuple) and isinstance(b, tuple) and a[1] is b[1], f"{a} != {b}"
        return
    for x, y in zip(a, b, strict=True):
        assert (x is None) == (y is None), f"{a} != {b}"
        if x is not None:
            assert torch.allclose(torch.tensor(x), torch.tensor(y), rtol=1e-5, atol=1e-6, equal_nan=True), \
                f"{a} != {b}"


def check(program, *data, backend, dtype="float32"):
    """program(lib, fn, *leaves) -> gradients; fn is the function to (maybe) compile."""
    def run(lib, compile_it):
        leaves = [lib.tensor(d, dtype=getattr(lib, dtype), requires_grad=True) for d in data]
        return outcome(lambda: program(lib, compile_it, *leaves))

    want = run(torch, lambda f: f)
    same(run(kiln, lambda f: f), want)
    same(run(kiln, lambda f: compiled(f, backend)), want)
    return want


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_output_adds_no_nan_to_the_gradient(backend):
    # log's backward is grad / x: with a zero standing for the unused output's gradient it was
    # 0 / 0 = NaN at x == 0, added to the sum's ones (torch.compile gives NaN too; eager 1)
    def program(lib, c, x):
        log, total = c(lambda x: (x.log(), x.sum()))(x * 1)
        total.backward()
        return [x.grad]

    check(program, [0.0, 1.0, 2.0], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_outputs_in_any_combination(backend):
    # each subset of three outputs in the loss: one specialised backward per subset
    def program(lib, c, x, y):
        f = c(lambda x, y: ((x * y).sqrt(), x / y, (x - y).exp()))
        grads = []
        for used in [(0,), (1,), (2,), (0, 2), (0, 1, 2), (1,)]:
            outs = f(x, y)
            sum(outs[k].sum() for k in used).backward()
            grads += [x.grad.clone(), y.grad.clone()]
            x.grad = y.grad = None
        return grads

    check(program, [0.0, 1.0, 4.0], [1.0, 0.0, 2.0], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_changed_after_the_call_is_checked_only_where_the_backward_reads_it(backend):
    # amax saves x for its backward; only the bfloat16 copy reaches the loss, so eager never runs
    # amax's backward and x.add_(1) is fine there. Compiled, x was checked anyway (and the zeros
    # for amax's gradient made 0 / 0 = NaN once x no longer held its maximum).
    def program(lib, c, leaf):
        def f(x):
            return x.bfloat16(), x.amax()

        x = leaf * 1
        copy, top = c(f)(x)
        float(top)
        x.t().add_(1)
        copy.float().sum().backward()
        return [leaf.grad]

    check(program, [[1.0, 5.0, 2.0], [0.5, -1.0, 3.0]], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_eager_saved_changed_after_the_call_raises(backend):
    # clamp(x0, min=x2) saves x2; the min-cut partitioner saves the mask x0 >= x2 instead, and
    # x2's change after the call went unchecked (eager raises in backward)
    def program(lib, c, a, b):
        x0, x2 = a * 1, b * 1
        y = c(lambda x0, x2: lib.clamp(x0, min=x2) * 2)(x0, x2)
        x2[:1] = 0
        y.sum().backward()
        return [a.grad, b.grad]

    check(program, [[0.5, 2.0]], [[0.7, 1.0]], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_eager_saved_unchanged_trains(backend):
    def program(lib, c, a, b):
        x0, x2 = a * 1, b * 1
        y = c(lambda x0, x2: lib.clamp(x0, min=x2) * 2)(x0, x2)
        (y * y).sum().backward()
        x2.add_(1)  # after the backward: fine
        return [a.grad, b.grad]

    check(program, [[0.5, 2.0]], [[0.7, 1.0]], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("later", ["view", "whole", "none"])
def test_mutated_input_eager_saved_changed_after_the_call_raises(backend, later):
    # x.pow_(2) then x @ x.t(): eager's mm saved x itself (and its transpose), so changing x after
    # the call raises in backward; the compiled forward saved its own buffer of x's new value and
    # the change went unchecked (fuzz seed 91, program 576)
    def program(lib, c, a, w):
        x = a * 1

        def f(x, w):
            x.pow_(2)
            return (x @ x.t()) * w, x.t()

        y, xt = c(f)(x, w)
        if later == "view":
            x[::2].zero_()
        elif later == "whole":
            xt.mul_(3)
        (y.sum() + xt.sum()).backward()
        return [a.grad, w.grad]

    check(program, [[0.5, 2.0], [1.5, -1.0], [0.3, 0.2]], [[1.0, 2.0, 3.0]], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutated_input_is_checked_only_where_eager_saved_it(backend):
    # relu_ saves its result (x's new value), exp of a clone does not read x: eager allows a later
    # change to x only in the second case
    def program(lib, c, a):
        x = a * 1
        y = c(lambda x: x.mul_(2).clone().exp())(x)
        x.add_(1)
        y.sum().backward()
        return [a.grad]

    check(program, [[0.5, 2.0], [1.5, -1.0]], backend=backend)

    def program_relu(lib, c, a):
        x = a * 1
        y = c(lambda x: x.relu_() * 1)(x)
        x.add_(1)
        y.sum().backward()
        return [a.grad]

    check(program_relu, [[0.5, 2.0], [1.5, -1.0]], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("loss", ["prod", "prod_and_clamp"])
@pytest.mark.parametrize("data", [[[1.0], [2.0], [-0.5]], [[1.0, 0.5], [2.0, -0.25], [3.0, 4.0]]], ids=["3x1", "3x2"])
def test_input_saved_to_recompute_what_eager_saved_is_checked_as_eager_checks(backend, dtype, loss, data):
    # prod(-x) saves -x in eager; min-cut saved x to recompute -x from it, and x.mul_(1) after the
    # call raised in a backward eager runs (fuzz seed 181, program 14906). clamp does save x: with
    # its output in the loss, eager raises and so must the compiled backward.
    def program(lib, c, a):
        x = a * 1
        v, clamped = c(lambda x: (lib.prod(-x, dim=1), x.clamp(-1, 1)))(x)
        x.mul_(1)
        (v.sum() + (clamped.sum() if loss == "prod_and_clamp" else 0)).backward()
        return [a.grad]

    want = check(program, data, backend=backend, dtype=dtype)  # (3x1: min-cut saves x, not -x)
    assert (want[0] == "raises") == (loss == "prod_and_clamp")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("change", ["t_", "add_", "none"])
def test_output_eager_saved_changed_after_the_call_raises(backend, dtype, change):
    # min saves its result: v1.t_() after the call raised in eager's backward, while the min-cut
    # forward saved a mask computed from v1 and the change went unchecked (fuzz seed 181, program
    # 17144). v0 (a sum of its own, which no backward reads) changes freely.
    def program(lib, c, a):
        v0, v1, v2 = c(lambda x: (x.sum(1), x.sum(1).min(), x.exp()))(a * 1)
        if change != "none":
            getattr(v1, change)(*([] if change == "t_" else [1]))
        v0.mul_(2)
        (v1 * 2 + v2.sum()).backward()
        return [a.grad]

    want = check(program, [[1.0, 0.5], [2.0, -0.25], [3.0, 4.0]], backend=backend, dtype=dtype)
    assert (want[0] == "raises") == (change != "none")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(), (3,), (2, 2)])
def test_result_a_formula_unpacks_changed_after_the_call_raises(backend, shape):
    # prod saves its result; for a 0-d input the joint graph reads none of it, so a change of the
    # returned result after the call went unchecked (fuzz seed 261, program 1499)
    def program(lib, c, a):
        v = c(lambda x: x.prod())(a * 1)
        w = v * 3
        v.masked_fill_(v > 0, 0)
        w.sum().backward()
        return [a.grad]

    data = np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape).tolist()
    want = check(program, data, backend=backend)
    assert want[0] == "raises"


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_eager_saved_is_checked_only_where_its_backward_runs(backend):
    # exp saves its result; changing it is fine when the loss reads only the other output
    def program(lib, c, a):
        e, doubled = c(lambda x: (x.exp(), x * 2))(a * 1)
        e.add_(1)
        doubled.sum().backward()
        return [a.grad]

    check(program, [[1.0, 0.5], [2.0, -0.25]], backend=backend, dtype="float64")


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_reads_under_dynamic_shapes_are_not_value_reads(backend):
    # sum's backward expands to x's size: a sym_size of x under dynamic shapes, not a saved x, so
    # changing x after the call is fine, as in eager
    def program(lib, c, a):
        fn = c(lambda x: (x.sum(0) * 2, x.shape[0] * x.mean()))
        out = None
        for n in (2, 3, 4):
            x = a[:n] * 1
            s, m = fn(x)
            x.add_(1)
            (s.sum() + m).backward()
            out = a.grad
        return [out]

    check(program, [[0.5, 2.0], [1.5, -1.0], [0.3, 0.2], [1.0, 1.0]], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_formulas_unpack_survives_the_collection_of_the_first_trace(backend, monkeypatch):
    # The joint's formulas record the nodes of its first trace; that graph was freed or not as the
    # garbage collector ran, and once freed the amax formula's unpack of x counted as read by every
    # backward: x.add_ after the call raised in a backward without amax's tangent, where eager
    # trains on (fuzz seed 41, program 1029, only in the stored regressions' run). A collection
    # right after each trace makes the timing certain.
    import gc

    from kiln._functorch._aot_autograd import joint

    original = joint._functional_graph

    def then_collect(*args, **kwargs):
        out = original(*args, **kwargs)
        gc.collect()
        return out

    monkeypatch.setattr(joint, "_functional_graph", then_collect)

    def program(lib, c, a):
        x = a * 1
        y = c(lambda x: (x.bfloat16().float() * 2, x.amax()))(x)
        x.t().add_(1)
        y[0].sum().backward()
        return [a.grad]

    check(program, [[0.5, 2.0], [1.5, -1.0]], backend=backend)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_input_saved_only_for_recomputation_changed_after_the_call(backend):
    # min-cut saved x0 to recompute where(x0 > 0, x0, -1) for max's backward (eager saves the where's
    # result); x0.fill_ past the graph break changed what the compiled backward recomputed from, and
    # the gradient was wrong, silently (fuzz seed 321, program 11679): such saved inputs are cloned
    # (Note [Inputs saved only to recompute from])
    def f(x0):
        v1 = kiln.where(x0 > 0, x0, -1).max()
        v2 = x0.clamp_max(1)
        v3 = x0[kiln.arange(1) % 2 == 0]  # a graph break
        x0.fill_(0.5)
        v2.sign()
        return (v3 / v1)[None]

    data = np.random.default_rng(0).uniform(-3, 3, (1, 2, 3)).tolist()
    grads = []
    for fn in (f, kiln.compile(f, backend=backend)):
        dynamo.reset()
        leaf = kiln.tensor(data, requires_grad=True)
        out = fn(leaf.clone())
        out.backward(kiln.linspace(-1, 1, out.numel()).reshape(out.shape))
        grads.append(leaf.grad.numpy())
    dynamo.reset()
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)


def test_tangent_masks_follow_a_write_through_a_view():
    """The raw joint graph builds a strided slice's gradient as zeros written through a view of
    them (copy_ of the tangent): the zeros' node carries the tangent, as does what reads it after
    (fuzz seed 971, program 251, where a formula given that gradient counted as reading its saved
    tensors whatever the tangents)."""
    from kiln._functorch.backward_reads import tangent_masks
    aten = kiln.ops.aten
    g = kiln.fx.Graph()
    other, t1, t2 = g.placeholder("primals_1"), g.placeholder("tangents_1"), g.placeholder("tangents_2")
    zeros = g.call_function(aten.full.default, ([4], 0.0))
    view = g.call_function(aten.slice.Tensor, (zeros, 0, 0, 4, 2))
    g.call_function(aten.copy_.default, (view, t2))
    after = g.call_function(aten.mul.Tensor, (zeros, other))
    unrelated = g.call_function(aten.mul.Tensor, (t1, other))
    g.output((after, unrelated))
    masks = tangent_masks(g, 2)
    assert (masks[zeros], masks[view], masks[after], masks[unrelated]) == (2, 2, 2, 1)
