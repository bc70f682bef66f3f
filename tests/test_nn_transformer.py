"""kiln.nn's Transformer modules against torch.nn (PyTorch 2.13): TransformerEncoderLayer,
TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and Transformer.

Each case builds the module in both libraries with the same options, loads torch's weights into kiln's
through the state dict (which must have the same keys), and runs both on the same strided inputs and
masks: outputs equal in float32 and float64, and in float64 the gradients of the inputs and of every
parameter equal for one output gradient, in train mode (dropout 0) and in eval mode. Eval mode under
no_grad is PyTorch's fast path (fused kernels, nested tensors), whose values kiln reproduces by the
ordinary path, including the zeros a nested-tensor encoder leaves at padded positions. Also: reprs,
the causal-mask helper and its detection, the constructor warning, bad input, compiled programs.
"""

import warnings

import numpy as np
import pytest

import kiln
import kiln.nn as knn
from conftest import requires_torch, torch

pytestmark = [requires_torch, pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")]

if torch is not None:
    import torch.nn as tnn

RNG = np.random.default_rng(1706)
D, H, FF = 8, 2, 16


def k_of(t):
    return kiln.from_numpy(t.detach().numpy().copy())


def strided(lib, a, dtype):
    """A non-contiguous view holding `a` (every other element of the last dimension)."""
    t = lib.tensor(np.repeat(a, 2, axis=-1), dtype=getattr(lib, dtype))[..., ::2]
    assert not t.is_contiguous()
    return t


def _activation(options, lib):
    options = dict(options)
    if options.get("activation") == "tanh":  # a callable activation (not relu/gelu)
        options["activation"] = lib.tanh
    return options


def build_pair(name, dtype, **options):
    """(kiln module, torch module) of class `name` with torch's weights in both."""
    def make(nn, lib):
        kw = dict(dtype=getattr(lib, dtype))
        options_of_lib = _activation(options, lib)
        if name == "TransformerEncoder":
            return nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FF, **options_of_lib, **kw), 2,
                                         norm=nn.LayerNorm(D, **kw), enable_nested_tensor=False)
        if name == "TransformerDecoder":
            return nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF, **options_of_lib, **kw), 2,
                                         norm=nn.LayerNorm(D, **kw))
        if name == "Transformer":
            return nn.Transformer(D, H, 2, 2, FF, **options_of_lib, **kw)
        return getattr(nn, name)(D, H, FF, **options_of_lib, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor's notice, checked in its own test
        t_mod = make(tnn, torch)
        k_mod = make(knn, kiln)
    t_state = t_mod.state_dict()
    assert list(k_mod.state_dict()) == list(t_state)
    k_mod.load_state_dict({k: k_of(v) for k, v in t_state.items()})
    return k_mod, t_mod


def bool_mask(*shape, p=0.3):
    m = RNG.random(shape) < p
    m[..., 0] = False  # no row is masked entirely (PyTorch's kernels disagree among themselves there)
    return m


def float_mask(bool_array):
    return np.where(bool_array, -np.inf, 0.0)


def causal(n):
    return np.triu(np.full((n, n), -np.inf), 1)


def seq(batch_first, n, s):
    return (n, s, D) if batch_first else (s, n, D)


# (id, module class, options, inputs(batch_first) -> (positional arrays, keyword arrays))
def _encoder_inputs(bf, kpm=True, mask=None):
    kw = {}
    if kpm:
        kw["src_key_padding_mask"] = bool_mask(3, 5)
    if mask is not None:
        kw["mask" if mask != "layer" else "src_mask"] = causal(5)
    return [RNG.uniform(-2, 2, seq(bf, 3, 5))], kw


CASES = [
    ("enc-layer", "TransformerEncoderLayer", {}, lambda bf: ([RNG.uniform(-2, 2, seq(bf, 3, 5))], {})),
    ("enc-layer-masks", "TransformerEncoderLayer", {},
     lambda bf: ([RNG.uniform(-2, 2, seq(bf, 3, 5))], {"src_mask": causal(5), "src_key_padding_mask": float_mask(bool_mask(3, 5))})),
    ("enc-layer-bool-mask-gelu-normfirst", "TransformerEncoderLayer",
     {"activation": "gelu", "norm_first": True, "layer_norm_eps": 1e-3},
     lambda bf: ([RNG.uniform(-2, 2, seq(bf, 3, 5))], {"src_mask": bool_mask(5, 5)})),
    ("enc-layer-nobias", "TransformerEncoderLayer", {"bias": False}, lambda bf: ([RNG.uniform(-2, 2, seq(bf, 2, 4))],
                                                                                 {})),
    ("enc-layer-unbatched", "TransformerEncoderLayer", {}, lambda bf: ([RNG.uniform(-2, 2, (4, D))], {})),
    ("encoder-kpm", "TransformerEncoder", {}, lambda bf: _encoder_inputs(bf)),
    ("encoder-causal", "TransformerEncoder", {"norm_first": True}, lambda bf: _encoder_inputs(bf, False, "mask")),
    ("dec-layer", "TransformerDecoderLayer", {},
     lambda bf: ([RNG.uniform(-2, 2, seq(bf, 3, 4)), RNG.uniform(-2, 2, seq(bf, 3, 5))],
                 {"tgt_mask": causal(4), "memory_key_padding_mask": bool_mask(3, 5)})),
    ("dec-layer-normfirst-callable", "TransformerDecoderLayer", {"norm_first": True, "activation": "tanh"},
     lambda bf: ([RNG.uniform(-2, 2, seq(bf, 2, 4)), RNG.uniform(-2, 2, seq(bf, 2, 3))],
                 {"tgt_key_padding_mask": bool_mask(2, 4), "memory_mask": bool_mask(4, 3)})),
    ("decoder", "TransformerDecoder", {},
     lambda bf: ([RNG.uniform(-2, 2, seq(bf, 3, 4)), RNG.uniform(-2, 2, seq(bf, 3, 5))],
                 {"tgt_mask": causal(4), "tgt_is_causal": True})),
    ("transformer", "Transformer", {},
     lambda bf: ([RNG.uniform(-2, 2, seq(bf, 2, 5)), RNG.uniform(-2, 2, seq(bf, 2, 4))],
                 {"tgt_mask": causal(4), "src_key_padding_mask": bool_mask(2, 5),
                  "memory_key_padding_mask": bool_mask(2, 5)})),
    ("transformer-normfirst-nobias", "Transformer", {"norm_first": True, "bias": False, "activation": "gelu"},
     lambda bf: ([RNG.uniform(-2, 2, seq(bf, 2, 3)), RNG.uniform(-2, 2, seq(bf, 2, 4))], {"src_mask": causal(3)})),
]


def _convert(lib, value, dtype):
    """A float input array -> strided tensor of dtype; masks keep their kind (bool or float)."""
    if isinstance(value, np.ndarray) and value.dtype == bool:
        return lib.tensor(value)
    if isinstance(value, np.ndarray):
        return lib.tensor(value, dtype=getattr(lib, dtype))
    return value


def _run_case(case, batch_first, dtype, mode):
    _, name, options, inputs = case
    args, kwargs = inputs(batch_first)
    k_mod, t_mod = build_pair(name, dtype, dropout=0.0, batch_first=batch_first, **options)
    k_mod.train(mode == "train")
    t_mod.train(mode == "train")
    grad = dtype == "float64"
    k_args = [strided(kiln, a, dtype).requires_grad_(grad) for a in args]
    t_args = [strided(torch, a, dtype).requires_grad_(grad) for a in args]
    k_out = k_mod(*k_args, **{k: _convert(kiln, v, dtype) for k, v in kwargs.items()})
    t_out = t_mod(*t_args, **{k: _convert(torch, v, dtype) for k, v in kwargs.items()})
    return k_mod, t_mod, k_args, t_args, k_out, t_out


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_float64_gradients(case, batch_first, mode):
    for dtype, tol in [("float32", 2e-5), ("float64", 1e-12)]:
        k_mod, t_mod, k_args, t_args, k_out, t_out = _run_case(case, batch_first, dtype, mode)
        assert k_out.dtype == getattr(kiln, dtype) and tuple(k_out.shape) == tuple(t_out.shape)
        np.testing.assert_allclose(k_out.detach().numpy(), t_out.detach().numpy(), rtol=tol, atol=tol)
    g = RNG.standard_normal(tuple(t_out.shape))
    t_out.backward(torch.tensor(g))
    k_out.backward(kiln.tensor(g))
    for k_in, t_in in zip(k_args, t_args):
        np.testing.assert_allclose(k_in.grad.numpy(), t_in.grad.numpy(), rtol=1e-10, atol=1e-12)
    k_params = dict(k_mod.named_parameters())
    for n, p in t_mod.named_parameters():
        np.testing.assert_allclose(k_params[n].grad.numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=n)


@pytest.mark.parametrize("mask_check", [True, False])
def test_fast_path_zeroes_padding_in_inference(mask_check):
    """Eval + no_grad + batch_first + a left-aligned key padding mask: PyTorch's encoder runs on a nested
    tensor and returns zeros at the padded positions before its norm; kiln gives the same values."""
    def make(nn, lib):
        layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(D), mask_check=mask_check).eval()

    t_mod, k_mod = make(tnn, torch), make(knn, kiln)
    with torch.no_grad():  # a visible affine norm: padded rows become its bias
        t_mod.norm.bias.uniform_(-1, 1)
    k_mod.load_state_dict({k: k_of(v) for k, v in t_mod.state_dict().items()})
    x = RNG.uniform(-2, 2, (3, 6, D))
    left = np.zeros((3, 6), dtype=bool)
    left[0, 4:] = left[2, 1:] = True
    ragged = left.copy()
    ragged[1, 2] = True  # not left-aligned: PyTorch keeps the ordinary path, or with mask_check=False
    # packs each row's first n positions (n unmasked), which kiln reproduces
    for kpm in (left, ragged):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's nested-tensor prototype notice
            with torch.no_grad():
                want = t_mod(torch.tensor(x, dtype=torch.float32), src_key_padding_mask=torch.tensor(kpm))
        with kiln.no_grad():
            got = k_mod(kiln.tensor(x, dtype=kiln.float32), src_key_padding_mask=kiln.tensor(kpm))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=2e-5)
    # with gradients required PyTorch takes the ordinary path: padded rows are not zero before the norm
    got = k_mod(kiln.tensor(x, dtype=kiln.float32), src_key_padding_mask=kiln.tensor(left))
    padded_rows = got[0, 4:]
    assert not np.allclose(padded_rows.detach().numpy(), t_mod.norm.bias.detach().numpy())
    kiln.backends.mha.set_fastpath_enabled(False)
    try:
        with kiln.no_grad():
            off = k_mod(kiln.tensor(x, dtype=kiln.float32), src_key_padding_mask=kiln.tensor(left))
    finally:
        kiln.backends.mha.set_fastpath_enabled(True)
    np.testing.assert_allclose(off.numpy(), got.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_reprs_and_attributes():
    for name, options in [("TransformerEncoderLayer", {"activation": "gelu"}), ("TransformerDecoderLayer", {}),
                          ("Transformer", {"batch_first": True})]:
        k_mod, t_mod = build_pair(name, "float32", **options)
        assert repr(k_mod) == repr(t_mod)
    k_layer = knn.TransformerEncoderLayer(D, H, activation=knn.GELU())
    t_layer = tnn.TransformerEncoderLayer(D, H, activation=tnn.GELU())
    assert repr(k_layer) == repr(t_layer)  # a module activation is a submodule
    assert k_layer.activation_relu_or_gelu == t_layer.activation_relu_or_gelu == 2
    assert knn.TransformerEncoderLayer(D, H, activation=kiln.sigmoid).activation_relu_or_gelu == 0
    k_t, t_t = knn.Transformer(D, H, 1, 1, FF), tnn.Transformer(D, H, 1, 1, FF)
    assert (k_t.d_model, k_t.nhead, k_t.batch_first) == (t_t.d_model, t_t.nhead, t_t.batch_first)
    assert k_t.encoder.layers[0].linear1.weight.shape == t_t.encoder.layers[0].linear1.weight.shape
    # the clones are independent copies
    enc = knn.TransformerEncoder(knn.TransformerEncoderLayer(D, H, FF), 3, enable_nested_tensor=False)
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    assert kiln.equal(enc.layers[0].linear1.weight, enc.layers[2].linear1.weight)


def test_transformer_init_is_xavier_uniform():
    """Every matrix of nn.Transformer is re-drawn from xavier_uniform_ (bounds sqrt(6 / (fan_in + fan_out)))."""
    kiln.manual_seed(0)
    m = knn.Transformer(16, 4, 1, 1, 32, dropout=0.0)
    for name, p in m.named_parameters():
        if p.dim() > 1:
            bound = (6.0 / (p.size(0) + p.size(1))) ** 0.5
            values = p.detach().numpy()
            assert np.abs(values).max() <= bound and np.abs(values).max() > 0.8 * bound, name


def test_square_subsequent_mask_and_causal_detection():
    for n in (1, 4):
        want = tnn.Transformer.generate_square_subsequent_mask(n)
        got = knn.Transformer.generate_square_subsequent_mask(n)
        assert got.dtype == kiln.float32 and np.array_equal(got.numpy(), want.numpy())
    assert knn.Transformer.generate_square_subsequent_mask(3, dtype=kiln.float64).dtype == kiln.float64
    from kiln.nn.modules.transformer import _detect_is_causal_mask
    mask = knn.Transformer.generate_square_subsequent_mask(4)
    assert _detect_is_causal_mask(mask) is True
    assert _detect_is_causal_mask(mask, size=3) is False
    assert _detect_is_causal_mask(mask, is_causal=False) is False
    assert _detect_is_causal_mask(kiln.zeros(4, 4)) is False
    assert _detect_is_causal_mask(None, is_causal=True) is True


def test_encoder_passes_detected_causality_to_layers():
    seen = []

    class Spy(knn.TransformerEncoderLayer):
        def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
            seen.append(is_causal)
            return super().forward(src, src_mask, src_key_padding_mask, is_causal)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = knn.TransformerEncoder(Spy(D, H, FF, dropout=0.0), 2)
    x = kiln.randn(5, 2, D)
    enc(x, mask=knn.Transformer.generate_square_subsequent_mask(5))
    enc(x, mask=kiln.zeros(5, 5))
    enc(x, mask=kiln.zeros(5, 5), is_causal=True)
    assert seen == [True, True, False, False, True, True]


def test_nested_tensor_warning():
    for layer_options, reason in [({}, "encoder_layer.self_attn.batch_first was not True(use batch_first for "
                                       "better inference performance)"),
                                  ({"batch_first": True, "norm_first": True}, "encoder_layer.norm_first was True"),
                                  ({"batch_first": True, "activation": "tanh"},
                                   "encoder_layer.activation_relu_or_gelu was not True"),
                                  ({"batch_first": True}, None)]:
        messages = []
        for nn, lib in [(knn, kiln), (tnn, torch)]:
            options = _activation(layer_options, lib)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FF, **options), 1)
            messages.append([str(w.message) for w in caught])
            assert enc.use_nested_tensor is (reason is None) and enc.enable_nested_tensor is True
        assert messages[0] == messages[1]
        if reason is not None:
            assert messages[0] == [f"enable_nested_tensor is True, but self.use_nested_tensor is False because "
                                   f"{reason}"]
        else:
            assert messages[0] == []


