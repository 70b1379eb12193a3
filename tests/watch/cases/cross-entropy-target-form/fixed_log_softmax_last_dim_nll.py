"""Lightning-like module (training_step and configure_optimizers called by a small hand-written
loop): a per-position classifier over a transformer encoder returns log_softmax over the last
dimension, shape (batch, positions, classes); the fix flattens it to (batch * positions,
classes) and the targets to (batch * positions,) before F.nll_loss."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

POSITIONS, CLASSES, DIM = 8, 8, 16


class PositionClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, DIM)
        self.encoder = nn.TransformerEncoderLayer(DIM, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.out = nn.Linear(DIM, CLASSES)

    def forward(self, x):
        return F.log_softmax(self.out(self.encoder(self.inp(x))), dim=-1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.nll_loss(self(x).reshape(-1, CLASSES), y.reshape(-1))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=2e-3)


def fit(module, loader, epochs):
    optimizer = module.configure_optimizers()
    for epoch in range(epochs):
        for i, batch in enumerate(loader):
            optimizer.zero_grad()
            loss = module.training_step(batch, i)
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(480, POSITIONS, 4, generator=g)
    y = ((x[..., 0] > 0).long() * 4 + (x[..., 1] > 0).long() * 2 + (x[..., 2] > 0).long())
    loader = DataLoader(TensorDataset(x, y), batch_size=24, shuffle=True)
    print(f"loss {fit(PositionClassifier(), loader, epochs=3):.3f}")


if __name__ == "__main__":
    main()
