"""Healthy look-alike of double-sigmoid: the model returns logits, BCEWithLogitsLoss gets them,
and torch.sigmoid is applied only for the accuracy computed after the step."""
import torch
from torch import nn


def train_step(model, optimizer, criterion, x, y):
    optimizer.zero_grad()
    logits = model(x).squeeze(-1)
    loss = criterion(logits, y)
    loss.backward()
    optimizer.step()
    predictions = torch.sigmoid(logits.detach()) > 0.5
    return loss.item(), (predictions == y.bool()).float().mean().item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).float()
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(1.5))
    for step in range(60):
        i = (step * 64) % 512
        loss, accuracy = train_step(model, optimizer, criterion, x[i:i + 64], y[i:i + 64])
    print(f"loss {loss:.3f}, accuracy {accuracy:.2f}")


if __name__ == "__main__":
    main()
