"""RNN, LSTM, GRU and their cells, with PyTorch's parameters, checks and results.

PyTorch runs these in C++ (`_VF.lstm`, `_VF.gru`, ... in aten/native/RNN.cpp). Here the same
recurrence is a Python composite over kiln ops, so autograd differentiates it and Dynamo unrolls it:

  for each layer, for each direction:
      gi = linear(layer_input, w_ih, b_ih)             one matmul for all time steps
      for each step t (reversed for direction 1):
          state = cell(gi[rows of t], state, w_hh, b_hh[, w_hr])
      layer_input = cat(outputs of the directions, -1), dropout between layers when training

Note [One loop for padded and packed input]: a padded (L, N, H) input is run as the packed sequence
whose every step has N rows: rows t*N .. t*N+N-1 of the flattened input are step t. A packed input's
step t has batch_sizes[t] rows, the sequences still running (sorted by decreasing length). Going
forward, when the batch shrinks the finished sequences' states are set aside (they are their final
states); going backward, a sequence joins with its initial state when its last step comes up. So
outputs and h_n of padded and packed input come from the same code, and a packed sequence costs only
its valid steps. The step sizes are Python ints: loops and slices have no data-dependent branches.

Cells follow aten's formulas term for term (PyTorch's float64 results are matched to rounding):
  RNN:  h' = act(W_hh h + b_hh + (W_ih x + b_ih))
  LSTM: i, f, g, o = chunk(W_hh h + b_hh + (W_ih x + b_ih), 4); c' = f*c + i*g; h' = o*tanh(c') [@ W_hr^T]
  GRU:  r, z, n from chunk(W_ih x + b_ih, 3) and chunk(W_hh h + b_hh, 3) as (i_r, i_z, i_n), (h_r, h_z, h_n):
        r = sig(h_r + i_r); z = sig(h_z + i_z); n = tanh(i_n + h_n*r); h' = (h - n)*z + n
"""

import math
import numbers
import warnings

import kiln
from kiln._tensor import Tensor
from kiln.nn import functional as F, init
from kiln.nn.modules.module import Module
from kiln.nn.parameter import Parameter
from kiln.nn.utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# --- the recurrence (aten's _VF.rnn_tanh / rnn_relu / lstm / gru) --------------------------------
def _rnn_tanh_step(gi, state, w_hh, b_hh, w_hr):
    return (kiln.tanh(F.linear(state[0], w_hh, b_hh) + gi),)


def _rnn_relu_step(gi, state, w_hh, b_hh, w_hr):
    return (kiln.relu(F.linear(state[0], w_hh, b_hh) + gi),)


def _lstm_step(gi, state, w_hh, b_hh, w_hr):
    hx, cx = state
    gates = F.linear(hx, w_hh, b_hh) + gi
    ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
    ingate = kiln.sigmoid(ingate)
    forgetgate = kiln.sigmoid(forgetgate)
    cellgate = kiln.tanh(cellgate)
    outgate = kiln.sigmoid(outgate)
    cy = forgetgate * cx + ingate * cellgate
    hy = outgate * kiln.tanh(cy)
    if w_hr is not None:
        hy = F.linear(hy, w_hr)
    return hy, cy


def _gru_step(gi, state, w_hh, b_hh, w_hr):
    hx = state[0]
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = F.linear(hx, w_hh, b_hh).chunk(3, 1)
    resetgate = kiln.sigmoid(h_r + i_r)
    inputgate = kiln.sigmoid(h_z + i_z)
    newgate = kiln.tanh(i_n + h_n * resetgate)
    return ((hx - newgate) * inputgate + newgate,)


_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step, "GRU": _gru_step}


