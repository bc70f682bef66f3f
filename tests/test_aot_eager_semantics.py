"""Compiled functions keep eager's autograd semantics where the seed-171 and seed-181 fuzz runs found
them apart (kiln/_functorch/aot_autograd.py): the requires_grad of an empty expanded input written
with a differentiable value, the version counters a re-laid input (`x.t_()`) shares with saved
values and with the inputs aliasing it, split/chunk pieces (multi-output views) that eager refuses
to change in place, whether they are inputs (alone or with their base), views of inputs or pieces of
intermediates crossing a graph break, and the empty gradient cat gives a legacy empty input it
skipped. Each case runs in PyTorch eager, kiln eager and kiln compiled with aot_eager and inductor;
values, gradients and exceptions (class and message) must agree."""

import pytest

import kiln
import kiln._dynamo as dynamo
from conftest import requires_torch, torch
from kiln._functorch.aot_autograd import aot_function

pytestmark = requires_torch
BACKENDS = ["aot_eager", "inductor"]
DTYPES = ["float32", "float64"]


def compiled(fn, backend):
    dynamo.reset()
    return kiln.compile(fn, backend=backend)


def outcome(run):
    """run() -> its tensors as (values, requires_grad) pairs, or ("raises", class, message up to
    its first colon: a version error names the library's tensor type and hints after it)."""
    try:
        values = run()
    except RuntimeError as e:
        return ("raises", RuntimeError, str(e).split(":")[0])
    return [None if v is None else (v.tolist(), v.requires_grad) for v in values]


def same(got, want, dtype):
    if isinstance(want, tuple) or isinstance(got, tuple):
        assert got == want
        return
    tol = 1e-12 if dtype == "float64" else 1e-5
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None), f"{got} != {want}"
        if w is not None:
            assert g[1] == w[1], f"requires_grad: {got} != {want}"
            assert torch.allclose(torch.tensor(g[0], dtype=torch.float64), torch.tensor(w[0], dtype=torch.float64),
                                  rtol=tol, atol=tol), f"{got} != {want}"


def check(program, backend, dtype="float32"):
    """program(lib, c, dtype) -> tensors; c(f) is f itself or f compiled with `backend`."""
    want = outcome(lambda: program(torch, lambda f: f, getattr(torch, dtype)))
    same(outcome(lambda: program(kiln, lambda f: f, getattr(kiln, dtype))), want, dtype)
    same(outcome(lambda: program(kiln, lambda f: compiled(f, backend), getattr(kiln, dtype))), want, dtype)
    return want


# --- an empty expanded input written with a value that requires grad --------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("base,size", [((1, 0), (4, 0)), ((1, 0, 3), (2, 0, 3)), ((0, 1), (0, 5))])
def test_empty_expanded_input_written_with_a_differentiable_value_requires_grad(backend, base, size):
    # the copy-back narrowed the empty input to one row of its expanded dimension first: a view
    # kiln's autograd does not track, so the input itself never joined the value's history
    def program(lib, c, dtype):
        x0 = lib.zeros(*base, dtype=dtype).expand(*size)
        x1 = lib.tensor(1.5, dtype=dtype, requires_grad=True)
        out = c(lambda a, b: a.add_(b * 2))(x0, x1)
        (out.sum() + x1 * 3).backward()
        return [out, x0, x1.grad]

    check(program, backend)


