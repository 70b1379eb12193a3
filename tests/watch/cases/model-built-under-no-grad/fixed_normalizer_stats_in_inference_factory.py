"""The fixed twin: the same house-price regressor whose factory bakes the training set's feature
mean and std into a Standardize layer, but the factory is decorated with @torch.no_grad() instead
of @torch.inference_mode(). Under no_grad the statistics still carry no graph while nn.Parameter
creates ordinary trainable weights, so the model trains."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"hidden": 64, "lr": 1e-2, "batch_size": 32, "epochs": 2}


class Standardize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, x):
        return (x - self.mean) / self.std


@torch.no_grad()
def build_regressor(train_x, hidden):
    mean, std = train_x.mean(0), train_x.std(0)
    return nn.Sequential(Standardize(mean, std), nn.Linear(train_x.shape[1], hidden), nn.ReLU(),
                         nn.Linear(hidden, 1))


def make_houses(n, g):
    area = 50 + 150 * torch.rand(n, generator=g)                         # square metres
    rooms = torch.randint(1, 7, (n,), generator=g).float()
    age = 80 * torch.rand(n, generator=g)                               # years
    x = torch.stack([area, rooms, age], 1)
    price = 0.012 * area + 0.1 * rooms - 0.01 * age - 1.5 + 0.1 * torch.randn(n, generator=g)
    return x, price.unsqueeze(1)                                         # price in units of 100k, about unit scale


def train(model, loader, cfg):
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    for epoch in range(cfg["epochs"]):
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x, price = make_houses(896, g)
    model = build_regressor(x, CONFIG["hidden"])
    loader = DataLoader(TensorDataset(x, price), batch_size=CONFIG["batch_size"], shuffle=True, generator=g)
    print(f"mse {train(model, loader, CONFIG):.4f}")


if __name__ == "__main__":
    main()