def _direction(step, gi, batch_sizes, state0, w_hh, b_hh, w_hr, reverse):
    """One direction of one layer over packed rows (Note [One loop for padded and packed input]).
    gi: (rows, gates) input projections; state0: tuple of (batch_sizes[0], *) initial states.
    Returns (outputs (rows, H_out), tuple of final states (batch_sizes[0], *))."""
    outputs = []
    if not reverse:
        state, live, finished, offset = state0, batch_sizes[0], [], 0
        for bs in batch_sizes:
            if bs < live:  # sequences bs..live-1 have ended: their states are final
                finished.append(tuple(s[bs:live] for s in state))
                state = tuple(s[:bs] for s in state)
                live = bs
            state = step(gi[offset:offset + bs], state, w_hh, b_hh, w_hr)
            offset += bs
            outputs.append(state[0])
        if finished:
            finished.append(state)
            state = tuple(kiln.cat([f[i] for f in reversed(finished)], 0) for i in range(len(state)))
    else:
        live, offset = batch_sizes[-1], gi.size(0)
        full = state0[0].size(0)
        state = state0 if live == full else tuple(s[:live] for s in state0)
        for bs in reversed(batch_sizes):
            if bs > live:  # sequences live..bs-1 start (at their last step) from their initial states
                state = tuple(kiln.cat([s, s0[live:bs]], 0) for s, s0 in zip(state, state0))
                live = bs
            offset -= bs
            state = step(gi[offset:offset + bs], state, w_hh, b_hh, w_hr)
            outputs.append(state[0])
        outputs.reverse()
    return (outputs[0] if len(outputs) == 1 else kiln.cat(outputs, 0)), state


def _rnn(mode, data, batch_sizes, hx, weights, has_biases, num_layers, dropout, train, bidirectional):
    """The stacked recurrence over packed rows `data` (rows, H_in). hx: tuple of (layers*dirs, B, *)
    initial states ((h,) or (h, c)); weights: _flat_weights. Returns (output rows, tuple of h_n-like)."""
    step = _STEPS[mode]
    num_directions = 2 if bidirectional else 1
    per_direction = len(weights) // (num_layers * num_directions)
    finals = [[] for _ in hx]
    layer_input = data
    for layer in range(num_layers):
        outputs = []
        for direction in range(num_directions):
            index = layer * num_directions + direction
            w = weights[index * per_direction:(index + 1) * per_direction]
            b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
            w_hr = w[-1] if per_direction in (3, 5) else None
            gi = F.linear(layer_input, w[0], b_ih)
            out, state = _direction(step, gi, batch_sizes, tuple(h[index] for h in hx), w[1], b_hh, w_hr,
                                    direction == 1)
            outputs.append(out)
            for final, s in zip(finals, state):
                final.append(s)
        layer_input = outputs[0] if num_directions == 1 else kiln.cat(outputs, 1)
        if dropout != 0 and train and layer < num_layers - 1:
            layer_input = F.dropout(layer_input, dropout, True)
    return layer_input, tuple(kiln.stack(f, 0) for f in finals)


def _apply_permutation(tensor, permutation, dim=1):
    return tensor.index_select(dim, permutation)