# --- x.t_() on an input, then an op that saves it ----------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_input_relaid_by_t_then_saved_runs_backward(backend, dtype, layout):
    # the forward saved x1.t() at x1's version, then the epilogue's as_strided_ (replaying t_)
    # bumped it: a version error eager never raises (eager bumped it before the save)
    def program(lib, c, dtype):
        x0 = lib.arange(1.0, 13.0, dtype=dtype).reshape(4, 3).requires_grad_()
        data = lib.tensor([[1.0, 2.0, 4.0, 8.0], [0.5, -1.0, 3.0, 5.0], [2.0, 1.5, -4.0, 1.0]], dtype=dtype)
        x1 = {"contiguous": data, "transposed": data.t().contiguous().t(),
              "strided": lib.cat([data, data], 1)[:, ::2]}[layout]

        def f(x0, x1):
            x1.t_()
            return x0 / x1, x0 * x1.sum()

        a, b = c(f)(x0, x1)
        (a * lib.arange(12.0, dtype=dtype).reshape(4, 3)).sum().add(b.sum()).backward()
        return [a, b, x0.grad, x1]

    check(program, backend, dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("body", ["contiguous", "itself", "view"])
def test_output_that_is_the_relaid_input_keeps_its_new_layout(backend, dynamic, body):
    # `x1.t_(); return x1.contiguous()` returns x1 itself; its alias was recorded after the fake
    # input's layout was restored, so the compiled call returned it untransposed: (6, 1) for
    # eager's (1, 6) (fuzz seed 331, program 5452)
    def f(x1):
        x1.t_()
        return {"contiguous": x1.contiguous(), "itself": x1, "view": x1[0]}[body]

    dynamo.reset()
    g = kiln.compile(f, backend=backend, dynamic=dynamic)
    for n in (5, 6, 3):
        want_in, got_in = kiln.arange(n).reshape(n, 1), kiln.arange(n).reshape(n, 1)
        want, got = f(want_in), g(got_in)
        assert (tuple(got.shape), got.stride(), got.tolist()) == (tuple(want.shape), want.stride(), want.tolist())
        assert (tuple(got_in.shape), got_in.stride()) == (tuple(want_in.shape), want_in.stride())


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_saved_before_its_t_still_raises_in_backward(backend):
    # eager saved x1 before the t_() bumped its version: the backward raises there, compiled too
    def program(lib, c, dtype):
        x0 = lib.ones(3, 3, dtype=dtype, requires_grad=True)
        x1 = lib.tensor([[1.0, 2.0, 4.0]] * 3, dtype=dtype)

        def f(x0, x1):
            y = x0 * x1
            x1.t_()
            return y

        c(f)(x0, x1).sum().backward()
        return [x0.grad]

    assert check(program, backend)[0] == "raises"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alias", ["transpose", "rows", "row", "base_of_transpose"])
def test_t_on_an_input_aliasing_the_saved_input_runs_backward(backend, dtype, alias):
    # x1 and x2 share memory, so x1.t_() re-lays a member of their synthetic base; the wrapper did
    # that after the compiled function had read the versions for its backward, and x2 * x2 (saved
    # after the t_ in eager) raised a version error (fuzz seed 181, programs 2555, 5645, 17136)
    def program(lib, c, dtype):
        b = lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=dtype, requires_grad=True)
        base = b * 1
        x1, x2 = {"transpose": (base, base.t()), "rows": (base, base[::2]), "row": (base, base[0]),
                  "base_of_transpose": (base.t(), base)}[alias]

        def f(x1, x2):
            x1.t_()
            return x2 * x2 + x1.sum()

        out = c(f)(x1, x2)
        (out * lib.arange(out.numel(), dtype=dtype).reshape(out.shape)).sum().backward()
        return [out, x1, b.grad]

    check(program, backend, dtype)


def _index_select_of_flattened(lib, x2, x3):
    v = lib.index_select(x2, 0, x3.flatten())  # saves the index, a view of x3
    x3.t_()
    return v


def _product_with_flattened(lib, x2, x3):
    v = x2 * x3.flatten()  # saves x3.flatten() for x2's gradient
    x3.t_()
    return v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body", [_index_select_of_flattened, _product_with_flattened],
                         ids=lambda f: f.__name__.strip("_"))
def test_saved_view_of_an_input_relaid_in_the_function_raises_in_backward(backend, body):
    # the joint's first trace raised eager's error (a backward-only one, so it is traced again)
    # but left the fake x3 transposed; in the retrace x3.flatten() was a copy, nothing saved a
    # view of x3, and the backward ran (fuzz seed 181, program 12912)
    def program(lib, c, dtype):
        x2 = lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=dtype, requires_grad=True)
        x3 = lib.tensor([[0, 1], [2, 3]]) if body is _index_select_of_flattened else \
            lib.tensor([[0.5, 1.0], [2.0, -1.0]], dtype=dtype)
        out = c(lambda x2, x3: body(lib, x2, x3))(x2 * 1, x3)
        out.sum().backward()
        return [out, x2.grad, x3]

    want = check(program, backend)
    assert want[0] == "raises" and want[2].startswith("one of the variables needed for gradient computation")


