"""kiln.nn.RNN / LSTM / GRU, their cells and kiln.nn.utils.rnn against PyTorch 2.13 (the oracle).

Each case builds the module in both libraries from one constructor, checks reprs, parameter names,
shapes and order, copies torch's weights into kiln through load_state_dict (numpy copies), then runs
both on the same input (and h0/c0) and compares outputs, final states, and the gradients of a fixed
weighted sum of all results with respect to the input, the initial states and every parameter.
float64 demands agreement to rounding; one float32 run per family checks the float path.
"""

import warnings

import numpy as np
import pytest

import kiln
import kiln._dynamo
from kiln._dynamo.testing import CompileCounterWithBackend
from conftest import requires_torch, torch

pytestmark = [requires_torch, pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")]

RNG = np.random.default_rng(0)
TIGHT = dict(rtol=1e-10, atol=1e-12)
FLOAT = dict(rtol=2e-5, atol=2e-6)


def arr(*shape, dtype=np.float64):
    return RNG.uniform(-1.0, 1.0, size=shape).astype(dtype)


def build(ctor, dtype):
    """(kiln module, torch module) from one constructor, torch's weights loaded into kiln."""
    torch.manual_seed(0)
    tm = ctor(torch.nn)
    km = ctor(kiln.nn)
    if dtype == "float64":
        tm, km = tm.double(), km.double()
    assert repr(km) == repr(tm)
    t_names = [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert [(n, tuple(p.shape)) for n, p in km.named_parameters()] == t_names
    if hasattr(tm, "_flat_weights_names"):
        assert km._flat_weights_names == tm._flat_weights_names
        assert [[tuple(w.shape) for w in ws] for ws in km.all_weights] == \
               [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
    result = km.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    return km, tm


def leaf(lib, a):
    return lib.tensor(a).requires_grad_(True)


def flatten(out):
    """A module's result as a flat list of tensors ((output, (h, c)) -> [output, h, c])."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    return [out]


def close(k, t, tol, what):
    assert k is not None, f"{what}: kiln has no value"
    np.testing.assert_allclose(np.array(k.detach().tolist()), t.detach().numpy(), err_msg=what, **tol)
    assert tuple(k.shape) == tuple(t.shape), f"{what}: shape {tuple(k.shape)} != {tuple(t.shape)}"


def compare(km, tm, inputs, dtype="float64", call=None):
    """Runs km(*inputs) and tm(*inputs) (numpy arrays, tuples of them for LSTM states; None stays None)
    and compares every result and the gradients of a weighted sum of them."""
    tol = TIGHT if dtype == "float64" else FLOAT
    np_dtype = np.float64 if dtype == "float64" else np.float32
    call = call or (lambda m, lib, *args: m(*args))

    def make(lib):
        def conv(a):
            if a is None:
                return None
            if isinstance(a, tuple):
                return tuple(conv(x) for x in a)
            return leaf(lib, a.astype(np_dtype))
        return [conv(a) for a in inputs]

    k_in, t_in = make(kiln), make(torch)
    k_out, t_out = flatten(call(km, kiln, *k_in)), flatten(call(tm, torch, *t_in))
    assert len(k_out) == len(t_out)
    k_loss, t_loss = 0, 0
    for i, (k, t) in enumerate(zip(k_out, t_out)):
        close(k, t, tol, f"result {i}")
        w = arr(*t.shape, dtype=np_dtype)
        k_loss = k_loss + (k * kiln.tensor(w)).sum()
        t_loss = t_loss + (t * torch.tensor(w)).sum()
    k_loss.backward()
    t_loss.backward()
    for i, (k, t) in enumerate(zip(flatten(k_in), flatten(t_in))):
        if t is not None:
            close(k.grad, t.grad, tol, f"grad of input {i}")
    for (name, kp), (_, tp) in zip(km.named_parameters(), tm.named_parameters()):
        close(kp.grad, tp.grad, tol, f"grad of {name}")


# --- RNN / LSTM / GRU over their options ----------------------------------------------------------
H_IN, HID, PROJ, L, N = 3, 5, 2, 4, 3

CONFIGS = [  # (id, kwargs, batch_first, unbatched, with h0)
    ("1layer", {}, False, False, False),
    ("1layer-h0", {}, False, False, True),
    ("2layer-h0", {"num_layers": 2}, False, False, True),
    ("bidir", {"bidirectional": True}, False, False, True),
    ("2layer-bidir-batchfirst", {"num_layers": 2, "bidirectional": True, "batch_first": True}, True, False, True),
    ("nobias-batchfirst", {"bias": False, "batch_first": True}, True, False, False),
    ("unbatched", {"num_layers": 2}, False, True, False),
    ("unbatched-h0-bidir", {"bidirectional": True}, False, True, True),
]

FAMILIES = {  # name -> (constructor(nn, **kw), number of states, state sizes (h, c))
    "RNN-tanh": (lambda nn, **kw: nn.RNN(H_IN, HID, **kw), (HID,)),
    "RNN-relu": (lambda nn, **kw: nn.RNN(H_IN, HID, nonlinearity="relu", **kw), (HID,)),
    "LSTM": (lambda nn, **kw: nn.LSTM(H_IN, HID, **kw), (HID, HID)),
    "LSTM-proj": (lambda nn, **kw: nn.LSTM(H_IN, HID, proj_size=PROJ, **kw), (PROJ, HID)),
    "GRU": (lambda nn, **kw: nn.GRU(H_IN, HID, **kw), (HID,)),
}


def _inputs(kwargs, batch_first, unbatched, with_h0, sizes):
    x = arr(L, H_IN) if unbatched else (arr(N, L, H_IN) if batch_first else arr(L, N, H_IN))
    if not with_h0:
        return [x]
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    states = tuple(arr(layers, s) if unbatched else arr(layers, N, s) for s in sizes)
    return [x, states if len(states) == 2 else states[0]]


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_rnn_float64(family, config):
    ctor, sizes = FAMILIES[family]
    _, kwargs, batch_first, unbatched, with_h0 = config
    km, tm = build(lambda nn: ctor(nn, **kwargs), "float64")
    compare(km, tm, _inputs(kwargs, batch_first, unbatched, with_h0, sizes))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_rnn_float32(family):
    ctor, sizes = FAMILIES[family]
    kwargs = {"num_layers": 2, "bidirectional": True}
    km, tm = build(lambda nn: ctor(nn, **kwargs), "float32")
    compare(km, tm, _inputs(kwargs, False, False, True, sizes), dtype="float32")


def test_dropout_between_layers():
    km, tm = build(lambda nn: nn.LSTM(H_IN, HID, num_layers=3, dropout=0.5), "float64")
    x = arr(L, N, H_IN)
    out, (h, c) = km(kiln.tensor(x))
    assert tuple(out.shape) == (L, N, HID) and tuple(h.shape) == tuple(c.shape) == (3, N, HID)
    km.eval()
    tm.eval()
    first = km(kiln.tensor(x))[0].tolist()
    assert km(kiln.tensor(x))[0].tolist() == first
    compare(km, tm, [x])


def test_dropout_warning_and_constructor_errors():
    for nn in (torch.nn, kiln.nn):
        with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
            nn.GRU(3, 4, dropout=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.nn.GRU(3, 4, num_layers=2, dropout=0.2)
    bad = [
        (lambda nn: nn.RNN(3, 4, nonlinearity="sigmoid")), (lambda nn: nn.LSTM(3, 4, proj_size=4)),
        (lambda nn: nn.LSTM(3, 4, proj_size=-1)), (lambda nn: nn.GRU(3, 4, proj_size=2)),
        (lambda nn: nn.RNN(3, 4, proj_size=2)), (lambda nn: nn.LSTM(3, 4, dropout=1.5)),
        (lambda nn: nn.LSTM(3, 4, dropout=True)), (lambda nn: nn.LSTM(0, 4)), (lambda nn: nn.LSTM(3, 0)),
        (lambda nn: nn.LSTM(3, 4, num_layers=0)), (lambda nn: nn.LSTM(3.0, 4)), (lambda nn: nn.LSTM(3, 4.0)),
        (lambda nn: nn.LSTM(3, 4, bias=1)), (lambda nn: nn.LSTM(3, 4, batch_first=None)),
    ]
    for ctor in bad:
        with pytest.raises(Exception) as want:
            ctor(torch.nn)
        with pytest.raises(type(want.value)) as got:
            ctor(kiln.nn)
        assert str(got.value) == str(want.value)


def test_defaults_and_api():
    m = kiln.nn.RNN(3, 4, 2, "relu", False, True, 0.0, True)  # positional, as torch's overloads
    t = torch.nn.RNN(3, 4, 2, "relu", False, True, 0.0, True)
    assert repr(m) == repr(t) and m.nonlinearity == "relu"
    lstm = kiln.nn.LSTM(3, 4, proj_size=2, dtype=kiln.float64)
    assert lstm.weight_hr_l0.dtype == kiln.float64 and lstm.proj_size == 2 and lstm.mode == "LSTM"
    assert lstm.all_weights[0][0] is lstm.weight_ih_l0 and lstm._flat_weights[4] is lstm.weight_hr_l0
    lstm.flatten_parameters()
    bound = 1 / 4 ** 0.5
    for p in lstm.parameters():
        assert p.abs().max().item() <= bound
    lstm.float()
    assert lstm._flat_weights[0] is lstm.weight_ih_l0 and lstm._flat_weights[0].dtype == kiln.float32
    cell = kiln.nn.GRUCell(3, 4)
    assert [n for n, _ in cell.named_parameters()] == ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]


# --- cells ---------------------------------------------------------------------------------------
CELLS = {
    "RNNCell-tanh": (lambda nn, **kw: nn.RNNCell(H_IN, HID, **kw), 1),
    "RNNCell-relu": (lambda nn, **kw: nn.RNNCell(H_IN, HID, nonlinearity="relu", **kw), 1),
    "LSTMCell": (lambda nn, **kw: nn.LSTMCell(H_IN, HID, **kw), 2),
    "GRUCell": (lambda nn, **kw: nn.GRUCell(H_IN, HID, **kw), 1),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("cell", list(CELLS))
def test_cells(cell, dtype):
    ctor, nstates = CELLS[cell]
    for kwargs, batched, with_h in [({}, True, True), ({}, True, False), ({"bias": False}, False, True),
                                    ({}, False, False)]:
        km, tm = build(lambda nn: ctor(nn, **kwargs), dtype)
        x = arr(N, H_IN) if batched else arr(H_IN)
        inputs = [x]
        if with_h:
            states = tuple(arr(N, HID) if batched else arr(HID) for _ in range(nstates))
            inputs.append(states if nstates == 2 else states[0])
        compare(km, tm, inputs, dtype)


def test_cell_unrolled_matches_module():
    """An LSTMCell unrolled by hand gives nn.LSTM's result with the same weights (both libraries agree)."""
    km, tm = build(lambda nn: nn.LSTMCell(H_IN, HID), "float64")

    def unroll(cell, lib, x):
        h = c = lib.zeros(x.shape[1], HID, dtype=x.dtype)
        outs = []
        for t in range(x.shape[0]):
            h, c = cell(x[t], (h, c))
            outs.append(h)
        return lib.stack(outs, 0), c

    compare(km, tm, [arr(L, N, H_IN)], call=unroll)


# --- packed sequences ----------------------------------------------------------------------------
LENGTHS = [3, 5, 1, 5, 2]  # unsorted, with a tie


@pytest.mark.parametrize("family,kwargs", [
    ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM-proj", {"bidirectional": True}),
    ("GRU", {"num_layers": 2}),
    ("RNN-tanh", {"bidirectional": True, "batch_first": True}),
], ids=["LSTM-2layer-bidir", "LSTM-proj-bidir", "GRU-2layer", "RNN-bidir-batchfirst"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["zeros", "h0"])
def test_packed(family, kwargs, with_h0):
    ctor, sizes = FAMILIES[family]
    km, tm = build(lambda nn: ctor(nn, **kwargs), "float64")
    batch_first = kwargs.get("batch_first", False)
    T, B = max(LENGTHS), len(LENGTHS)
    inputs = [arr(B, T, H_IN) if batch_first else arr(T, B, H_IN)]
    if with_h0:
        layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        states = tuple(arr(layers, B, s) for s in sizes)
        inputs.append(states if len(states) == 2 else states[0])

    def call(m, lib, x, *h):
        rnn = lib.nn.utils.rnn
        packed = rnn.pack_padded_sequence(x, lib.tensor(LENGTHS), batch_first=batch_first, enforce_sorted=False)
        assert packed.batch_sizes.tolist() == [5, 4, 3, 2, 2]
        out, hidden = m(packed, *h)
        assert isinstance(out, rnn.PackedSequence)
        padded, lengths = rnn.pad_packed_sequence(out, batch_first=batch_first, padding_value=0.25,
                                                  total_length=T + 1)
        assert lengths.tolist() == LENGTHS
        return padded, hidden, out.data

    compare(km, tm, inputs, call=call)


def test_pack_pad_utilities():
    rnn_k, rnn_t = kiln.nn.utils.rnn, torch.nn.utils.rnn
    seqs = [arr(3, 2), arr(5, 2), arr(1, 2)]
    for batch_first in (False, True):
        for side in ("right", "left"):
            got = rnn_k.pad_sequence([kiln.tensor(s) for s in seqs], batch_first, -1.0, side)
            want = rnn_t.pad_sequence([torch.tensor(s) for s in seqs], batch_first, -1.0, side)
            close(got, want, TIGHT, f"pad_sequence {batch_first} {side}")
    k_packed = rnn_k.pack_sequence([kiln.tensor(s) for s in seqs], enforce_sorted=False)
    t_packed = rnn_t.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    for k, t in zip(k_packed, t_packed):
        close(k, t, TIGHT, "pack_sequence")
    for k, t in zip(rnn_k.unpack_sequence(k_packed), rnn_t.unpack_sequence(t_packed)):
        close(k, t, TIGHT, "unpack_sequence")
    x = arr(4, 3, 2)
    sorted_packed = rnn_k.pack_padded_sequence(kiln.tensor(x), [4, 2, 1])
    assert sorted_packed.sorted_indices is None and sorted_packed.unsorted_indices is None
    padded, lengths = rnn_k.pad_packed_sequence(sorted_packed)
    assert lengths.dtype == kiln.int64 and lengths.tolist() == [4, 2, 1]
    bad = [
        ("unsorted", lambda lib: lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(x), [2, 3, 1])),
        ("zero length", lambda lib: lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(x), [3, 2, 0])),
        ("wrong count", lambda lib: lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(x), [3, 2])),
        ("total_length", lambda lib: lib.nn.utils.rnn.pad_packed_sequence(
            lib.nn.utils.rnn.pack_padded_sequence(lib.tensor(x), [3, 2, 1]), total_length=2)),
        ("empty list", lambda lib: lib.nn.utils.rnn.pad_sequence([])),
        ("padding side", lambda lib: lib.nn.utils.rnn.pad_sequence([lib.ones(2)], padding_side="mid")),
    ]
    for what, f in bad:
        with pytest.raises(Exception) as want:
            f(torch)
        with pytest.raises(type(want.value)) as got:
            f(kiln)
        assert str(got.value) == str(want.value), what


# --- bad input -----------------------------------------------------------------------------------
BAD_CALLS = [
    ("LSTM input size", lambda nn: nn.LSTM(3, 4), lambda lib: (lib.randn(5, 2, 6),)),
    ("LSTM 4-D input", lambda nn: nn.LSTM(3, 4), lambda lib: (lib.randn(5, 2, 3, 1),)),
    ("LSTM h0 batch", lambda nn: nn.LSTM(3, 4),
     lambda lib: (lib.randn(5, 2, 3), (lib.randn(1, 3, 4), lib.randn(1, 2, 4)))),
    ("LSTM c0 size", lambda nn: nn.LSTM(3, 4),
     lambda lib: (lib.randn(5, 2, 3), (lib.randn(1, 2, 4), lib.randn(1, 2, 5)))),
    ("LSTM proj h0 size", lambda nn: nn.LSTM(3, 4, proj_size=2),
     lambda lib: (lib.randn(5, 2, 3), (lib.randn(1, 2, 4), lib.randn(1, 2, 4)))),
    ("LSTM h0 dims", lambda nn: nn.LSTM(3, 4), lambda lib: (lib.randn(5, 2, 3), (lib.randn(2, 4), lib.randn(1, 2, 4)))),
    ("LSTM unbatched h0 dims", lambda nn: nn.LSTM(3, 4),
     lambda lib: (lib.randn(5, 3), (lib.randn(1, 1, 4), lib.randn(1, 4)))),
    ("LSTM dtype", lambda nn: nn.LSTM(3, 4), lambda lib: (lib.randn(5, 2, 3, dtype=lib.float64),)),
    ("GRU h0 batch", lambda nn: nn.GRU(3, 4), lambda lib: (lib.randn(5, 2, 3), lib.randn(1, 3, 4))),
    ("GRU h0 layers", lambda nn: nn.GRU(3, 4, num_layers=2), lambda lib: (lib.randn(5, 2, 3), lib.randn(1, 2, 4))),
    ("GRU 1-D input", lambda nn: nn.GRU(3, 4), lambda lib: (lib.randn(3),)),
    ("RNN h0 dims", lambda nn: nn.RNN(3, 4), lambda lib: (lib.randn(5, 2, 3), lib.randn(2, 4))),
    ("RNN unbatched h0 dims", lambda nn: nn.RNN(3, 4), lambda lib: (lib.randn(5, 3), lib.randn(1, 1, 4))),
    ("RNN bidir h0", lambda nn: nn.RNN(3, 4, bidirectional=True), lambda lib: (lib.randn(5, 2, 3), lib.randn(1, 2, 4))),
    ("LSTMCell input size", lambda nn: nn.LSTMCell(3, 4), lambda lib: (lib.randn(2, 5),)),
    ("LSTMCell h batch", lambda nn: nn.LSTMCell(3, 4),
     lambda lib: (lib.randn(2, 3), (lib.randn(3, 4), lib.randn(2, 4)))),
    ("LSTMCell c size", lambda nn: nn.LSTMCell(3, 4),
     lambda lib: (lib.randn(2, 3), (lib.randn(2, 4), lib.randn(2, 5)))),
    ("LSTMCell 3-D hx", lambda nn: nn.LSTMCell(3, 4),
     lambda lib: (lib.randn(2, 3), (lib.randn(1, 2, 4), lib.randn(2, 4)))),
    ("GRUCell h size", lambda nn: nn.GRUCell(3, 4), lambda lib: (lib.randn(2, 3), lib.randn(2, 5))),
    ("GRUCell 3-D input", lambda nn: nn.GRUCell(3, 4), lambda lib: (lib.randn(2, 3, 3),)),
    ("RNNCell h batch", lambda nn: nn.RNNCell(3, 4), lambda lib: (lib.randn(2, 3), lib.randn(3, 4))),
    ("RNNCell 3-D h", lambda nn: nn.RNNCell(3, 4), lambda lib: (lib.randn(2, 3), lib.randn(1, 2, 4))),
    ("RNNCell nonlinearity", lambda nn: nn.RNNCell(3, 4, nonlinearity="foo"), lambda lib: (lib.randn(2, 3),)),
]


@pytest.mark.parametrize("what,ctor,args", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input(what, ctor, args):
    with pytest.raises(Exception) as want:
        ctor(torch.nn)(*args(torch))
    with pytest.raises(type(want.value)) as got:
        ctor(kiln.nn)(*args(kiln))
    assert str(got.value).replace("torch.", "kiln.") == str(want.value).replace("torch.", "kiln."), what


# --- compiled ------------------------------------------------------------------------------------
def test_compiled_lstm_language_model():
    """A 2-layer LSTM LM (embedding, LSTM, decoder, nll) under kiln.compile(inductor) equals eager kiln."""
    nn, F = kiln.nn, kiln.nn.functional

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(11, 6)
            self.rnn = nn.LSTM(6, 8, num_layers=2)
            self.decoder = nn.Linear(8, 11)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.encoder(input), hidden)
            return F.log_softmax(self.decoder(output).view(-1, 11), dim=1), hidden

    kiln.manual_seed(0)
    model = LM()
    data = kiln.tensor(RNG.integers(0, 11, (7, 3)))
    hidden = (kiln.zeros(2, 3, 8), kiln.zeros(2, 3, 8))

    def step(data, hidden):
        out, (h, c) = model(data[:-1], hidden)
        return F.nll_loss(out, data[1:].reshape(-1)) + (h * h).mean() + c.mean()

    def run(fn):
        model.zero_grad()
        loss = fn(data, hidden)
        loss.backward()
        return loss.item(), {n: p.grad.tolist() for n, p in model.named_parameters()}

    want_loss, want_grads = run(step)
    kiln._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    try:
        got_loss, got_grads = run(kiln.compile(step, backend=counter))
    finally:
        kiln._dynamo.reset()
    assert counter.frame_count == 1 and counter.op_count > 0, "one graph, no breaks"
    assert got_loss == pytest.approx(want_loss, rel=1e-5)
    for name, grad in want_grads.items():
        np.testing.assert_allclose(np.array(got_grads[name]), np.array(grad), rtol=1e-4, atol=1e-6, err_msg=name)
