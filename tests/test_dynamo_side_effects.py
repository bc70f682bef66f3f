"""Attribute writes inside compiled code (issue 16): `self.src_mask = mask`, `self.last_loss = loss`,
`self.calls += 1` are recorded during capture and replayed by the generated code after the graph
(kiln/_dynamo/side_effects.py). Oracle: the same program run eagerly on a twin module; graph
counts from CompileCounter."""

import pytest

import kiln
import kiln._dynamo as dynamo
import kiln.nn as nn
from kiln._dynamo.testing import CompileCounter, CompileCounterWithBackend
from dynamo_util import close, fresh_dynamo  # noqa: F401 (fresh_dynamo is autouse)


class MaskedLM(nn.Module):
    """The Transformer-tutorial idiom: a mask and the last loss kept on the module, a call counter
    and a flag set in forward."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0
        self.flag = False
        self.src_mask = None

    def forward(self, x):
        if self.src_mask is None or self.src_mask.shape != x.shape:
            self.src_mask = x > 0
        y = self.fc(x) * self.src_mask
        loss = (y * y).sum()
        self.last_loss = loss
        self.calls = self.calls + 1
        self.flag = True
        return loss


def twins():
    kiln.manual_seed(0)
    a = MaskedLM()
    b = MaskedLM()
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_module_attribute_writes_match_eager(backend):
    eager, compiled_mod = twins()
    cnt = CompileCounterWithBackend(backend)
    compiled = kiln.compile(compiled_mod, backend=cnt)
    x = kiln.randn(3, 4)
    for _ in range(2):
        ref = eager(x)
        out = compiled(x)
        close(out, ref)
        ref.backward()
        out.backward()
    assert compiled_mod.calls == eager.calls == 2 and compiled_mod.flag is True
    close(compiled_mod.src_mask, eager.src_mask)
    close(compiled_mod.last_loss, eager.last_loss)
    assert isinstance(compiled_mod.last_loss, kiln.Tensor)
    close(compiled_mod.fc.weight.grad, eager.fc.weight.grad)
    close(compiled_mod.fc.bias.grad, eager.fc.bias.grad)
    assert cnt.frame_count >= 1 and "src_mask" not in compiled_mod._buffers


def test_write_is_one_graph_and_reads_see_it():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 1.0

        def forward(self, x):
            self.cache = x * 2          # a new tensor attribute
            self.scale = 3.0            # a changed float
            return self.cache + self.scale  # both read back inside the same trace

    cnt = CompileCounter()
    m = M()
    out = kiln.compile(m, backend=cnt)(kiln.ones(2))
    close(out, kiln.full((2,), 5.0))
    close(m.cache, kiln.full((2,), 2.0))
    assert m.scale == 3.0
    assert cnt.frame_count == 1
    assert dynamo.explain(M())(kiln.ones(2)).graph_break_count == 0


def test_value_read_before_the_write_is_the_old_one():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", kiln.zeros(2))

        def forward(self, x):
            old = self.state
            self.state = x + 1
            return old  # generated code must read it before replaying the write

    m = M()
    out = kiln.compile(m, backend=CompileCounter())(kiln.ones(2))
    close(out, kiln.zeros(2))
    close(m.state, kiln.full((2,), 2.0))
    assert "state" in m._buffers  # Module.__setattr__ ran: a buffer stays a buffer


def test_write_before_a_graph_break_is_visible_to_the_breaking_call():
    seen = []

    class Obj:
        pass

    @dynamo.disable
    def report(o):
        seen.append(o.value.clone())

    def f(o, x):
        o.value = x * 3
        report(o)  # a graph break: runs eagerly, reading o.value
        o.count = 7
        return o.value + 1

    cnt = CompileCounter()
    o = Obj()
    out = kiln.compile(f, backend=cnt)(o, kiln.ones(2))
    close(out, kiln.full((2,), 4.0))
    close(seen[0], kiln.full((2,), 3.0))
    assert o.count == 7
    assert cnt.frame_count == 2


def test_write_through_property_setter_still_correct():
    class P:
        def __init__(self):
            self._v = 0

        @property
        def v(self):
            return self._v

        @v.setter
        def v(self, value):
            self._v = value + 1

    def f(p, x):
        p.v = 5
        return x * 2

    p = P()
    out = kiln.compile(f, backend=CompileCounter())(p, kiln.ones(2))
    close(out, kiln.full((2,), 2.0))
    assert p._v == 6  # the setter ran (the write was a graph break, made in Python)


def test_user_object_write_of_list_of_tensors():
    class State:
        pass

    def f(s, x):
        s.history = [x + 1, x * 2]
        s.note = "seen"
        return x.sum()

    s = State()
    cnt = CompileCounter()
    out = kiln.compile(f, backend=cnt)(s, kiln.ones(3))
    close(out, kiln.tensor(3.0))
    close(s.history[0], kiln.full((3,), 2.0))
    close(s.history[1], kiln.full((3,), 2.0))
    assert s.note == "seen" and cnt.frame_count == 1
    assert dynamo.explain(f)(State(), kiln.ones(3)).graph_break_count == 0


def test_write_in_inlined_submodule_forward():
    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x)
            self.last = y
            return y

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x).relu().sum()

    kiln.manual_seed(1)
    m = Outer()
    x = kiln.randn(2, 3)
    ref = m(x)
    ref_last = m.inner.last
    del m.inner.last
    cnt = CompileCounter()
    out = kiln.compile(m, backend=cnt)(x)
    close(out, ref)
    close(m.inner.last, ref_last)
    assert cnt.frame_count == 1


class TutorialLM(nn.Module):
    """PyTorch's Transformer tutorial: the causal mask is cached on the module and rebuilt when the
    sequence length changes (len(src) of a dimension that becomes dynamic on the third call)."""

    def __init__(self):
        super().__init__()
        self.src_mask = None
        self.lin = nn.Linear(4, 4)

    @staticmethod
    def square_subsequent_mask(sz):
        mask = (kiln.triu(kiln.ones(sz, sz)) == 1).transpose(0, 1)
        return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, float(0.0))

    def forward(self, src):
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            self.src_mask = self.square_subsequent_mask(len(src))
        att = kiln.softmax(self.lin(src) @ src.t() + self.src_mask, -1)
        return (att @ src).sum()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_tutorial_mask_cache_matches_eager(backend):
    kiln.manual_seed(0)
    eager, mod = TutorialLM(), TutorialLM()
    mod.load_state_dict(eager.state_dict())
    compiled = kiln.compile(mod, backend=CompileCounterWithBackend(backend))
    for n in (5, 5, 6, 7):
        x = kiln.randn(n, 4)
        ref, out = eager(x), compiled(x)
        close(out, ref)
        ref.backward()
        out.backward()
        close(mod.src_mask, eager.src_mask)
    close(mod.lin.weight.grad, eager.lin.weight.grad)
    close(mod.lin.bias.grad, eager.lin.bias.grad)


def test_len_of_dynamic_first_dimension():
    cnt = CompileCounter()
    f = kiln.compile(lambda x: x * len(x), backend=cnt)
    for n in (2, 3, 4):
        close(f(kiln.ones(n, 2)), kiln.full((n, 2), float(n)))
    assert cnt.frame_count == 2  # static, then one dynamic graph for every later length
