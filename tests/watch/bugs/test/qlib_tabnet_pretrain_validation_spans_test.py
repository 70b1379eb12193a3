"""A TabNet-style model for a stock-return benchmark: a TabnetModel wrapper class with pretrain_fn(),
fit(), predict(), pretrain_epoch() / pretrain_test_epoch() for self-supervised masked-feature
reconstruction (encoder + decoder, own Adam optimizer), and train_epoch() / test_epoch() for the
supervised fine-tuning of a FinetuneModel head on top of the pretrained encoder. The data are
prepared by named date segments (pretrain, pretrain_validation, train, valid, test), like a
dataset.prepare(segments) call. The pretrain_validation segment runs to the end of the data, so it
covers the whole test period: the pretraining checkpoint is chosen by its reconstruction loss on
the test rows, and test data leak into model selection before the test score is computed.

Thread: https://github.com/microsoft/qlib/pull/329
"""
import copy

import numpy as np
import torch
import torch.nn as nn

D_FEAT, N_DAYS, N_STOCKS = 16, 1200, 4
SEGMENTS = {
    "pretrain": (0, 699),
    "pretrain_validation": (700, 1199),   # runs through the test period
    "train": (0, 699),
    "valid": (700, 899),
    "test": (900, 1199),
}


def make_frame(seed=0):
    """Rows are (day, stock); features drift slowly over time; the label depends on a few features."""
    g = torch.Generator().manual_seed(seed)
    days = torch.arange(N_DAYS).repeat_interleave(N_STOCKS)
    drift = (days.float() / N_DAYS).unsqueeze(1) * torch.linspace(-1, 1, D_FEAT)
    latent = torch.randn(len(days), 4, generator=g)
    mix = torch.randn(4, D_FEAT, generator=torch.Generator().manual_seed(1))
    x = latent @ mix + drift + 0.3 * torch.randn(len(days), D_FEAT, generator=g)
    y = (0.6 * latent[:, 0] - 0.4 * latent[:, 1] + 0.5 * torch.randn(len(days), generator=g)).unsqueeze(1)
    return days, x, y


class Dataset:
    def __init__(self):
        self.days, self.x, self.y = make_frame()

    def prepare(self, names):
        out = []
        for name in names:
            lo, hi = SEGMENTS[name]
            keep = (self.days >= lo) & (self.days <= hi)
            out.append((self.x[keep], self.y[keep]))
        return out


class FeatureBlock(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc = nn.Linear(d_in, 2 * d_out)
        self.bn = nn.BatchNorm1d(2 * d_out, momentum=0.02)

    def forward(self, x):
        return nn.functional.glu(self.bn(self.fc(x)))


class TabNetEncoder(nn.Module):
    def __init__(self, d_feat, n_d=16, n_steps=3, gamma=1.3):
        super().__init__()
        self.n_steps, self.gamma, self.n_d = n_steps, gamma, n_d
        self.bn = nn.BatchNorm1d(d_feat, momentum=0.02)
        self.first = FeatureBlock(d_feat, 2 * n_d)
        self.steps = nn.ModuleList(FeatureBlock(d_feat, 2 * n_d) for _ in range(n_steps))
        self.attn = nn.ModuleList(nn.Linear(n_d, d_feat) for _ in range(n_steps))

    def forward(self, x, priors):
        x = self.bn(x)
        a = self.first(x)[:, self.n_d:]
        out, sparse = 0.0, 0.0
        for step in range(self.n_steps):
            mask = torch.softmax(self.attn[step](a) + torch.log(priors + 1e-6), dim=-1)
            sparse = sparse + (-mask * torch.log(mask + 1e-10)).sum(1).mean() / self.n_steps
            priors = priors * (self.gamma - mask)
            h = self.steps[step](x * mask)
            out = out + torch.relu(h[:, :self.n_d])
            a = h[:, self.n_d:]
        return out, sparse


class Decoder(nn.Module):
    def __init__(self, n_d, d_feat):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_d, 32), nn.ReLU(), nn.Linear(32, d_feat))

    def forward(self, vec):
        return self.net(vec)


class FinetuneModel(nn.Module):
    def __init__(self, n_d, out_dim, encoder):
        super().__init__()
        self.encoder, self.fc = encoder, nn.Linear(n_d, out_dim)

    def forward(self, x, priors):
        return self.fc(self.encoder(x, priors)[0])


