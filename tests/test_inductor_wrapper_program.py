"""kiln._C._inductor.WrapperProgram: the wrapper that runs a compiled graph (Note [The wrapper
program] in python/csrc/python_wrapper_program.cc). Built by hand, its steps against numpy; built
by wrapper.py from real graphs, against its own Python rendering (the output code logs show and
output_code.py runs) executed over the same kernels and inputs, and against eager."""
import weakref

import numpy as np
import pytest

import kiln
from kiln._dynamo.debug_utils import rand_strided
from kiln._inductor import compile_fx

ind = kiln._C._inductor
kir = ind.kernel_ir
Slot = ind.Slot
aten = kiln.ops.aten


def add_kernel():
    """out[i] = a[i] + b[i] over 6 contiguous float32 elements, compiled."""
    value = kir.op("add", kir.load(1, 0, [1], 0), kir.load(2, 0, [1], 0))
    ir = kir.Kernel("k_add", [("out_ptr0", "f32"), ("in_ptr1", "f32"), ("in_ptr2", "f32")], [6],
                    [kir.Loop(1, [kir.store(0, 0, [1], 0, value)])])
    return ind.compile(ir)


def test_steps_run_in_order_over_slots():
    a, b = kiln.randn(2, 3), kiln.randn(2, 3)
    p = ind.WrapperProgram(6, [0, 1])
    p.empty(2, [2, 3], [3, 1], kiln.float32)
    p.kernel(add_kernel(), [2, 0, 1])
    p.reinterpret(3, 2, [3, 2], [1, 3], None)                    # the sum, transposed
    p.extern(aten.mul.Tensor._op, [Slot(3), Slot(3)], {}, [4], False)
    p.extern(aten.sum.dim_IntList._op, [Slot(4), [1]], {"keepdim": True}, [5], False)
    p.release([2, 3])
    p.ret([Slot(4), Slot(5), 7, None])
    args = [a, b]
    out = p(args)
    assert args == []  # the boxed convention: inputs handed over
    s = (a.numpy() + b.numpy()).T
    assert len(out) == 4 and out[2:] == (7, None)
    np.testing.assert_allclose(out[0].numpy(), s * s, rtol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), (s * s).sum(1, keepdims=True), rtol=1e-5)
    assert len(p) == 7


def test_list_and_tuple_arguments_hold_slots_and_multi_output_results_unpack():
    x = kiln.arange(12.).reshape(3, 4)
    p = ind.WrapperProgram(5, [0])
    p.extern(aten.split.Tensor._op, [Slot(0), 1, 0], {}, [1, -1, 2], True)  # the middle piece dropped
    p.extern(aten.cat.default._op, [[Slot(2), Slot(1)], 0], {}, [3], False)
    p.extern(aten.stack.default._op, [(Slot(1), Slot(2))], {"dim": 1}, [4], False)
    p.ret([Slot(3), Slot(4)])
    cat, stack = p([x])
    xs = np.arange(12.).reshape(3, 4)
    np.testing.assert_array_equal(cat.numpy(), np.concatenate([xs[2:], xs[:1]]))
    np.testing.assert_array_equal(stack.numpy(), np.stack([xs[:1], xs[2:]], 1))


def test_inputs_and_released_slots_drop_their_references():
    alive = []
    p = ind.WrapperProgram(3, [0])
    p.extern(aten.neg.default._op, [Slot(0)], {}, [1], False)
    p.release([0])  # the input's last use: freed here, before the next op runs
    p.extern(lambda: alive.append(ref() is not None), [], {}, [2], False)
    p.ret([Slot(1)])
    args = [kiln.randn(3)]
    ref = weakref.ref(args[0])
    (out,) = p(args)
    assert alive == [False] and ref() is None and args == []


