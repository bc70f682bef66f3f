"""The character-level MLP of Karpathy's makemore (Bengio et al. 2003), as written in "building
makemore part 2": a lookup table indexed by a batch of contexts (`C[X]`), a tanh hidden layer with
raw weight matrices, cross_entropy, and the hand-written SGD update `p.data += -lr * p.grad`."""

from harness import Recipe

VOCAB, BLOCK, EMB, HID = 27, 3, 10, 64
BATCH = 32


def build(torch):
    nn, F = torch.nn, torch.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            g = torch.Generator().manual_seed(2147483647)
            self.C = nn.Parameter(torch.randn((VOCAB, EMB), generator=g))
            self.W1 = nn.Parameter(torch.randn((BLOCK * EMB, HID), generator=g) * (5 / 3) / (BLOCK * EMB) ** 0.5)
            self.b1 = nn.Parameter(torch.randn(HID, generator=g) * 0.01)
            self.W2 = nn.Parameter(torch.randn((HID, VOCAB), generator=g) * 0.01)
            self.b2 = nn.Parameter(torch.randn(VOCAB, generator=g) * 0)

        def forward(self, X, Y):
            emb = self.C[X]
            h = torch.tanh(emb.view(-1, BLOCK * EMB) @ self.W1 + self.b1)
            logits = h @ self.W2 + self.b2
            return F.cross_entropy(logits, Y)

    return MLP()


def batches(rng):
    return [(rng.integers(0, VOCAB, (BATCH, BLOCK)), rng.integers(0, VOCAB, BATCH)) for _ in range(3)]


def loss(torch, model, X, Y):
    return model(X, Y)


class ManualSGD:
    """makemore's update loop as an object the harness can call."""

    def __init__(self, parameters, lr):
        self.parameters, self.lr = list(parameters), lr

    def zero_grad(self):
        for p in self.parameters:
            p.grad = None

    def step(self):
        for p in self.parameters:
            p.data += -self.lr * p.grad


def optimizer(torch, model):
    return ManualSGD(model.parameters(), lr=0.1)


MAKEMORE = Recipe("makemore", build, batches, loss, optimizer)
