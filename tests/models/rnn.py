"""Recurrent models built on nn.LSTM / nn.GRU, as public code writes them: pytorch/examples
word_language_model's RNNModel (embedding, dropout, a 2-layer nn.LSTM or nn.GRU, decoder, log_softmax;
`init_hidden` from `weight.new_zeros`) trained with SGD and clip_grad_norm_ as its main.py does, and the
GRU variant with RMSprop; the bidirectional row-by-row LSTM classifier of 28x28 images from
yunjey/pytorch-tutorial (`nn.LSTM(..., batch_first=True, bidirectional=True)`, `out[:, -1, :]`); and the
hand-written LSTM cell of the "LSTM from scratch" tutorials unrolled over the rows (the form in which
issue 16 saw wrong gradients), kept as that bug's regression."""

from harness import Recipe

# The module recipes unroll 2 layers (x2 directions for the rows classifier) over SEQ steps: 12
# keeps their cold compile in CI under a minute each; the hand-written cell keeps the 28 rows of
# the program that once trained with wrong compiled gradients (issue 16).
VOCAB, EMB, HID, SEQ, ROWS = 32, 16, 32, 12, 28
BATCH, NLAYERS = 4, 2


def build(torch, rnn_type="LSTM"):
    """word_language_model's RNNModel (dropout 0, untied), its init_weights included."""
    nn, F = torch.nn, torch.nn.functional

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.0):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.init_weights()
            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):  # input: (seq, batch), as word_language_model's batches are
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                        weight.new_zeros(self.nlayers, bsz, self.nhid))
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    return RNNModel(rnn_type, VOCAB, EMB, HID, NLAYERS)


def build_rows(torch):
    """yunjey/pytorch-tutorial's bidirectional recurrent classifier: each image row is one step."""
    nn = torch.nn

    class BiRNN(nn.Module):
        def __init__(self, input_size, hidden_size, num_layers, num_classes):
            super().__init__()
            self.hidden_size = hidden_size
            self.num_layers = num_layers
            self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(hidden_size * 2, num_classes)

        def forward(self, x):  # x: (batch, rows, row length): 28 x 28 in the tutorial
            h0 = torch.zeros(self.num_layers * 2, x.size(0), self.hidden_size)
            c0 = torch.zeros(self.num_layers * 2, x.size(0), self.hidden_size)
            out, _ = self.lstm(x, (h0, c0))
            return self.fc(out[:, -1, :])

    return BiRNN(SEQ, HID, NLAYERS, 10)


def build_rows_cell(torch):
    """The row classifier on a hand-written cell (x2h and h2h Linears, gates by chunk)."""
    nn = torch.nn

    class LSTMCell(nn.Module):
        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.x2h = nn.Linear(input_size, 4 * hidden_size)
            self.h2h = nn.Linear(hidden_size, 4 * hidden_size)

        def forward(self, x, hidden):
            hx, cx = hidden
            gates = self.x2h(x) + self.h2h(hx)
            ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
            ingate = torch.sigmoid(ingate)
            forgetgate = torch.sigmoid(forgetgate)
            cellgate = torch.tanh(cellgate)
            outgate = torch.sigmoid(outgate)
            cy = torch.mul(cx, forgetgate) + torch.mul(ingate, cellgate)
            hy = torch.mul(outgate, torch.tanh(cy))
            return hy, cy

    class RowClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = LSTMCell(ROWS, HID)
            self.fc = nn.Linear(HID, 10)

        def forward(self, x):  # x: (batch, 28, 28)
            h = torch.zeros(x.size(0), HID)
            c = torch.zeros(x.size(0), HID)
            for t in range(x.size(1)):
                h, c = self.rnn(x[:, t, :], (h, c))
            return self.fc(h)

    return RowClassifier()


def batches(rng):
    out = []
    for _ in range(3):
        data = rng.integers(0, VOCAB, (SEQ + 1, BATCH))
        out.append((data[:-1], data[1:]))
    return out


def loss(torch, model, data, targets):
    # main.py's train(): a fresh hidden state per batch here (it repackages the last one), then NLL.
    hidden = model.init_hidden(data.size(1))
    output, hidden = model(data, hidden)
    return torch.nn.functional.nll_loss(output, targets.reshape(-1))


def optimizer_sgd(torch, model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def optimizer_rmsprop(torch, model):
    return torch.optim.RMSprop(model.parameters(), lr=1e-3)


def row_batches(rng, rows=SEQ):
    return [(rng.random((BATCH, rows, rows), dtype="float32"), rng.integers(0, 10, BATCH)) for _ in range(3)]


def row_batches_28(rng):
    return row_batches(rng, ROWS)


def classifier_loss(torch, model, images, labels):
    return torch.nn.functional.cross_entropy(model(images), labels)


def optimizer_adam(torch, model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


LSTM = Recipe("lstm", build, batches, loss, optimizer_sgd, clip=0.25)
GRU = Recipe("gru", lambda torch: build(torch, "GRU"), batches, loss, optimizer_rmsprop)
LSTM_ROWS = Recipe("lstm_rows", build_rows, row_batches, classifier_loss, optimizer_adam)
LSTM_CELL_ROWS = Recipe("lstm_cell_rows", build_rows_cell, row_batches_28, classifier_loss, optimizer_adam)