def test_static_buffers_are_made_once_and_kept():
    p = ind.WrapperProgram(2, [0])
    p.static(1, [4], [1], kiln.float32)
    p.extern(aten.copy_.default._op, [Slot(1), Slot(0)], {}, [], False)
    p.ret([Slot(1)])
    first = p([kiln.ones(4)])[0]
    second = p([kiln.full((4,), 2.0)])[0]
    assert first.data_ptr() == second.data_ptr()
    assert second.tolist() == [2.0] * 4


def test_as_declared_copies_only_a_result_in_another_layout():
    calls = []

    def copy(t, size, stride):
        calls.append((tuple(t.stride()), size, stride))
        out = kiln.empty_strided(size, stride, dtype=t.dtype)
        return out.copy_(t)

    x = kiln.randn(2, 3)
    p = ind.WrapperProgram(3, [0])
    p.extern(aten.clone.default._op, [Slot(0)], {}, [1], False)
    p.as_declared(1, [2, 3], [1, 2], copy)  # declared column-major
    p.extern(aten.clone.default._op, [Slot(0)], {}, [2], False)
    p.as_declared(2, [2, 3], [3, 1], copy)  # declared as it comes: no copy
    p.ret([Slot(1), Slot(2)])
    a, b = p([x])
    assert calls == [((3, 1), (2, 3), (1, 2))]
    assert a.stride() == (1, 2) and b.stride() == (3, 1)
    np.testing.assert_array_equal(a.numpy(), x.numpy())


def test_buffers_made_under_inference_mode_are_inference_tensors():
    # as empty_strided through the dispatcher makes them (Note [Inference tensors]): a compiled
    # function's outputs under inference_mode are inference tensors, as eager's are, and an
    # in-place change of one outside it raises as eager's does
    p = ind.WrapperProgram(2, [0])
    p.empty(1, [3], [1], kiln.float32)
    p.ret([Slot(1)])
    with kiln.inference_mode():
        assert p([kiln.ones(3)])[0].is_inference()
    assert not p([kiln.ones(3)])[0].is_inference()

    def f(x):
        return (x * 2 + 1).relu(), x.sum(0) * 3

    compiled, x = kiln.compile(f), kiln.randn(8, 8)
    with kiln.inference_mode():
        got, want = compiled(x), f(x)
    assert [t.is_inference() for t in got] == [t.is_inference() for t in want] == [True, True]
    for t in (got[0], want[0]):
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            t.add_(1)


def test_bad_programs_raise_typed_errors():
    with pytest.raises(IndexError, match=r"\[inductor.WrapperProgram\] a view names slot 5, outside \[0, 2\)"):
        ind.WrapperProgram(2, [0]).reinterpret(5, 0, [1], [1], None)
    with pytest.raises(IndexError, match="an argument names slot 9"):
        ind.WrapperProgram(2, [0]).extern(aten.neg.default._op, [[Slot(9)]], {}, [1], False)
    with pytest.raises(TypeError, match="a Slot inside a dict argument"):
        ind.WrapperProgram(2, [0]).extern(aten.neg.default._op, [{"x": Slot(0)}], {}, [1], False)
    with pytest.raises(TypeError, match="dtype must be a kiln.dtype, got 'float32'"):
        ind.WrapperProgram(2, [0]).empty(1, [1], [1], "float32")
    with pytest.raises(ValueError, match="k_add takes 3 buffers, got 2"):
        ind.WrapperProgram(3, []).kernel(add_kernel(), [0, 1])
    with pytest.raises(ValueError, match="empty: 2 sizes but 1 strides"):
        ind.WrapperProgram(2, []).empty(1, [2, 2], [1], kiln.float32)
    with pytest.raises(TypeError, match="an extern op must be callable"):
        ind.WrapperProgram(2, []).extern(3, [], {}, [], False)

    p = ind.WrapperProgram(3, [0])
    p.extern(aten.neg.default._op, [Slot(1)], {}, [2], False)
    with pytest.raises(TypeError, match="expected 1 inputs, got 2"):
        p([kiln.ones(1), kiln.ones(1)])
    with pytest.raises(RuntimeError, match="slot 1 is read before it is written"):
        p([kiln.ones(1)])

    q = ind.WrapperProgram(2, [0])
    q.reinterpret(1, 0, [4], [1], 0)
    with pytest.raises(RuntimeError, match=r"sizes \[4\], strides \[1\] and offset 0 do not fit the storage"):
        q([kiln.ones(3)])
    r = ind.WrapperProgram(2, [0])
    r.extern(aten.split.Tensor._op, [Slot(0), 1], {}, [1], True)
    with pytest.raises(RuntimeError, match="expected 1 results"):
        r([kiln.ones(3)])


