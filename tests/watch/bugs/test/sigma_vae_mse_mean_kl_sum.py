"""A convolutional VAE example script: a ConvVAE module with static get_encoder/get_decoder builders,
encode/reparameterize/decode/sample methods and a loss_function(recon_x, x, mu, logvar) that returns
the reconstruction and KL terms, trained by a module-level train(epoch) function (zero_grad, loss =
rec + kl, backward, step) and checked by test(epoch) under model.eval(). The reconstruction term is
nn.MSELoss() with its default mean reduction, averaged over every pixel and every image of the
batch, while the KL term is summed over the latent units and the batch, so KL outweighs the
reconstruction by a factor of about batch_size * pixels; the posterior collapses to the prior and
every reconstruction is the same blurry average image.

Thread: https://github.com/orybkin/sigma-vae-pytorch/pull/12
"""
import torch
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset


class Flatten(nn.Module):
    def forward(self, x):
        return x.reshape(x.size(0), -1)


class UnFlatten(nn.Module):
    def __init__(self, n_channels):
        super().__init__()
        self.n_channels = n_channels

    def forward(self, x):
        side = int((x.size(1) // self.n_channels) ** 0.5)
        return x.view(x.size(0), self.n_channels, side, side)


class ConvVAE(nn.Module):
    def __init__(self, img_channels=3, z_dim=20, filters_m=8, img_size=28):
        super().__init__()
        self.z_dim = z_dim
        self.encoder = self.get_encoder(img_channels, filters_m)
        h_dim = self.encoder(torch.zeros(1, img_channels, img_size, img_size)).shape[1]
        self.fc11 = nn.Linear(h_dim, z_dim)
        self.fc12 = nn.Linear(h_dim, z_dim)
        self.fc2 = nn.Linear(z_dim, h_dim)
        self.decoder = self.get_decoder(filters_m, img_channels)

    @staticmethod
    def get_encoder(img_channels, filters_m):
        return nn.Sequential(
            nn.Conv2d(img_channels, filters_m, 3, stride=1, padding=1), nn.ReLU(),
            nn.Conv2d(filters_m, 2 * filters_m, 4, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(2 * filters_m, 4 * filters_m, 5, stride=2, padding=2), nn.ReLU(),
            Flatten())

    @staticmethod
    def get_decoder(filters_m, out_channels):
        return nn.Sequential(
            UnFlatten(4 * filters_m),
            nn.ConvTranspose2d(4 * filters_m, 2 * filters_m, 6, stride=2, padding=2), nn.ReLU(),
            nn.ConvTranspose2d(2 * filters_m, filters_m, 6, stride=2, padding=2), nn.ReLU(),
            nn.ConvTranspose2d(filters_m, out_channels, 5, stride=1, padding=2), nn.Sigmoid())

    def encode(self, x):
        h = self.encoder(x)
        return self.fc11(h), self.fc12(h)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z):
        return self.decoder(self.fc2(z))

    def forward(self, x):
        mu, logvar = self.encode(x)
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar

    def sample(self, n):
        return self.decode(torch.randn(n, self.z_dim))

    def loss_function(self, recon_x, x, mu, logvar):
        rec = nn.MSELoss()(recon_x, x)
        # KL(q(z|x) || N(0, I)) from Appendix B of Kingma and Welling, summed over units and batch
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return rec, kl


def make_images(n, seed):
    """Coloured Gaussian blobs at random positions and sizes on a dark background."""
    g = torch.Generator().manual_seed(seed)
    coords = torch.arange(28).float()
    cy, cx = torch.rand(n, 1, 1, generator=g) * 20 + 4, torch.rand(n, 1, 1, generator=g) * 20 + 4
    size = torch.rand(n, 1, 1, generator=g) * 4 + 2
    blob = torch.exp(-((coords.view(1, 28, 1) - cy) ** 2 + (coords.view(1, 1, 28) - cx) ** 2) / (2 * size ** 2))
    colour = torch.rand(n, 3, 1, 1, generator=g)
    return (0.05 + 0.9 * blob.unsqueeze(1) * colour).clamp(0, 1)


torch.manual_seed(0)
batch_size, epochs, log_interval = 64, 4, 5
train_loader = DataLoader(TensorDataset(make_images(1280, 1), torch.zeros(1280)), batch_size=batch_size,
                          shuffle=True, generator=torch.Generator().manual_seed(0))
test_loader = DataLoader(TensorDataset(make_images(256, 2), torch.zeros(256)), batch_size=batch_size)
model = ConvVAE()
optimizer = optim.Adam(model.parameters(), lr=1e-3)


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        rec, kl = model.loss_function(recon_batch, data, mu, logvar)
        total_loss = rec + kl
        total_loss.backward()
        train_loss += total_loss.item()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\t"
                  f"MSE: {rec.item() / len(data):.6f}\tKL: {kl.item() / len(data):.6f}")
    print(f"====> Epoch: {epoch} Average loss: {train_loss / len(train_loader.dataset):.4f}")


def test(epoch):
    model.eval()
    test_loss, per_pixel = 0.0, 0.0
    with torch.no_grad():
        for data, _ in test_loader:
            recon_batch, mu, logvar = model(data)
            rec, kl = model.loss_function(recon_batch, data, mu, logvar)
            test_loss += (rec + kl).item()
            per_pixel += rec.item() * len(data)
    print(f"====> Test set loss: {test_loss / len(test_loader.dataset):.4f}  "
          f"(reconstruction MSE per pixel {per_pixel / len(test_loader.dataset):.5f}, "
          f"variance of the data {test_loader.dataset.tensors[0].var().item():.5f})")


if __name__ == "__main__":
    for epoch in range(1, epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = model.sample(16)
