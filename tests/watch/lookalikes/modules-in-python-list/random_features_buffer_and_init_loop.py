"""Healthy look-alike of modules-in-python-list: a random Fourier feature regressor draws its fixed
projection with nn.init.normal_ on a tensor it then registers as a buffer (meant to stay fixed, saved
and moved with the model), and an init_weights() helper re-initialises every nn.Linear through
`m.weight.data` with nn.init.kaiming_normal_ (plain tensors that are views of registered parameters);
a copy of the projection kept for a reset() shares the buffer's storage."""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class FourierFeatureRegressor(nn.Module):
    def __init__(self, n_in=2, n_features=64, scale=3.0):
        super().__init__()
        projection = torch.empty(n_in, n_features)
        nn.init.normal_(projection, std=scale)
        self.register_buffer("projection", projection)
        self.initial_projection = self.projection       # the same storage, for reset()
        self.mlp = nn.Sequential(nn.Linear(2 * n_features, 64), nn.ReLU(), nn.Linear(64, 1))
        self.init_weights()

    def init_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight.data, nonlinearity="relu")
                nn.init.zeros_(m.bias.data)

    def forward(self, x):
        z = 2 * math.pi * x @ self.projection
        return self.mlp(torch.cat([z.sin(), z.cos()], dim=-1)).squeeze(-1)


def train(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(1024, 2, generator=g)
    y = torch.sin(6 * x[:, 0]) * torch.cos(4 * x[:, 1])
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, generator=g)
    model = FourierFeatureRegressor()
    train(model, loader, torch.optim.Adam(model.parameters(), lr=1e-3), epochs=4)


if __name__ == "__main__":
    main()
