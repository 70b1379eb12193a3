"""A deep active learning toolkit: a Data object with a labelled mask, a Net wrapper whose
train(data) builds a fresh classifier with Adam each round, a Strategy base class and a VAAL
strategy whose train_vaal() fits a VAE and a latent discriminator on joint labelled/unlabelled
batches before the discriminator scores the pool. The VAE step computes total_vae_loss but calls
opt_vae.zero_grad(), dsc_loss.backward() and opt_dis.step(): the VAE optimizer never steps, so the
VAE keeps its random weights, and the discriminator's gradients are never zeroed and pile up.

Thread: https://github.com/SineZHAN/deepALplus/issues/1
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

torch.manual_seed(0)
np.random.seed(0)


class Data:
    def __init__(self, X, Y, X_te, Y_te):
        self.X_train, self.Y_train, self.X_test, self.Y_test = X, Y, X_te, Y_te
        self.n_pool = len(X)
        self.labeled_idxs = np.zeros(self.n_pool, dtype=bool)

    def initialize_labels(self, num):
        self.labeled_idxs[np.random.permutation(self.n_pool)[:num]] = True

    def get_labeled_data(self):
        idxs = np.arange(self.n_pool)[self.labeled_idxs]
        return idxs, (self.X_train[idxs], self.Y_train[idxs])

    def get_unlabeled_data(self):
        idxs = np.arange(self.n_pool)[~self.labeled_idxs]
        return idxs, (self.X_train[idxs], self.Y_train[idxs])


class Net:
    def __init__(self, n_epoch=5):
        self.n_epoch = n_epoch

    def train(self, data):
        x, y = data
        self.clf = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
        optimizer = optim.Adam(self.clf.parameters(), lr=1e-3)
        for _ in range(self.n_epoch):
            for idx in torch.randperm(len(y)).split(32):
                optimizer.zero_grad()
                F.cross_entropy(self.clf(x[idx]), y[idx]).backward()
                optimizer.step()

    def predict(self, x):
        with torch.no_grad():
            return self.clf(x).argmax(1)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(16, 2 * 8)
        self.dec = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, 1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), z, mu, logvar


def vae_loss(x, recon, mu, logvar, beta):
    return F.mse_loss(recon, x) + beta * (-0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()))


class VAAL:
    def __init__(self, dataset, net):
        self.dataset, self.net = dataset, net

    def train(self):
        self.net.train(self.dataset.get_labeled_data()[1])

    def update(self, idxs):
        self.dataset.labeled_idxs[idxs] = True

    def query(self, n):
        unlabeled_idxs, (x_un, _) = self.dataset.get_unlabeled_data()
        self.train_vaal()
        with torch.no_grad():
            scores = self.dis(self.vae(x_un)[2]).view(-1)
        return unlabeled_idxs[scores.sort(descending=True)[1][:n].numpy()]

    def train_vaal(self, total_epoch=30, num_vae_steps=1, beta=1, adv_param=1):
        self.vae = VAE()
        self.dis = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
        opt_vae = optim.Adam(self.vae.parameters(), lr=1e-3)
        opt_dis = optim.Adam(self.dis.parameters(), lr=1e-3)
        _, (x_lb, _) = self.dataset.get_labeled_data()
        _, (x_un, _) = self.dataset.get_unlabeled_data()
        bce_loss = nn.BCELoss()
        for epoch in range(total_epoch):
            self.vae.train()
            self.dis.train()
            for lb, un in zip(torch.randperm(len(x_lb)).split(32), torch.randperm(len(x_un)).split(32)):
                label_x, unlabel_x = x_lb[lb], x_un[un]
                for count in range(num_vae_steps):
                    recon, z, mu, logvar = self.vae(label_x)
                    unsup_loss = vae_loss(label_x, recon, mu, logvar, beta)
                    un_recon, un_z, un_mu, un_logvar = self.vae(unlabel_x)
                    transductive_loss = vae_loss(unlabel_x, un_recon, un_mu, un_logvar, beta)
                    label_preds, unlabel_preds = self.dis(mu).view(-1), self.dis(un_mu).view(-1)
                    dsc_loss = (bce_loss(label_preds, torch.ones(len(label_x)))
                                + bce_loss(unlabel_preds, torch.ones(len(unlabel_x))))
                    total_vae_loss = unsup_loss + transductive_loss + adv_param * dsc_loss
                    opt_vae.zero_grad()
                    dsc_loss.backward()
                    opt_dis.step()
        print(f"  vaal: last total_vae_loss {total_vae_loss.item():.3f} dsc_loss {dsc_loss.item():.3f}")


def main():
    g = torch.Generator().manual_seed(0)
    centers = 2.0 * torch.randn(4, 16, generator=g)
    y = torch.randint(0, 4, (2400,), generator=g)
    x = centers[y] + torch.randn(2400, 16, generator=g)
    dataset = Data(x[:2000], y[:2000], x[2000:], y[2000:])
    dataset.initialize_labels(64)
    strategy = VAAL(dataset, Net())
    strategy.train()
    acc = (strategy.net.predict(dataset.X_test) == dataset.Y_test).float().mean().item()
    print(f"Round 0 testing accuracy {acc:.3f}")
    for rd in range(1, 4):
        strategy.update(strategy.query(32))
        strategy.train()
        acc = (strategy.net.predict(dataset.X_test) == dataset.Y_test).float().mean().item()
        print(f"Round {rd} testing accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