def _error(fn_k, fn_t):
    with pytest.raises(Exception) as t_info:
        fn_t()
    with pytest.raises(type(t_info.value)) as k_info:
        fn_k()
    assert str(k_info.value) == str(t_info.value).replace("torch.", "kiln.")


def test_errors():
    k_t, t_t = build_pair("Transformer", "float32")
    _error(lambda: k_t(kiln.zeros(5, 2, D), kiln.zeros(4, 3, D)), lambda: t_t(torch.zeros(5, 2, D), torch.zeros(4, 3, D)))
    _error(lambda: k_t(kiln.zeros(5, 2, D), kiln.zeros(4, 2, D + 1)),
           lambda: t_t(torch.zeros(5, 2, D), torch.zeros(4, 2, D + 1)))
    _error(lambda: knn.TransformerEncoderLayer(D, H, activation="tanh"),
           lambda: tnn.TransformerEncoderLayer(D, H, activation="tanh"))
    _error(lambda: knn.TransformerDecoderLayer(D, H, activation="swish"),
           lambda: tnn.TransformerDecoderLayer(D, H, activation="swish"))
    _error(lambda: knn.TransformerEncoderLayer(D, 3), lambda: tnn.TransformerEncoderLayer(D, 3))
    k_l, t_l = build_pair("TransformerEncoderLayer", "float32")
    _error(lambda: k_l(kiln.zeros(5, 2, D), src_mask=kiln.zeros(4, 4)),
           lambda: t_l(torch.zeros(5, 2, D), src_mask=torch.zeros(4, 4)))
    _error(lambda: k_l(kiln.zeros(5, 2, D), src_mask=kiln.zeros(5, 5, dtype=kiln.int64)),
           lambda: t_l(torch.zeros(5, 2, D), src_mask=torch.zeros(5, 5, dtype=torch.int64)))


