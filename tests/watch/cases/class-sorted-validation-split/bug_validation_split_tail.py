"""Lightning-like module (training_step, validation_step and configure_optimizers called by a
small hand-written fit loop) with a Keras-style validation_split helper that holds out the last
20% of the arrays. The arrays are sorted by label, so the held-out tail is one whole class that
training never sees."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 5


def load_arrays(per_class=60):
    g = torch.Generator().manual_seed(0)
    offsets = torch.randn(CLASSES, 8, generator=g) * 1.5
    x = torch.cat([offsets[c] + torch.randn(per_class, 8, generator=g) for c in range(CLASSES)])
    return x, torch.arange(CLASSES).repeat_interleave(per_class)


def validation_split(x, y, fraction=0.2):
    n_val = int(len(x) * fraction)
    return (x[:-n_val], y[:-n_val]), (x[-n_val:], y[-n_val:])


class LitClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, CLASSES))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y).item()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def fit(module, train_loader, val_loader, epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        module.train()
        for i, batch in enumerate(train_loader):
            optimizer.zero_grad()
            module.training_step(batch, i).backward()
            optimizer.step()
        module.eval()
        with torch.no_grad():
            val_loss = sum(module.validation_step(b, i) for i, b in enumerate(val_loader)) / len(val_loader)
    return val_loss


def main():
    torch.manual_seed(0)
    (x_train, y_train), (x_val, y_val) = validation_split(*load_arrays())
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=48, shuffle=True)
    val_loader = DataLoader(TensorDataset(x_val, y_val), batch_size=60)
    print(f"val loss {fit(LitClassifier(), train_loader, val_loader, epochs=10):.2f}")


if __name__ == "__main__":
    main()
