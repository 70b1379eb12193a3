"""The training step and the evaluation step side by side, each with the grad mode it needs: only
evaluation runs under torch.no_grad()."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(6, 24), nn.GELU(), nn.Linear(24, 3))

    def forward(self, x):
        return self.layers(x)


@torch.no_grad()
def evaluate(model, x, y):
    return (model(x).argmax(1) == y).float().mean().item()


def training_step(model, optimizer, x, y):
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(300, 6)
    y = (x[:, 0] > -0.5).long() + (x[:, 0] > 0.5).long()
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(0, 300, 30):
        training_step(model, optimizer, x[i:i + 30], y[i:i + 30])
    print(f"accuracy {evaluate(model, x, y):.2f}")


if __name__ == "__main__":
    main()
