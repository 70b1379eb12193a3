"""A classifier built from a hand-written layer class: MaskedLinear keeps a connectivity mask as a
registered buffer but its weight as a plain tensor, torch.empty filled by nn.init.kaiming_uniform_
(the bias is an nn.Parameter). A Trainer class builds SGD from model.parameters(), which lists the
biases and the last layer only: the first layer stays a fixed random projection, and with few hidden
units the signal in two of the forty inputs is mostly lost."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MaskedLinear(nn.Module):
    def __init__(self, n_in, n_out, density=0.8, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("mask", (torch.rand(n_out, n_in, generator=g) < density).float())
        self.weight = torch.empty(n_out, n_in)
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return F.linear(x, self.weight * self.mask, self.bias)


class Net(nn.Module):
    def __init__(self, n_in=40, hidden=6, classes=4):
        super().__init__()
        self.layer1 = MaskedLinear(n_in, hidden)
        self.layer2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.layer2(F.relu(self.layer1(x)))


class Trainer:
    def __init__(self, model, lr=0.1):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self, loader):
        correct = total = 0
        for x, y in loader:
            logits = self.model(x)
            loss = self.criterion(logits, y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            correct += int((logits.argmax(1) == y).sum())
            total += len(y)
        return loss.item(), correct / total


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(1024, 40, generator=g)
    y = (x[:, 0] > 0).long() * 2 + (x[:, 1] > 0).long()     # four classes from two of the inputs
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    trainer = Trainer(Net())
    for epoch in range(5):
        loss, acc = trainer.train_epoch(loader)
        print(f"epoch {epoch} loss {loss:.3f} train accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
