"""The VAE of pytorch/examples (vae/main.py) at toy size: Linear encoder to mu and logvar,
reparameterize, Linear decoder with a sigmoid, BCE(sum) + KL divergence, Adam.

The noise is made inside forward, as the example's `torch.randn_like(std)` is, but deterministically
so that kiln and PyTorch agree: `torch.zeros_like(std)` (the form in which issue 16 found the
inductor gradient bug), and a nonzero variant built from the shape."""

from harness import Recipe

IN, HID, LATENT = 64, 32, 8
BATCH = 4


def build(torch, nonzero_noise=False):
    nn, F = torch.nn, torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(IN, HID)
            self.fc21 = nn.Linear(HID, LATENT)
            self.fc22 = nn.Linear(HID, LATENT)
            self.fc3 = nn.Linear(LATENT, HID)
            self.fc4 = nn.Linear(HID, IN)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = torch.exp(0.5 * logvar)
            eps = torch.zeros_like(std)  # stands in for torch.randn_like(std)
            if nonzero_noise:
                eps = eps + torch.linspace(-1.0, 1.0, std.shape[-1])
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, IN))
            z = self.reparameterize(mu, logvar)
            return self.decode(z), mu, logvar

    return VAE()


def batches(rng):
    return [(rng.random((BATCH, 1, 8, 8), dtype="float32"),) for _ in range(3)]


def loss_function(torch, recon_x, x, mu, logvar):
    BCE = torch.nn.functional.binary_cross_entropy(recon_x, x.view(-1, IN), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def loss(torch, model, data):
    recon_batch, mu, logvar = model(data)
    return loss_function(torch, recon_batch, data, mu, logvar)


def optimizer(torch, model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


VAE = Recipe("vae", build, batches, loss, optimizer)
VAE_NOISE = Recipe("vae_noise", lambda torch: build(torch, nonzero_noise=True), batches, loss, optimizer)
