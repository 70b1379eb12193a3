"""An age-group classifier (ordinal classes) trained by a train() helper that takes the model, the
optimizer and a DataLoader: cross-entropy plus an ordinal penalty, 0.2 times the expected distance
between the class and the true one under the softmax, which carries gradient and pulls
probability towards the neighbouring classes; `_, pred = torch.max(logits, 1)` is kept for the
logged distance of the predicted class."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 7


def train(model, optimizer, loader, epochs=3):
    model.train()
    for epoch in range(epochs):
        for x, y in loader:
            logits = model(x)
            _, pred = torch.max(logits, 1)
            distance = (torch.arange(CLASSES)[None, :] - y[:, None]).abs().float()
            expected = (logits.softmax(1) * distance).sum(1).mean()
            loss = F.cross_entropy(logits, y) + 0.2 * expected
            ordinal = (pred - y).abs().float().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f} ordinal {ordinal.item():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, CLASSES, (640,), generator=g)
    x = torch.randn(640, 12, generator=g) + 0.5 * y[:, None].float()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    train(model, torch.optim.Adam(model.parameters(), lr=3e-3), loader)


if __name__ == "__main__":
    main()