# --- cat's gradient for a legacy empty input it skipped ------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("used", [(0,), (1,), (2,), (0, 2), (1, 2)])
def test_empty_input_cat_skipped_gets_a_gradient_when_cat_backward_runs(backend, dtype, used):
    # cat's formula makes the skipped input's gradient, zeros({0}), from no gradient: summed with
    # one from an absent tangent it looked absent too, and came back None where eager's
    # CatBackward gave tensor([]); and without cat in the loss it must stay None
    def program(lib, c, dtype):
        a = lib.tensor([[1.0], [2.0]], dtype=dtype, requires_grad=True)
        e = lib.zeros(0, dtype=dtype, requires_grad=True)
        outs = c(lambda x1, x2: (lib.cat([x1, x2], 1), x1.sum(), x2 * 2))(a * 1, e * 1)
        sum(outs[k].sum() for k in used).backward()
        return [*outs, a.grad, e.grad]

    check(program, backend, dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_input_cat_skipped_then_mutated_gets_an_empty_gradient(backend, dtype):
    # its mutation's new value is an output the loss never reads (fuzz seed 181, program 22566)
    def program(lib, c, dtype):
        e = lib.zeros(0, dtype=dtype, requires_grad=True)

        def f(x1, x2):
            v = lib.cat([x1, x2], 1)
            x2.zero_()
            return v

        out = c(f)(lib.ones(2, 1, dtype=dtype), e.clone())
        out.sum().backward()
        return [out, e.grad]

    assert check(program, backend, dtype)[1] == ([], False)


# --- split/chunk pieces changed in place ---------------------------------------------------------
def _piece_of_input_transposed(lib, x):
    x.chunk(2, 0)[0].t().add_(1)  # `t` was no view op to the output's view chain: a plain view came back
    return x * 2


def _piece_of_intermediate(lib, x):
    x.log().chunk(2, 0)[0].sub_(1)  # the piece crossed the graph break as a tensor of its own
    return x.sqrt()


def _piece_stored_into(lib, x):
    v = x.log()
    p = v.split(1, 1)[-1]
    p[..., 0] = 0.5  # the store was traced again after the break, through a synthetic base
    return v.softmax(-1)


def _piece_whose_backward_raises(lib, x):
    v = lib.nn.functional.layer_norm(x, x.shape[-2:])
    p = v.split(1, -2)[-1]
    x.fill_(2)  # layer_norm saved x: the output's backward raises, and it was no piece any more
    q = p * 1
    p[:1] = 0  # (fuzz seed 241, program 5573)
    return q


def _empty_piece(lib, x):
    v = x[:0].sin()
    p = v.split(1, 0)[-1]  # an empty split piece (fuzz seed 291, program 3209)
    p.exp_()
    return v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("body", [_piece_of_input_transposed, _piece_of_intermediate, _piece_stored_into,
                                  _piece_whose_backward_raises, _empty_piece],
                         ids=lambda f: f.__name__.strip("_"))
def test_in_place_change_of_a_split_piece_raises_as_in_eager(backend, body):
    def program(lib, c, dtype):
        x = lib.rand(4, 3, dtype=dtype, generator=lib.Generator().manual_seed(0)).add(0.5).requires_grad_()
        return [c(lambda x: body(lib, x))(x.clone())]

    want = check(program, backend)
    assert want[0] == "raises" and "is a view and is being modified inplace" in want[2]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_returned_pieces_of_intermediates_are_views_with_eager_gradients(backend, dtype):
    # pieces come back as split's multi-output views of a hidden output: gradients as eager's,
    # and changing one in place raises as in eager
    def program(lib, c, dtype):
        x = lib.arange(1.0, 25.0, dtype=dtype).reshape(6, 4)[::2].requires_grad_()

        def f(x):
            v = x.log()
            a, b = v.chunk(2, 0)
            return a.t(), b * 2, v.split(1, 1)[-1], v.unbind(0)[1]

        outs = c(f)(x)
        loss = sum((o * lib.arange(o.numel(), dtype=dtype).reshape(o.shape)).sum() for o in outs)
        loss.backward()
        return [*outs, x.grad]

    check(program, backend, dtype)

    def mutate(lib, c, dtype):
        x = lib.arange(1.0, 13.0, dtype=dtype).reshape(4, 3).requires_grad_()
        return [c(lambda x: x.log().split(2, 0)[1].t())(x).mul_(2)]

    assert check(mutate, backend, dtype)[0] == "raises"


def test_returned_pieces_are_rebuilt_from_one_hidden_output():
    forward_outputs = []

    def forward_compiler(gm, example_inputs):
        forward_outputs.append([n.name for n in gm.graph.output_node().args[0]])
        return gm

    x = kiln.rand(4, 3).add(1).requires_grad_()
    a, b = aot_function(lambda x: x.log().chunk(2, 0), forward_compiler, lambda gm, _: gm)(x)
    # the two pieces, their base `log` (the hidden output) and the input log's backward reads
    assert forward_outputs == [["getitem", "getitem_1", "log", "primals_1"]]
    assert a._base is not None and a._base is b._base
    kiln.testing.assert_close(a, x.detach().log()[:2])
    with pytest.raises(RuntimeError, match="Output 1 of Split is a view and is being modified inplace"):
        b.add_(1)


# --- split pieces passed in, with or without their base (Note [Multi-output views of stand-ins]) --
PIECES = {
    "split": lambda v: v.split(1, -1)[-1],
    "chunk": lambda v: v.chunk(2, 0)[1],
    "split_with_sizes": lambda v: v.split_with_sizes([2, 3], -1)[1],
    "view_of_view": lambda v: v.split(2, 0)[1].t()[1:],  # a view of a view of a piece
}


def _write_view_of_piece(p, v):
    p[:1] = 0  # eager: "Output 0 of Slice is a view and is being modified inplace ..."
    return v * 2


def _write_piece(p, v):
    p.mul_(2)
    return v * 2


def _change_base_then_read_piece(p, v):
    v.mul_(2)  # allowed; the piece is stale after it: "... its base or another view of its base ..."
    return p * 3


def _write_piece_alone(p):
    p[:1].zero_()  # no synthetic base: p is the only input
    return p * 3


def _base_and_piece(lib, dtype, layout, piece, requires_grad=True):
    x = lib.arange(1.0, 41.0, dtype=dtype).reshape(8, 5) / 7
    x = (x[::2] if layout == "strided" else x[:4]).requires_grad_(requires_grad)
    v = x * 2 if layout == "contiguous" else (x * 2).t().t()  # the second a view of the product
    return x, v, PIECES[piece](v)


def _run(c, body, p, v):
    return c(body)(p) if body is _write_piece_alone else c(body)(p, v)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
@pytest.mark.parametrize("piece", list(PIECES))
@pytest.mark.parametrize("body", [_write_view_of_piece, _write_piece, _change_base_then_read_piece, _write_piece_alone],
                         ids=lambda f: f.__name__.strip("_"))
def test_split_piece_input_changed_in_place_raises_eagers_error(backend, layout, piece, body):
    # p and v passed together share memory and v is mutated, so they are traced through a synthetic
    # base, which rebuilt p as a plain strided view: the compiled forward ran where eager raises
    # (fuzz seed 181, program 28371); p alone was written back through a copy_ whose error named
    # split where eager's named the view written (slice)
    def program(lib, c, dtype):
        _, v, p = _base_and_piece(lib, dtype, layout, piece)
        return [_run(c, body, p, v)]

    want = check(program, backend)
    assert want[0] == "raises" and "This view is the output of a function that returns multiple views" in want[2]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", ["inputs_without_grad", "no_grad_mode"])
@pytest.mark.parametrize("piece", ["split", "view_of_view"])
@pytest.mark.parametrize("body", [_write_view_of_piece, _change_base_then_read_piece, _write_piece_alone],
                         ids=lambda f: f.__name__.strip("_"))
def test_split_piece_input_changed_in_place_without_autograd_runs(backend, grad, piece, body):
    # without autograd recording, eager lets a piece change in place: so does compiled code
    def program(lib, c, dtype):
        x, v, p = _base_and_piece(lib, dtype, "strided", piece, requires_grad=grad == "no_grad_mode")
        with lib.set_grad_enabled(grad != "no_grad_mode"):
            out = _run(c, body, p, v)
        return [out, v, p]

    assert check(program, backend)[0] != "raises"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("piece", list(PIECES))
def test_split_piece_input_read_with_its_base_has_eagers_gradients(backend, dtype, piece):
    def program(lib, c, dtype):
        x, v, p = _base_and_piece(lib, dtype, "strided", piece)
        a, b, q = c(lambda p, v: (p * p, v.sin(), p.t()))(p, v)
        weights = [lib.arange(t.numel(), dtype=dtype).reshape(t.shape) for t in (a, b)]
        ((a * weights[0]).sum() + (b * weights[1]).sum() + q.sum()).backward()
        return [a, b, q, x.grad]

    check(program, backend, dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("piece", list(PIECES))
def test_split_piece_written_in_a_resumed_frame_raises_eagers_error(backend, piece):
    # the fuzz program's shape: graph breaks (a data-dependent mask) hand the piece and its base to
    # resumed frames, and the write comes in one of them
    def program(lib, c, dtype):
        def f(x):
            v = x.floor()[lib.arange(8) % 2 == 0]
            p = PIECES[piece](v)
            w = v[lib.arange(4) % 2 == 0]
            p[:1] = 0
            return p, w, v[v > 0]

        x = (lib.arange(80.0, dtype=dtype).reshape(16, 5) / 6 - 6)[::2].requires_grad_()
        return list(c(f)(x * 1))

    want = check(program, backend)
    assert want[0] == "raises"


@pytest.mark.parametrize("body", [_write_view_of_piece, _write_piece, _change_base_then_read_piece],
                         ids=lambda f: f.__name__.strip("_"))
def test_aot_function_of_a_split_piece_and_its_base_raises_eagers_error(body):
    # aot_function without Dynamo: the trace itself raises, with eager's message for a piece input
    def program(lib, c, dtype):
        _, v, p = _base_and_piece(lib, dtype, "contiguous", "split")
        return [c(body)(p, v)]

    want = outcome(lambda: program(torch, lambda f: f, torch.float32))
    got = outcome(lambda: program(kiln, lambda f: aot_function(f, lambda gm, _: gm, lambda gm, _: gm), kiln.float32))
    assert want[0] == "raises" and got == want


@pytest.mark.parametrize("backend", BACKENDS)
def test_unbind_piece_input_changed_in_place_raises_as_eager(backend):
    # unbind's pieces are multi-output views (aten.unbind.int, UnbindBackward0) as PyTorch's: a
    # write to a view of one refuses, eagerly and compiled (it was a composite of selects)
    def program(lib, c):
        x = lib.arange(1.0, 21.0).reshape(4, 5).requires_grad_()
        v = x * 2
        out = c(_write_view_of_piece)(v.unbind(1)[2], v)
        out.sum().backward()
        return [out, v, x.grad]

    want = outcome(lambda: program(torch, lambda f: f))
    assert want[0] == "raises"
    assert outcome(lambda: program(kiln, lambda f: f)) == want
    assert outcome(lambda: program(kiln, lambda f: compiled(f, backend))) == want


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("pieces", ["split", "chunk", "unbind"])
def test_piece_of_an_intermediate_changed_in_place_raises_as_eager(backend, n, pieces):
    # a piece returned by a graph (a graph break before the mul_) is rebuilt from its base as the
    # multi-output view it is: also a split piece as large as its base (n = 1: the base was rebuilt
    # from the piece; fuzz seed 211, program 5597) and unbind's slices (selects before)
    def f(v0):
        v2 = v0 * 2
        v3 = {"split": lambda: v2.split(1, -1)[0], "chunk": lambda: v2.chunk(2, -1)[0],
              "unbind": lambda: v2.unbind(-1)[0]}[pieces]()
        v3.mul_(2)
        return v3 * 2

    def program(lib, c):
        x = lib.ones(n, requires_grad=True)
        c(f)(x).sum().backward()
        return [x.grad]

    want = outcome(lambda: program(torch, lambda g: g))
    assert want[0] == "raises"
    dynamo.reset()
    assert outcome(lambda: program(kiln, lambda g: compiled(g, backend))) == want


# --- a dead scatter under dynamic shapes (its meta function reads the symbolic index size) ------
@pytest.mark.parametrize("backend", BACKENDS)
def test_dead_scatter_with_bad_indices_is_dropped_under_dynamic_shapes(backend):
    dynamo.reset()

    def f(x1, x2):
        x2.scatter(0, x2.neg(), 1.5)  # out of range, dead
        return x1 + x1

    g = kiln.compile(f, backend=backend)
    for n in (3, 4):  # the second call recompiles with a dynamic size
        kiln.testing.assert_close(g(kiln.ones(n, 1), kiln.tensor([1, 2, 3, 4][:n])), kiln.full((n, 1), 2.0))
