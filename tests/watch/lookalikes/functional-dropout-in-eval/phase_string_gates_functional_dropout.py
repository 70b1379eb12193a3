"""Healthy look-alike of functional-dropout-in-eval: a model that keeps its own phase, set by the
trainer to "train" or "val", and applies F.dropout(h, p) (training argument left out) only when
`self.phase == "train"`; the trainer calls model.eval() and sets the phase before validating."""
import torch
import torch.nn.functional as F
from torch import nn


class PhaseNet(nn.Module):
    def __init__(self, p=0.3):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(12, 64), nn.Linear(64, 3)
        self.p, self.phase = p, "train"

    def forward(self, x):
        h = F.relu(self.fc1(x))
        if self.phase == "train":
            h = F.dropout(h, self.p)
        return self.fc2(h)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(12, 3, generator=g)
    x = torch.randn(1400, 12, generator=g)
    y = (x @ w).argmax(1)
    model = PhaseNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        model.train()
        model.phase = "train"
        for i in range(0, 1280, 16):
            loss = F.cross_entropy(model(x[i:i + 16]), y[i:i + 16])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        model.phase = "val"
        with torch.no_grad():
            acc = (model(x[1280:]).argmax(1) == y[1280:]).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.3f} val acc {acc:.3f}")


if __name__ == "__main__":
    main()
