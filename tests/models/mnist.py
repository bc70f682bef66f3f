"""The CNN of pytorch/examples (mnist/main.py) at toy size (12x12 inputs): two convolutions, ReLU,
max_pool2d, dropout (p=0 so kiln and PyTorch agree), flatten, two Linears, log_softmax + nll_loss,
SGD with momentum (the example's Adadelta is not in kiln)."""

from harness import Recipe

BATCH = 4


def build(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, 1)
            self.conv2 = nn.Conv2d(4, 8, 3, 1)
            self.dropout1 = nn.Dropout(0.0)
            self.dropout2 = nn.Dropout(0.0)
            self.fc1 = nn.Linear(128, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    return Net()


def batches(rng):
    return [(rng.random((BATCH, 1, 12, 12), dtype="float32"), rng.integers(0, 10, BATCH)) for _ in range(3)]


def loss(torch, model, data, target):
    return torch.nn.functional.nll_loss(model(data), target)


def optimizer(torch, model):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)


MNIST = Recipe("mnist", build, batches, loss, optimizer)
