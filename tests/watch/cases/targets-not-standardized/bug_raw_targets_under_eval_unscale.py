"""A yield regressor whose head ends in Denormalize, which maps standardized predictions back to
percent in eval mode only (so predict() returns real units). The training loop was meant to fit
standardized targets but passes the raw yields (mean about 60, std about 10): the network learns
percent directly, and predict() multiplies those percent by the std and adds the mean again. The
fix standardizes the targets with the statistics Denormalize holds."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Denormalize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean))
        self.register_buffer("std", torch.as_tensor(std))

    def forward(self, y):
        return y if self.training else y * self.std + self.mean


class YieldModel(nn.Module):
    def __init__(self, n_features, denormalize):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_features, 48), nn.SiLU(), nn.Linear(48, 48), nn.SiLU())
        self.head = nn.Linear(48, 1)
        self.denormalize = denormalize

    def forward(self, x):
        return self.denormalize(self.head(self.encoder(x)))


def conditions(n, g):
    x = torch.randn(n, 10, generator=g)
    y = 60 + 10 * torch.tanh(x[:, :3].sum(1, keepdim=True) / 2) + 0.5 * torch.randn(n, 1, generator=g)
    return x, y


def fit(model, loader, optimizer, scaler, epochs, standardize):
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            target = (y - scaler[0]) / scaler[1] if standardize else y
            loss = F.mse_loss(model(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} train loss {loss.item():.3f}")


@torch.no_grad()
def predict(model, x):
    model.eval()
    return model(x)


def main(standardize=False):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    (x_train, y_train), (x_test, y_test) = conditions(512, g), conditions(128, g)
    scaler = (y_train.mean(), y_train.std())
    model = YieldModel(10, Denormalize(*scaler))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True, generator=g)
    fit(model, loader, optimizer, scaler, epochs=4, standardize=standardize)
    print(f"test MAE {(predict(model, x_test) - y_test).abs().mean().item():.2f} percent")


if __name__ == "__main__":
    main()
