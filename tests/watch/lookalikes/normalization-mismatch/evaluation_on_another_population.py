"""A house-price regressor evaluated on houses from another city: the scaler fitted on the
training city transforms both splits, and the other city's houses are larger and newer, so its
inputs sit off centre on the training scale (a shift in the data, not in its preprocessing)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class StandardScaler:
    def fit(self, x):
        self.mean_, self.scale_ = x.mean(0), x.std(0)
        return self

    def transform(self, x):
        return (x - self.mean_) / self.scale_


def make_houses(n, seed, bigger=0.0):
    g = torch.Generator().manual_seed(seed)
    area = 40 + bigger + 160 * torch.rand(n, generator=g)
    rooms = torch.randint(1, 7, (n,), generator=g).float()
    year = 1950 + bigger / 4 + 70 * torch.rand(n, generator=g)
    distance = 30 * torch.rand(n, generator=g)
    x = torch.stack([area, rooms, year, distance], 1)
    price = 3.0 * area + 20 * rooms + 1.5 * (year - 1950) - 4 * distance + 10 * torch.randn(n, generator=g)
    return x, (price / 100).unsqueeze(1)


def prepare(train, val):
    scaler = StandardScaler().fit(train[0])
    train_set = TensorDataset(scaler.transform(train[0]), train[1])
    val_set = TensorDataset(scaler.transform(val[0]), val[1])
    return train_set, val_set


def run(model, train_loader, val_loader, epochs=6):
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val_loss = sum(F.mse_loss(model(x), y, reduction="sum").item() for x, y in val_loader)
        print(f"epoch {epoch}: train mse {loss.item():.3f}  val mse {val_loss / len(val_loader.dataset):.3f}")


def main():
    torch.manual_seed(0)
    train_set, val_set = prepare(make_houses(1024, 0), make_houses(256, 1, bigger=60.0))
    model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    run(model, DataLoader(train_set, batch_size=64, shuffle=True), DataLoader(val_set, batch_size=128))


if __name__ == "__main__":
    main()
