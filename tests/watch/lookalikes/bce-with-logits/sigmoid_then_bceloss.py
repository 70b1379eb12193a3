"""Healthy look-alike of bce-with-logits: a binary classifier whose model ends in nn.Sigmoid,
trained with nn.BCELoss on those probabilities (less stable than BCEWithLogitsLoss on logits,
but correct: its inputs stay inside [0, 1] and away from exactly 0 or 1)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(model, optimizer, criterion, loader, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x).squeeze(-1), y)
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    y = (x[:, 0] - x[:, 3] + 0.3 * torch.randn(640, generator=g) > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    print(f"loss {train(model, optimizer, nn.BCELoss(), loader, epochs=5):.3f}")


if __name__ == "__main__":
    main()
