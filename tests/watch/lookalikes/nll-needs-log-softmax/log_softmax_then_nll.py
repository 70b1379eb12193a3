"""Healthy look-alike of nll-needs-log-softmax: the model ends in nn.LogSoftmax and is trained
with nn.NLLLoss, the pairing the loss expects (the MNIST example's shape)."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.25), nn.Linear(64, 6))
        self.log_softmax = nn.LogSoftmax(dim=1)

    def forward(self, x):
        return self.log_softmax(self.body(x))


def train(model, optimizer, criterion, x, y, steps):
    model.train()
    for step in range(steps):
        i = (step * 32) % len(x)
        optimizer.zero_grad()
        loss = criterion(model(x[i:i + 32]), y[i:i + 32])
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 20, generator=g)
    y = x[:, :6].argmax(1)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    print(f"loss {train(model, optimizer, nn.NLLLoss(), x, y, steps=60):.3f}")


if __name__ == "__main__":
    main()
