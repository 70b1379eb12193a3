"""A chemprop-style reaction property regressor (barrier heights in kcal/mol): a ReactionDataset whose
normalize_targets() fits a standard scaler on the training targets and stores the scaled copy in
self.Y, and an MPNN-like Lightning-style module whose predictor carries an unscale output transform
that is applied only in eval mode (validation keeps it off and scores in the training scale). The
reaction dataset's __getitem__ builds each datum from the raw datapoint, d.y, instead of self.Y[idx],
so training and validation both see the unscaled barrier heights while the predictor assumes scaled
ones. Training and validation losses look fine; at test time the transform multiplies the raw-scale
predictions by the target std and adds the mean, and the test MAE is an order of magnitude worse.

Thread: https://github.com/chemprop/chemprop/pull/803
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Datapoint:
    def __init__(self, x, y):
        self.x, self.y = x, y


class ReactionDataset(torch.utils.data.Dataset):
    def __init__(self, data):
        self.data = data
        self.Y = np.stack([d.y for d in data])

    def normalize_targets(self, scaler=None):
        if scaler is None:
            raw = np.stack([d.y for d in self.data])
            scaler = (raw.mean(0), raw.std(0))
        mean, std = scaler
        self.Y = (np.stack([d.y for d in self.data]) - mean) / std
        return scaler

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        d = self.data[idx]
        return torch.from_numpy(d.x), torch.from_numpy(d.y)


class UnscaleTransform(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32))

    def forward(self, y):
        return y if self.training else y * self.std + self.mean


class RegressionFFN(nn.Module):
    def __init__(self, d_in, output_transform):
        super().__init__()
        self.ffn = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
        self.output_transform = output_transform

    def forward(self, h):
        return self.output_transform(self.ffn(h))


class MPNN(nn.Module):
    def __init__(self, d_in, output_transform):
        super().__init__()
        self.message_passing = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU())
        self.predictor = RegressionFFN(64, output_transform)

    def forward(self, x):
        return self.predictor(self.message_passing(x))

    def training_step(self, batch):
        x, y = batch
        return F.mse_loss(self(x), y)

    def validation_step(self, batch):
        self.predictor.output_transform.train()  # validation is scored in the training scale
        x, y = batch
        return (self(x) - y).abs().mean()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def make_data(n, w, rng):
    x = rng.normal(size=(n, 16)).astype(np.float32)
    y = (30.0 + 8.0 * np.tanh(x @ w) + rng.normal(0, 0.5, n)).astype(np.float32)[:, None]
    return [Datapoint(a, b) for a, b in zip(x, y)]


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    w = rng.normal(size=16) / 4
    train_dset = ReactionDataset(make_data(640, w, rng))
    val_dset, test_dset = ReactionDataset(make_data(160, w, rng)), ReactionDataset(make_data(160, w, rng))
    scaler = train_dset.normalize_targets()
    val_dset.normalize_targets(scaler)
    model = MPNN(16, UnscaleTransform(*scaler))
    optimizer = model.configure_optimizers()
    g = torch.Generator().manual_seed(0)
    train_loader = torch.utils.data.DataLoader(train_dset, batch_size=32, shuffle=True, generator=g)
    val_loader = torch.utils.data.DataLoader(val_dset, batch_size=160)
    test_loader = torch.utils.data.DataLoader(test_dset, batch_size=160)
    for epoch in range(12):
        model.train()
        for batch in train_loader:
            loss = model.training_step(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_mae = model.validation_step(next(iter(val_loader)))
        print(f"epoch {epoch} train_loss {loss.item():.3f} val_mae {val_mae.item():.3f}")
    model.eval()
    with torch.no_grad():
        x, y = next(iter(test_loader))
        print(f"test MAE (kcal/mol) {(model(x) - y).abs().mean().item():.2f}")


if __name__ == "__main__":
    main()
