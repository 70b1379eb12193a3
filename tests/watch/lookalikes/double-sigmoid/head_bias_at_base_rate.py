"""Healthy look-alike of double-sigmoid: a fraud detector whose output layer starts with zero
weights and its bias at the log-odds of the positive rate (a common initialisation for imbalanced
data), trained with BCEWithLogitsLoss on the logits. Its early logits all sit near
log(0.6 / 0.4) = 0.41, inside [0, 1] as a sigmoid's output would be, but no sigmoid made them."""
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Detector(nn.Module):
    def __init__(self, features=12, positive_rate=0.6):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 32), nn.ReLU())
        self.out = nn.Linear(32, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.constant_(self.out.bias, math.log(positive_rate / (1 - positive_rate)))

    def forward(self, x):
        return self.out(self.body(x)).squeeze(-1)


def train(model, optimizer, criterion, loader, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 12, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] + 0.25 > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, generator=g)
    model = Detector()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    print(f"loss {train(model, optimizer, nn.BCEWithLogitsLoss(), loader, epochs=5):.3f}")


if __name__ == "__main__":
    main()
