"""The classifier of bug_features_scaled_again_in_validation.py with validate() putting the feature
scaler back in training mode: the validation features, already standardized by the data pipeline,
reach the layers on the training scale."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class FeatureScaler(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, x):
        return x if self.training else (x - self.mean) / self.std


class Classifier(nn.Module):
    def __init__(self, scaler, n_features=6, n_classes=3):
        super().__init__()
        self.scaler = scaler
        self.body = nn.Sequential(nn.Linear(n_features, 32), nn.ReLU(), nn.Linear(32, n_classes))

    def forward(self, x):
        return self.body(self.scaler(x))


def make_split(n, g):
    raw = torch.tensor([40.0, 5.0, 120.0, 0.5, 900.0, 12.0]) + torch.tensor([8.0, 1.5, 30.0, 0.1, 150.0, 3.0]) \
        * torch.randn(n, 6, generator=g)
    labels = (raw[:, 0] > 40).long() + (raw[:, 2] > 130).long()
    return raw, labels


def train_epoch(model, loader, optimizer):
    model.train()
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


@torch.no_grad()
def validate(model, loader, scaler_in_train_mode):
    model.eval()
    if scaler_in_train_mode:
        model.scaler.train()   # the data is already standardized
    correct = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    return correct / len(loader.dataset)


def main(scaler_in_train_mode=True):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    (x_train, y_train), (x_val, y_val) = make_split(640, g), make_split(160, g)
    mean, std = x_train.mean(0), x_train.std(0)
    train_loader = DataLoader(TensorDataset((x_train - mean) / std, y_train), batch_size=32, shuffle=True, generator=g)
    val_loader = DataLoader(TensorDataset((x_val - mean) / std, y_val), batch_size=80)
    model = Classifier(FeatureScaler(mean, std))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(4):
        loss = train_epoch(model, train_loader, optimizer)
        print(f"epoch {epoch} loss {loss:.3f} val acc {validate(model, val_loader, scaler_in_train_mode):.3f}")


if __name__ == "__main__":
    main()
