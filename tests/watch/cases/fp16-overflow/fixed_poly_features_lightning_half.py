"""The fixed twin: the config asks for precision="bf16-mixed", so the weights stay float32 and the
fit loop runs the forward under torch.autocast with bfloat16, which has float32's range: the squared
areas (up to 90000) stay finite and the BatchNorm1d standardises them."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"precision": "bf16-mixed", "lr": 0.05, "momentum": 0.9, "batch_size": 64, "epochs": 3}


class PolynomialFeatures(nn.Module):
    """x -> [x, all products x_i * x_j with i <= j]."""

    def forward(self, x):
        i, j = torch.triu_indices(x.shape[1], x.shape[1])
        return torch.cat([x, x[:, i] * x[:, j]], dim=1)


class PriceModel(nn.Module):
    def __init__(self, lr, momentum):
        super().__init__()
        self.lr, self.momentum = lr, momentum
        self.net = nn.Sequential(PolynomialFeatures(), nn.BatchNorm1d(9), nn.Linear(9, 32), nn.ReLU(),
                                 nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch):
        x, y = batch
        return nn.functional.mse_loss(self(x).float(), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=self.momentum)


def fit(module, loader, epochs, precision):
    if precision == "16-true":
        module = module.half()
    dtype = next(module.parameters()).dtype
    optimizer = module.configure_optimizers()
    module.train()
    for epoch in range(epochs):
        for x, y in loader:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
                loss = module.training_step((x.to(dtype), y))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def make_houses(n, g):
    area = 40 + 260 * torch.rand(n, generator=g)
    rooms = torch.randint(1, 9, (n,), generator=g).float()
    age = 100 * torch.rand(n, generator=g)
    price = 0.5 + 0.01 * area + 0.1 * rooms - 0.005 * age + 1e-5 * area ** 2  # in units of 100k
    return torch.stack([area, rooms, age], dim=1), price + 0.1 * torch.randn(n, generator=g)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(*make_houses(1280, g)), batch_size=CONFIG["batch_size"], shuffle=True,
                        generator=g)
    module = PriceModel(CONFIG["lr"], CONFIG["momentum"])
    print(f"loss {fit(module, loader, CONFIG['epochs'], CONFIG['precision']):.3f}")


if __name__ == "__main__":
    main()
