"""Transformer, TransformerEncoder(Layer) and TransformerDecoder(Layer) ("Attention Is All You Need"),
with torch.nn's constructor options, submodule names (so state_dicts load across), masks and errors.

Each layer is post-norm (`norm(x + block(x))`) or, with `norm_first=True`, pre-norm
(`x + block(norm(x))`); the attention blocks are kiln's nn.MultiheadAttention with need_weights=False.

Note [The fast path]: PyTorch switches to fused kernels and nested tensors in inference (eval mode, no
gradient needed, batch_first, ...). The fused layer computes the ordinary path's values, so kiln takes
the ordinary path always. One difference is visible: a TransformerEncoder that packs a padded batch
into a nested tensor returns zeros at the padded positions (before its final norm), where the ordinary
path returns whatever attention computed there; and with `mask_check=False` the nested tensor keeps the
first n positions of a row that has n unmasked ones, wherever they are. `_pads_like_nested_tensor`
decides, under PyTorch's conditions, whether PyTorch would have done that; kiln then masks keys as the
nested tensor does and zeroes the padded positions.
"""

import copy
import warnings

import kiln
from kiln.nn import functional as F
from kiln.nn.init import xavier_uniform_
from kiln.nn.modules.activation import GELU, MultiheadAttention, ReLU
from kiln.nn.modules.container import ModuleList
from kiln.nn.modules.dropout import Dropout
from kiln.nn.modules.linear import Linear
from kiln.nn.modules.module import Module
from kiln.nn.modules.normalization import LayerNorm

__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
           "TransformerDecoderLayer"]


def _generate_square_subsequent_mask(sz, device=None, dtype=None):
    """(sz, sz) float mask: 0 on and below the diagonal, -inf above it (a position sees no later one)."""
    return kiln.triu(kiln.full((sz, sz), float("-inf"), dtype=dtype, device=device), diagonal=1)


def _get_seq_len(src, batch_first):
    if src.dim() == 2:  # unbatched (S, E)
        return src.size(0)
    return src.size(1 if batch_first else 0)


def _detect_is_causal_mask(mask, is_causal=None, size=None):
    """An explicit is_causal is returned as is; None means: is `mask` exactly the causal mask of `size`?"""
    make_causal = is_causal is True
    if is_causal is None and mask is not None:
        sz = size if size is not None else mask.size(-2)
        causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
        # not kiln.equal, so that a batched mask is compared by broadcasting (as PyTorch)
        make_causal = bool((mask == causal).all()) if mask.size() == causal.size() else False
    return make_causal


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation):
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _canonical_masks(key_padding_mask, key_padding_name, attn_mask, attn_mask_name, target_type):
    """Both masks as float masks (-inf where a bool mask is True), warning on mismatched types as PyTorch."""
    key_padding_mask = F._canonical_mask(key_padding_mask, key_padding_name,
                                         None if attn_mask is None else attn_mask.dtype, attn_mask_name,
                                         target_type)
    attn_mask = F._canonical_mask(attn_mask, attn_mask_name, None, "", target_type, check_other=False)
    return key_padding_mask, attn_mask


def _left_aligned(valid):
    """For the bool (N, S) `valid`: the mask keeping the first valid.sum(-1) positions of each row (what
    PyTorch's nested tensor holds of a padded batch)."""
    return kiln.arange(valid.size(-1)) < valid.sum(-1, keepdim=True)


