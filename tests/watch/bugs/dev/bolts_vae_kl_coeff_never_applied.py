"""A Lightning-style image VAE: a VAE module whose __init__ stores lr, kl_coeff (0.1), enc_out_dim and
latent_dim and builds a conv encoder, a decoder and fc_mu / fc_var heads; sample() returns a
N(0, I) prior p, a posterior q = Normal(mu, std) and z = q.rsample(); step(batch, batch_idx) is
shared by training_step and validation_step and computes F.mse_loss(x_hat, x) (mean) plus a
Monte-Carlo KL, (q.log_prob(z) - p.log_prob(z)).mean(); configure_optimizers returns Adam. A small
fit() loop of our own stands in for the Lightning Trainer. The kl_coeff argument is stored but never
multiplied into the KL term, so the KL is weighted 1 instead of 0.1: it outweighs the per-pixel
reconstruction error, the posterior is pulled onto the prior and the reconstructions stay close to
the mean image.

Thread: https://github.com/Lightning-Universe/lightning-bolts/issues/328
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class VAE(nn.Module):
    def __init__(self, input_height=16, enc_out_dim=64, kl_coeff=0.1, latent_dim=64, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.kl_coeff = kl_coeff
        self.enc_out_dim = enc_out_dim
        self.latent_dim = latent_dim
        self.input_height = input_height
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(128, enc_out_dim), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.Linear(latent_dim, 32 * 4 * 4), nn.Unflatten(1, (32, 4, 4)),
            nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.ConvTranspose2d(16, 16, 4, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 3, 3, 1, 1))
        self.fc_mu = nn.Linear(enc_out_dim, latent_dim)
        self.fc_var = nn.Linear(enc_out_dim, latent_dim)

    def forward(self, x):
        h = self.encoder(x)
        p, q, z = self.sample(self.fc_mu(h), self.fc_var(h))
        return self.decoder(z)

    def _run_step(self, x):
        h = self.encoder(x)
        mu, log_var = self.fc_mu(h), self.fc_var(h)
        p, q, z = self.sample(mu, log_var)
        return z, self.decoder(z), p, q

    def sample(self, mu, log_var):
        std = torch.exp(log_var / 2)
        p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(std))
        q = torch.distributions.Normal(mu, std)
        return p, q, q.rsample()

    def step(self, batch, batch_idx):
        x, y = batch
        z, x_hat, p, q = self._run_step(x)
        recon_loss = F.mse_loss(x_hat, x, reduction="mean")
        kl = q.log_prob(z) - p.log_prob(z)
        kl = kl.mean()
        loss = kl + recon_loss
        return loss, {"recon_loss": recon_loss.item(), "kl": kl.item(), "loss": loss.item()}

    def training_step(self, batch, batch_idx):
        loss, logs = self.step(batch, batch_idx)
        if batch_idx % 10 == 0:
            print("train", {k: round(v, 4) for k, v in logs.items()})
        return loss

    def validation_step(self, batch, batch_idx):
        loss, logs = self.step(batch, batch_idx)
        return logs

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def fit(module, train_loader, val_loader, max_epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(max_epochs):
        module.train()
        for batch_idx, batch in enumerate(train_loader):
            loss = module.training_step(batch, batch_idx)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        module.eval()
        with torch.no_grad():
            outs = [module.validation_step(b, i) for i, b in enumerate(val_loader)]
        print(f"epoch {epoch}: val_recon_loss {sum(o['recon_loss'] for o in outs) / len(outs):.4f} "
              f"val_kl {sum(o['kl'] for o in outs) / len(outs):.4f}")


def make_images(n, seed):
    """Per-channel normalized 3x16x16 images: coloured blobs over a colour gradient."""
    g = torch.Generator().manual_seed(seed)
    c = torch.arange(16).float()
    cy, cx = torch.rand(n, 1, 1, generator=g) * 12 + 2, torch.rand(n, 1, 1, generator=g) * 12 + 2
    blob = torch.exp(-((c.view(1, 16, 1) - cy) ** 2 + (c.view(1, 1, 16) - cx) ** 2) / 8.0).unsqueeze(1)
    grad = (c.view(1, 1, 1, 16) / 15) * torch.rand(n, 3, 1, 1, generator=g)
    img = 0.6 * blob * torch.rand(n, 3, 1, 1, generator=g) + 0.4 * grad
    return (img - img.mean((0, 2, 3), keepdim=True)) / img.std((0, 2, 3), keepdim=True)


if __name__ == "__main__":
    torch.manual_seed(1234)
    x_train, x_val = make_images(1280, 0), make_images(256, 1)
    train_loader = DataLoader(TensorDataset(x_train, torch.zeros(1280)), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(TensorDataset(x_val, torch.zeros(256)), batch_size=64)
    vae = VAE(input_height=16)
    fit(vae, train_loader, val_loader, max_epochs=4)