class TabnetModel:
    def __init__(self, d_feat=D_FEAT, n_d=16, batch_size=256, lr=0.01, pretrain_n_epochs=4, n_epochs=5, ps=0.3):
        torch.manual_seed(0)
        self.d_feat, self.n_d, self.batch_size, self.lr, self.ps = d_feat, n_d, batch_size, lr, ps
        self.pretrain_n_epochs, self.n_epochs = pretrain_n_epochs, n_epochs
        self.tabnet_model = TabNetEncoder(d_feat, n_d)
        self.tabnet_decoder = Decoder(n_d, d_feat)
        params = list(self.tabnet_model.parameters()) + list(self.tabnet_decoder.parameters())
        self.pretrain_optimizer = torch.optim.Adam(params, lr=lr)

    def pretrain_loss_fn(self, f_hat, f, S):
        return (((f_hat - f) * S) ** 2).sum() / S.sum().clamp(min=1)

    def pretrain_epoch(self, x):
        self.tabnet_model.train()
        self.tabnet_decoder.train()
        perm = torch.randperm(len(x))
        for i in range(0, len(x) - self.batch_size + 1, self.batch_size):
            f = x[perm[i:i + self.batch_size]]
            S = torch.bernoulli(torch.full_like(f, self.ps))
            vec, sparse = self.tabnet_model(f * (1 - S), 1 - S)
            loss = self.pretrain_loss_fn(self.tabnet_decoder(vec), f, S)
            self.pretrain_optimizer.zero_grad()
            loss.backward()
            self.pretrain_optimizer.step()

    def pretrain_test_epoch(self, x):
        self.tabnet_model.eval()
        self.tabnet_decoder.eval()
        g = torch.Generator().manual_seed(123)
        with torch.no_grad():
            S = torch.bernoulli(torch.full(x.shape, self.ps), generator=g)
            vec, _ = self.tabnet_model(x * (1 - S), 1 - S)
            return self.pretrain_loss_fn(self.tabnet_decoder(vec), x, S).item()

    def pretrain_fn(self, dataset):
        (x_train, _), (x_valid, _) = dataset.prepare(["pretrain", "pretrain_validation"])
        best_loss, best_state = np.inf, None
        for epoch in range(self.pretrain_n_epochs):
            self.pretrain_epoch(x_train)
            train_loss, valid_loss = self.pretrain_test_epoch(x_train), self.pretrain_test_epoch(x_valid)
            print(f"pretrain epoch {epoch} train {train_loss:.4f} valid {valid_loss:.4f}")
            if valid_loss < best_loss:
                best_loss, best_state = valid_loss, copy.deepcopy(self.tabnet_model.state_dict())
        self.tabnet_model.load_state_dict(best_state)

    def mse(self, pred, label):
        return torch.mean((pred - label) ** 2)

    def train_epoch(self, x, y):
        self.model.train()
        perm = torch.randperm(len(x))
        for i in range(0, len(x) - self.batch_size + 1, self.batch_size):
            idx = perm[i:i + self.batch_size]
            pred = self.model(x[idx], torch.ones(len(idx), self.d_feat))
            loss = self.mse(pred, y[idx])
            self.train_optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_value_(self.model.parameters(), 3.0)
            self.train_optimizer.step()

    def test_epoch(self, x, y):
        self.model.eval()
        with torch.no_grad():
            return -self.mse(self.model(x, torch.ones(len(x), self.d_feat)), y).item()

    def fit(self, dataset):
        self.pretrain_fn(dataset)
        self.model = FinetuneModel(self.n_d, 1, self.tabnet_model)
        self.train_optimizer = torch.optim.Adam(self.model.parameters(), lr=self.lr)
        (x_train, y_train), (x_valid, y_valid) = dataset.prepare(["train", "valid"])
        best_score, best_param = -np.inf, None
        for epoch in range(self.n_epochs):
            self.train_epoch(x_train, y_train)
            train_score, val_score = self.test_epoch(x_train, y_train), self.test_epoch(x_valid, y_valid)
            print(f"epoch {epoch} train {train_score:.4f} valid {val_score:.4f}")
            if val_score > best_score:
                best_score, best_param = val_score, copy.deepcopy(self.model.state_dict())
        self.model.load_state_dict(best_param)

    def predict(self, dataset):
        (x_test, y_test), = dataset.prepare(["test"])
        print(f"test score {self.test_epoch(x_test, y_test):.4f}")


if __name__ == "__main__":
    dataset = Dataset()
    model = TabnetModel()
    model.fit(dataset)
    model.predict(dataset)