# --- modules ------------------------------------------------------------------------------------
class RNNBase(Module):
    """Parameters, checks and the shared forward of RNN, LSTM and GRU (see the file comment)."""

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                     "bidirectional", "proj_size"]

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1

        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=2)
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: {type(batch_first).__name__}")
        if not isinstance(input_size, int):
            raise TypeError(f"input_size should be of type int, got: {type(input_size).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")

        gate_size = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}.get(mode)
        if gate_size is None:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size *= hidden_size

        self._flat_weights_names = []
        self._all_weights = []
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input_size = input_size if layer == 0 else real_hidden_size * num_directions
                params = [kiln.empty((gate_size, layer_input_size), **factory_kwargs),
                          kiln.empty((gate_size, real_hidden_size), **factory_kwargs)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    params += [kiln.empty(gate_size, **factory_kwargs), kiln.empty(gate_size, **factory_kwargs)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    params.append(kiln.empty((proj_size, hidden_size), **factory_kwargs))
                    names.append("weight_hr_l{}{}")
                suffix = "_reverse" if direction == 1 else ""
                names = [n.format(layer, suffix) for n in names]
                for name, param in zip(names, params):
                    setattr(self, name, Parameter(param))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self._init_flat_weights()
        self.reset_parameters()

    def _init_flat_weights(self):
        self._flat_weights = [getattr(self, wn) if hasattr(self, wn) else None for wn in self._flat_weights_names]
        self.flatten_parameters()

    def __setattr__(self, attr, value):
        if hasattr(self, "_flat_weights_names") and attr in self._flat_weights_names:
            self._flat_weights[self._flat_weights_names.index(attr)] = value
        super().__setattr__(attr, value)

    def flatten_parameters(self):
        """A no-op: PyTorch packs the weights for cuDNN here; kiln has no cuDNN."""

    def _apply(self, fn, recurse=True):
        ret = super()._apply(fn, recurse)
        self._init_flat_weights()
        return ret

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def all_weights(self):
        return [[getattr(self, weight) for weight in weights] for weights in self._all_weights]

    def _weights(self):
        # Read through the module (not the cached _flat_weights list) so that a tracer sees parameters.
        return [getattr(self, name) for name in self._flat_weights_names]

    def check_input(self, input, batch_sizes):
        weight = getattr(self, self._flat_weights_names[0])
        if input.dtype != weight.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight.dtype}). "
                             f"Convert input: input.to({weight.dtype}), or convert model: model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input, batch_sizes):
        return self._expected_state_size(input, batch_sizes, self.proj_size if self.proj_size > 0 else self.hidden_size)

    def _expected_state_size(self, input, batch_sizes, size):
        """(layers x directions, batch, size): h0's shape, or c0's with size hidden_size."""
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        return (self.num_layers * (2 if self.bidirectional else 1), mini_batch, size)

    def check_hidden_size(self, hx, expected_hidden_size, msg="Expected hidden size {}, got {}"):
        if tuple(hx.size()) != expected_hidden_size:
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx, permutation)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # -- the shared forward ------------------------------------------------------------------------
    def _zeros(self, batch, size, like):
        num_directions = 2 if self.bidirectional else 1
        return kiln.zeros(self.num_layers * num_directions, batch, size, dtype=like.dtype, device=like.device)

    def _run(self, input, batch_sizes, hx):
        """Runs the recurrence on a checked (L, N, H_in) / (N, L, H_in) input, or packed rows when
        batch_sizes (a list of ints) is given; hx is a tuple of states. Returns (output, states)."""
        if batch_sizes is None:
            if self.batch_first:
                input = input.transpose(0, 1)
            steps, batch = input.size(0), input.size(1)
            data, sizes = input.reshape(steps * batch, input.size(2)), [batch] * steps
        else:
            data, sizes = input, batch_sizes
        output, states = _rnn(self.mode, data, sizes, hx, self._weights(), self.bias, self.num_layers,
                              self.dropout, self.training, self.bidirectional)
        if batch_sizes is None:
            output = output.view(steps, batch, output.size(-1))
            if self.batch_first:
                output = output.transpose(0, 1)
        return output, states

    def _forward_single_state(self, input, hx, name):
        """forward of RNN and GRU (one state tensor), as theirs in torch/nn/modules/rnn.py."""
        orig_input = input
        if isinstance(orig_input, PackedSequence):
            input, batch_sizes, sorted_indices, unsorted_indices = input
            batch_sizes_list = [int(b) for b in batch_sizes.tolist()]
            if hx is None:
                hx = self._zeros(batch_sizes_list[0], self.hidden_size, input)
            else:
                hx = self.permute_hidden(hx, sorted_indices)
        else:
            batch_sizes = batch_sizes_list = None
            if input.dim() not in (2, 3):
                what = "tensor instead" if name == "RNN" else "instead"
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D {what}")
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
                if hx is not None:
                    if hx.dim() != 2:
                        raise RuntimeError(f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D "
                                           "tensor")
                    hx = hx.unsqueeze(1)
            elif hx is not None and hx.dim() != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor")
            max_batch_size = input.size(0) if self.batch_first else input.size(1)
            sorted_indices = unsorted_indices = None
            if hx is None:
                hx = self._zeros(max_batch_size, self.hidden_size, input)
        self.check_forward_args(input, hx, batch_sizes)
        output, (hidden,) = self._run(input, batch_sizes_list, (hx,))
        if isinstance(orig_input, PackedSequence):
            return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), \
                self.permute_hidden(hidden, unsorted_indices)
        if not is_batched:
            output = output.squeeze(batch_dim)
            hidden = hidden.squeeze(1)
        return output, self.permute_hidden(hidden, unsorted_indices)


