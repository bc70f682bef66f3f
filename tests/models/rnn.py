"""Recurrent language models from hand-written cells unrolled over 28 steps, in the idiom of the
many "LSTM/GRU from scratch" tutorials (x2h and h2h Linears, gates by chunk): an LSTM LM trained with
SGD and clip_grad_norm_ (as pytorch/examples word_language_model does), a GRU LM with RMSprop, and
the row-by-row LSTM classifier of 28x28 images (the form in which issue 16 saw wrong gradients).

Not here yet: nn.LSTM / nn.GRU themselves, which kiln lacks."""

from harness import Recipe

VOCAB, EMB, HID, SEQ = 32, 16, 32, 28
BATCH = 4


def build(torch, cell="lstm", classify=False):
    nn, F = torch.nn, torch.nn.functional

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

    class GRUCell(nn.Module):
        def __init__(self, input_size, hidden_size):
            super().__init__()
            self.hidden_size = hidden_size
            self.x2h = nn.Linear(input_size, 3 * hidden_size)
            self.h2h = nn.Linear(hidden_size, 3 * hidden_size)

        def forward(self, x, hidden):
            gate_x, gate_h = self.x2h(x), self.h2h(hidden)
            i_r, i_i, i_n = gate_x.chunk(3, 1)
            h_r, h_i, h_n = gate_h.chunk(3, 1)
            resetgate = torch.sigmoid(i_r + h_r)
            inputgate = torch.sigmoid(i_i + h_i)
            newgate = torch.tanh(i_n + (resetgate * h_n))
            return newgate + inputgate * (hidden - newgate)

    class RowClassifier(nn.Module):
        """The MNIST-rows sequence classifier: each image row is one step; the last hidden state classifies."""

        def __init__(self):
            super().__init__()
            self.rnn = LSTMCell(SEQ, HID)
            self.fc = nn.Linear(HID, 10)

        def forward(self, x):  # x: (batch, 28, 28)
            h = torch.zeros(x.size(0), HID)
            c = torch.zeros(x.size(0), HID)
            for t in range(x.size(1)):
                h, c = self.rnn(x[:, t, :], (h, c))
            return self.fc(h)

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(VOCAB, EMB)
            self.rnn = LSTMCell(EMB, HID) if cell == "lstm" else GRUCell(EMB, HID)
            self.decoder = nn.Linear(HID, VOCAB)

        def forward(self, input):  # input: (seq, batch), as word_language_model's batches are
            emb = self.encoder(input)
            h = torch.zeros(input.size(1), HID)
            hidden = (h, torch.zeros_like(h)) if cell == "lstm" else h
            outs = []
            for t in range(emb.size(0)):
                hidden = self.rnn(emb[t], hidden)
                outs.append(hidden[0] if cell == "lstm" else hidden)
            output = torch.stack(outs, 0)
            return F.log_softmax(self.decoder(output).view(-1, VOCAB), dim=1)

    return RowClassifier() if classify else RNNModel()


def batches(rng):
    out = []
    for _ in range(3):
        data = rng.integers(0, VOCAB, (SEQ + 1, BATCH))
        out.append((data[:-1], data[1:]))
    return out


def loss(torch, model, data, targets):
    return torch.nn.functional.nll_loss(model(data), targets.reshape(-1))


def optimizer_sgd(torch, model):
    return torch.optim.SGD(model.parameters(), lr=0.5)


def optimizer_rmsprop(torch, model):
    return torch.optim.RMSprop(model.parameters(), lr=1e-3)


def row_batches(rng):
    return [(rng.random((BATCH, SEQ, SEQ), dtype="float32"), rng.integers(0, 10, BATCH)) for _ in range(3)]


def classifier_loss(torch, model, images, labels):
    return torch.nn.functional.cross_entropy(model(images), labels)


def optimizer_adam(torch, model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


LSTM_ROWS = Recipe("lstm_rows", lambda torch: build(torch, classify=True), row_batches, classifier_loss,
                   optimizer_adam)
LSTM = Recipe("lstm", build, batches, loss, optimizer_sgd, clip=0.25)
GRU = Recipe("gru", lambda torch: build(torch, cell="gru"), batches, loss, optimizer_rmsprop)
