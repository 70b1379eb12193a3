"""A tabular regression (house-price-like features in raw units) whose model factory first computes
the training set's feature mean and std and bakes them into a Standardize layer. The factory is
decorated with @torch.inference_mode() because it only "reads statistics", but the whole model is
built inside it, so every weight and buffer is an inference tensor and the first training forward
fails with "Inference tensors cannot be saved for backward"."""
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


@torch.inference_mode()
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