# --- programs wrapper.py builds, against their rendering ------------------------------------------
def _rendered_call(graph):
    """The Python rendering of graph's wrapper, exec'd over its compiled kernels (as output_code.py
    runs it)."""
    namespace = {"kiln": kiln, "empty_strided": compile_fx._empty_strided,
                 "reinterpret_tensor": compile_fx._reinterpret_tensor, "as_declared": compile_fx._as_declared}
    for kernel in graph.kernels:
        namespace[kernel.name] = kernel.compiled
    exec(compile(graph.wrapper_code(), "<rendered wrapper>", "exec"), namespace)
    return namespace["call"]


def _inputs(graph, seed):
    """Inputs laid out as the graph's placeholders (strides and storage offset): random floats,
    integers 0 (in bounds wherever they index)."""
    kiln.manual_seed(seed)
    out = []
    for node in graph.gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta["val"]
        if isinstance(val, kiln.Tensor):
            span = 1 + sum((n - 1) * st for n, st in zip(val.shape, val.stride()))
            base = rand_strided((val.storage_offset() + span,), (1,), val.dtype) if val.dtype.is_floating_point \
                else kiln.zeros(val.storage_offset() + span, dtype=val.dtype)
            out.append(base.as_strided(val.shape, val.stride(), val.storage_offset()))
        else:
            out.append(val)
    return out


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, kiln.Tensor):
        assert (a.shape, a.stride(), a.dtype) == (b.shape, b.stride(), b.dtype)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    else:
        assert a == b


def programs():
    def views_and_externs(x, w):
        h = (x @ w).relu()
        a, b = h.split(2, dim=1)
        return (a * 2).t().contiguous(), b.sum(0), h.transpose(0, 1) + 1, h[1:, 2:]  # a view at an offset

    def reductions_and_reuse(x):
        y = x.softmax(-1)
        z = (y * x).sum(-1, keepdim=True)
        return (x - z).abs().mean(), y[:, ::2]

    def training(x, w):
        return ((x @ w).tanh() * x[:, :1]).sum()

    x, w = kiln.randn(6, 5), kiln.randn(5, 4)
    return [("views_and_externs", views_and_externs, (x, w)), ("reductions_and_reuse", reductions_and_reuse, (x,)),
            ("training", training, (x, w.requires_grad_()))]


@pytest.mark.parametrize("name,fn,args", programs(), ids=[p[0] for p in programs()])
def test_built_programs_run_as_their_rendering_and_as_eager(name, fn, args):
    graphs = []
    compile_fx.graph_sinks.append(graphs)
    try:
        compiled = kiln.compile(fn, fullgraph=True)
        got = compiled(*args)
        if name == "training":
            got.backward()
    finally:
        compile_fx.graph_sinks.remove(graphs)
    expected = fn(*args)
    for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
        np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert graphs and all(g.kernels for g in graphs)
    for graph in graphs:
        program = graph.wrapper_program(compile_fx._as_declared)
        rendered = _rendered_call(graph)
        for seed in (0, 1):
            ours, theirs = program(_inputs(graph, seed)), rendered(_inputs(graph, seed))
            assert len(ours) == len(theirs)
            for a, b in zip(ours, theirs):
                _same(a, b)