def test_mismatched_mask_types_warn():
    k_l, t_l = build_pair("TransformerEncoderLayer", "float32")
    for mod, lib in [(k_l, kiln), (t_l, torch)]:
        with pytest.warns(UserWarning, match="Support for mismatched src_key_padding_mask and src_mask is deprecated"):
            mod(lib.zeros(5, 2, D), src_mask=lib.zeros(5, 5), src_key_padding_mask=lib.zeros(2, 5, dtype=lib.bool))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_matches_eager(backend):
    """A post-norm encoder with a causal mask (detected, a graph break) and a decoder, forward and backward."""
    kiln.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = knn.Transformer(D, H, 1, 1, FF, dropout=0.0, batch_first=True)
    src, tgt = kiln.randn(2, 5, D), kiln.randn(2, 4, D, requires_grad=True)
    kpm = kiln.tensor(bool_mask(2, 5))

    def step(src, tgt):
        mask = knn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        return model(src, tgt, tgt_mask=mask, src_key_padding_mask=kpm, memory_key_padding_mask=kpm).square().sum()

    eager = step(src, tgt)
    g_eager = kiln.autograd.grad(eager, [tgt] + list(model.parameters()))
    kiln._dynamo.reset()
    try:
        compiled = kiln.compile(step, backend=backend)(src, tgt)
        g_compiled = kiln.autograd.grad(compiled, [tgt] + list(model.parameters()))
    finally:
        kiln._dynamo.reset()
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-5)
    for a, b in zip(g_compiled, g_eager):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