class TransformerEncoder(Module):
    """A stack of `num_layers` deep copies of `encoder_layer`, then `norm` if given."""

    __constants__ = ["norm"]

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor  # the value given
        self.use_nested_tensor = enable_nested_tensor  # whether nested tensors are used (see Note [The fast path])
        self.mask_check = mask_check
        why_not = self._why_no_nested_tensor(encoder_layer)
        if enable_nested_tensor and why_not:
            warnings.warn(f"enable_nested_tensor is True, but self.use_nested_tensor is False because {why_not}",
                          stacklevel=2)
            self.use_nested_tensor = False

    @staticmethod
    def _why_no_nested_tensor(layer):
        """PyTorch's reasons (same words) why a stack of `layer` cannot run on nested tensors; '' if it can."""
        name = "encoder_layer"
        if not isinstance(layer, TransformerEncoderLayer):
            return f"{name} was not TransformerEncoderLayer"
        if layer.norm_first:
            return f"{name}.norm_first was True"
        if not layer.self_attn.batch_first:
            return f"{name}.self_attn.batch_first was not True(use batch_first for better inference performance)"
        if not layer.self_attn._qkv_same_embed_dim:
            return f"{name}.self_attn._qkv_same_embed_dim was not True"
        if layer.self_attn.in_proj_bias is None:
            return f"{name}.self_attn was passed bias=False"
        if not layer.activation_relu_or_gelu:
            return f"{name}.activation_relu_or_gelu was not True"
        if layer.norm1.eps != layer.norm2.eps:
            return f"{name}.norm1.eps was not equal to {name}.norm2.eps"
        if layer.self_attn.num_heads % 2 == 1:
            return f"{name}.self_attn.num_heads is odd"
        return ""

    def _pads_like_nested_tensor(self, src, mask, src_key_padding_mask):
        """Whether PyTorch would run this call on a nested tensor (Note [The fast path])."""
        first = self.layers[0]
        if not kiln.backends.mha.get_fastpath_enabled() or not getattr(self, "use_nested_tensor", False):
            return False
        if first.training or src.dim() != 3 or src_key_padding_mask is None or mask is not None:
            return False
        do_mask_check = getattr(self, "mask_check", True)
        if do_mask_check and kiln.compiler.is_compiling():
            return False
        if do_mask_check:
            valid = src_key_padding_mask.logical_not()
            if not bool((valid == _left_aligned(valid)).all()):
                return False
        attn, tensors = first.self_attn, [src]
        for m in (attn, attn.out_proj, first.norm1, first.norm2, first.linear1, first.linear2):
            tensors += [p for p in m.parameters(recurse=False)]
        return not (kiln.is_grad_enabled() and any(t.requires_grad for t in tensors))

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask, mask = _canonical_masks(src_key_padding_mask, "src_key_padding_mask", mask, "mask",
                                                      src.dtype)
        nested = self._pads_like_nested_tensor(src, mask, src_key_padding_mask)
        if nested:  # the nested tensor holds each row's first n_valid positions, even if not those unmasked
            padded = _left_aligned(src_key_padding_mask.logical_not()).logical_not()
            src_key_padding_mask = kiln.zeros_like(src_key_padding_mask).masked_fill(padded, float("-inf"))
        seq_len = _get_seq_len(src, self.layers[0].self_attn.batch_first)
        is_causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        if nested:  # back from the nested tensor (batch_first: N, S, E), padded with zeros
            output = output.masked_fill(padded.unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerDecoder(Module):
    """A stack of `num_layers` deep copies of `decoder_layer`, then `norm` if given."""

    __constants__ = ["norm"]

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        seq_len = _get_seq_len(tgt, self.layers[0].self_attn.batch_first)
        tgt_is_causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block (linear1, activation, linear2), each with dropout and a
    residual connection, post-norm unless norm_first."""

    __constants__ = ["norm_first"]

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory_kwargs)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory_kwargs)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory_kwargs)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _get_activation_fn(activation)
        # PyTorch records which fused activation its fast path could use (1 relu, 2 gelu, 0 neither)
        if activation is F.relu or isinstance(activation, ReLU):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, GELU):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "activation"):
            self.activation = F.relu

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        src_key_padding_mask, src_mask = _canonical_masks(src_key_padding_mask, "src_key_padding_mask", src_mask,
                                                          "src_mask", src.dtype)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal=is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal=is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
                           is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention over the target, attention from the target to `memory`, then a feed-forward block,
    each with dropout and a residual connection, post-norm unless norm_first."""

    __constants__ = ["norm_first"]

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            **factory_kwargs)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                                 **factory_kwargs)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory_kwargs)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory_kwargs)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def __setstate__(self, state):
        if "activation" not in state:
            state["activation"] = F.relu
        super().__setstate__(state)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, is_causal=is_causal,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                is_causal=is_causal, need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class Transformer(Module):
    """An encoder and a decoder stack, each closed by a LayerNorm; every matrix xavier_uniform_."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation=F.relu, custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            encoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, **factory_kwargs),
                                              num_encoder_layers, encoder_norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            decoder_norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, **factory_kwargs),
                                              num_decoder_layers, decoder_norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if is_batched and src.size(batch_dim) != tgt.size(batch_dim):
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.size(-1) != self.d_model or tgt.size(-1) != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, dtype=dtype, device=device)

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                xavier_uniform_(p)