class RNN(RNNBase):
    """Elman RNN: h_t = tanh or relu(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_single_state(input, hx, "RNN")


class LSTM(RNNBase):
    """Long short-term memory, gates i, f, g, o; with proj_size > 0, h_t = (o * tanh(c_t)) W_hr^T."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes):
        return self._expected_state_size(input, batch_sizes, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def permute_hidden(self, hx, permutation):
        if permutation is None:
            return hx
        return _apply_permutation(hx[0], permutation), _apply_permutation(hx[1], permutation)

    def forward(self, input, hx=None):
        orig_input = input
        batch_sizes = batch_sizes_list = None
        real_hidden_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        if isinstance(orig_input, PackedSequence):
            input, batch_sizes, sorted_indices, unsorted_indices = input
            batch_sizes_list = [int(b) for b in batch_sizes.tolist()]
            if hx is None:
                hx = (self._zeros(batch_sizes_list[0], real_hidden_size, input),
                      self._zeros(batch_sizes_list[0], self.hidden_size, input))
            else:
                hx = self.permute_hidden(hx, sorted_indices)
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
            max_batch_size = input.size(0) if self.batch_first else input.size(1)
            sorted_indices = unsorted_indices = None
            if hx is None:
                hx = (self._zeros(max_batch_size, real_hidden_size, input),
                      self._zeros(max_batch_size, self.hidden_size, input))
            else:
                if is_batched:
                    if hx[0].dim() != 3 or hx[1].dim() != 3:
                        raise RuntimeError("For batched 3-D input, hx and cx should also be 3-D but got "
                                           f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                else:
                    if hx[0].dim() != 2 or hx[1].dim() != 2:
                        raise RuntimeError("For unbatched 2-D input, hx and cx should also be 2-D but got "
                                           f"({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
                    hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        self.check_forward_args(input, hx, batch_sizes)
        output, hidden = self._run(input, batch_sizes_list, tuple(hx))
        if isinstance(orig_input, PackedSequence):
            return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), \
                self.permute_hidden(hidden, unsorted_indices)
        if not is_batched:
            output = output.squeeze(batch_dim)
            hidden = (hidden[0].squeeze(1), hidden[1].squeeze(1))
        return output, self.permute_hidden(hidden, unsorted_indices)


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n (the reset gate multiplies W_hn h + b_hn)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_single_state(input, hx, "GRU")


# --- cells --------------------------------------------------------------------------------------
class RNNCellBase(Module):
    """weight_ih (chunks*hidden, input), weight_hh (chunks*hidden, hidden), optional biases."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(kiln.empty((num_chunks * hidden_size, input_size), **factory_kwargs))
        self.weight_hh = Parameter(kiln.empty((num_chunks * hidden_size, hidden_size), **factory_kwargs))
        if bias:
            self.bias_ih = Parameter(kiln.empty(num_chunks * hidden_size, **factory_kwargs))
            self.bias_hh = Parameter(kiln.empty(num_chunks * hidden_size, **factory_kwargs))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _cell(self, step, input, states):
        """aten's *_cell: its checks (check_rnn_cell_forward_input/_hidden), then one step."""
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for label, hx in enumerate(states):
            if input.size(0) != hx.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{label} batch size "
                                   f"{hx.size(0)}")
            if hx.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {hx.size(1)}, expected "
                                   f"{self.hidden_size}")
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        return step(gi, states, self.weight_hh, self.bias_hh, None)


def _single_state_cell(cell, step, input, hx):
    """RNNCell's and GRUCell's forward around one step function: 1-D (unbatched) input and state
    get a batch dim of 1 and lose it again, and a missing state is zeros (PyTorch's checks first)."""
    name = type(cell).__name__
    if input.dim() not in (1, 2):
        raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
    if hx is not None and hx.dim() not in (1, 2):
        raise ValueError(f"{name}: Expected hidden to be 1D or 2D, got {hx.dim()}D instead")
    is_batched = input.dim() == 2
    if not is_batched:
        input = input.unsqueeze(0)
    if hx is None:
        hx = kiln.zeros(input.size(0), cell.hidden_size, dtype=input.dtype, device=input.device)
    elif not is_batched:
        hx = hx.unsqueeze(0)
    (ret,) = cell._cell(step, input, (hx,))
    return ret if is_batched else ret.squeeze(0)


class RNNCell(RNNCellBase):
    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        steps = {"tanh": _rnn_tanh_step, "relu": _rnn_relu_step}
        if self.nonlinearity not in steps:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return _single_state_cell(self, steps[self.nonlinearity], input, hx)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = kiln.zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device)
            hx = (zeros, zeros)
        else:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0)) if not is_batched else hx
        ret = self._cell(_lstm_step, input, tuple(hx))
        if not is_batched:
            ret = (ret[0].squeeze(0), ret[1].squeeze(0))
        return ret


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return _single_state_cell(self, _gru_step, input, hx)
