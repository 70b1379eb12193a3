"""A recommender built from blocks (an MLP body and a BinaryOutput head) and fitted by a small
Lightning-like loop through training_step/configure_optimizers; the BinaryOutput head applies a
sigmoid and its default loss is BCEWithLogitsLoss, which applies another one.

Thread: https://github.com/NVIDIA-Merlin/models/pull/1175
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BinaryOutput(nn.Module):
    def __init__(self, in_features, target="click"):
        super().__init__()
        self.target = target
        self.linear = nn.Linear(in_features, 1)
        self.activation = nn.Sigmoid()
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, x):
        return self.activation(self.linear(x)).squeeze(-1)


class Model(nn.Module):
    def __init__(self, *blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x

    def training_step(self, batch, batch_idx):
        features, targets = batch
        predictions = self(features)
        return self.blocks[-1].loss(predictions, targets)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=3e-3)


def fit(model, loader, max_epochs):
    optimizer = model.configure_optimizers()
    for epoch in range(max_epochs):
        model.train()
        for i, batch in enumerate(loader):
            loss = model.training_step(batch, i)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def clicks(n=4096, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 24, generator=g)
    logit = 2.5 * (x[:, :4].sum(1) / 2) - 1.5
    return TensorDataset(x, torch.bernoulli(torch.sigmoid(logit), generator=g))


def main():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
    model = Model(mlp, BinaryOutput(32))
    loader = DataLoader(clicks(), batch_size=128, shuffle=True, generator=torch.Generator().manual_seed(0))
    fit(model, loader, max_epochs=3)


if __name__ == "__main__":
    main()
