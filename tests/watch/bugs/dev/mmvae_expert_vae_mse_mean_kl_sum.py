"""A single-cell expression VAE trainer: a BaseTrainer whose __init__ calls configure_dataloader,
configure_model and configure_optimizers, a model made of an expert encoder/decoder pair around a
shared VAE (encoder, mean and log-variance heads, decoder), one Adam per part kept in a dict, and a
train_epoch that hands each batch to train_trace_complete (zero every optimizer, forward,
vae_loss, backward, step every optimizer). vae_loss adds F.mse_loss(predicted, target) with its
default mean reduction, averaged over every gene of every cell, to a KL term that a helper sums over
the latent units and over the batch, with kl_weight 1. The KL is therefore weighted about
batch_size * n_genes times more than the reconstruction: it drops to almost zero within a few steps,
the latent code stops carrying information and the reconstruction loss stalls near the variance of
the data.

Thread: https://github.com/zdebruine/MMVAE/pull/19
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_GENES, LATENT = 200, 8


def kl_divergence(mu, logvar):
    # KL(q(z|x) || N(0, I)), summed over everything
    return -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())


class SharedVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 48), nn.LeakyReLU(), nn.Linear(48, 32), nn.LeakyReLU())
        self.mean = nn.Linear(32, LATENT)
        self.var = nn.Linear(32, LATENT)
        self.decoder = nn.Sequential(nn.Linear(LATENT, 32), nn.LeakyReLU(), nn.Linear(32, 64), nn.LeakyReLU())

    def forward(self, x):
        h = self.encoder(x)
        mu, logvar = self.mean(h), self.var(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decoder(z), mu, logvar


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(N_GENES, 96), nn.LeakyReLU(), nn.Linear(96, 64), nn.LeakyReLU())
        self.decoder = nn.Sequential(nn.Linear(64, 96), nn.LeakyReLU(), nn.Linear(96, N_GENES), nn.LeakyReLU())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.expert, self.shared_vae = Expert(), SharedVAE()

    def forward(self, x):
        h, mu, logvar = self.shared_vae(self.expert.encoder(x))
        return self.expert.decoder(h), mu, logvar


class BaseTrainer:
    def __init__(self, device="cpu"):
        self.device = device
        self.dataloader = self.configure_dataloader()
        self.model = self.configure_model()
        self.optimizers = self.configure_optimizers()

    def train(self, epochs):
        for epoch in range(epochs):
            self.train_epoch(epoch)


class ExpressionVAETrainer(BaseTrainer):
    def __init__(self, batch_size, *args, **kwargs):
        self.batch_size = batch_size  # set before super().__init__, which calls configure_*
        super().__init__(*args, **kwargs)
        self.batch_iteration = 0

    def configure_dataloader(self):
        g = torch.Generator().manual_seed(0)
        programs = torch.randn(6, N_GENES, generator=g)
        usage = torch.randn(2048, 6, generator=g)
        counts = F.softplus(2.0 * usage @ programs / 6 ** 0.5 - 1.5) * 4
        x = torch.log1p(counts * (torch.rand(2048, N_GENES, generator=g) > 0.05))
        self.data = x
        return DataLoader(TensorDataset(x), batch_size=self.batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(1))

    def configure_model(self):
        torch.manual_seed(0)
        return Model()

    def configure_optimizers(self):
        return {
            "encoder": torch.optim.Adam(self.model.expert.encoder.parameters()),
            "decoder": torch.optim.Adam(self.model.expert.decoder.parameters()),
            "shr_vae": torch.optim.Adam(self.model.shared_vae.parameters()),
        }

    def vae_loss(self, predicted, target, mu, logvar, kl_weight=1):
        recon_loss = F.mse_loss(predicted, target)
        kl_loss = kl_divergence(mu, logvar)
        return recon_loss + kl_loss * kl_weight, recon_loss, kl_loss

    def train_epoch(self, epoch):
        self.model.train()
        for (train_data,) in self.dataloader:
            self.batch_iteration += 1
            self.train_trace_complete(train_data.to(self.device), epoch)
        self.model.eval()
        with torch.no_grad():
            x_hat, mu, logvar = self.model(self.data)
            print(f"epoch {epoch}: recon MSE {F.mse_loss(x_hat, self.data).item():.4f} "
                  f"(data variance {self.data.var().item():.4f}), KL per cell "
                  f"{kl_divergence(mu, logvar).item() / len(self.data):.4f}")

    def train_trace_complete(self, train_data, epoch):
        for opt in self.optimizers.values():
            opt.zero_grad()
        x_hat, mu, logvar = self.model(train_data)
        loss, recon_loss, kl_loss = self.vae_loss(x_hat, train_data, mu, logvar)
        loss.backward()
        self.optimizers["shr_vae"].step()
        self.optimizers["encoder"].step()
        self.optimizers["decoder"].step()
        if self.batch_iteration % 20 == 0:
            print(f"iter {self.batch_iteration}: loss {loss.item():.4f} recon {recon_loss.item():.4f} "
                  f"KL {kl_loss.item():.4f}")


if __name__ == "__main__":
    trainer = ExpressionVAETrainer(batch_size=32)
    trainer.train(epochs=4)
