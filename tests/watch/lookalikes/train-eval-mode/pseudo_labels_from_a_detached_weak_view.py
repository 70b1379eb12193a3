"""Healthy look-alike of train-eval-mode: semi-supervised training in the FixMatch style with two
forward passes per step. The model (BatchNorm, Dropout) runs in training mode on the weakly
augmented unlabeled batch, with grad on, and its output is only used detached, as pseudo-labels;
the labeled batch and the strongly augmented view then go through the model and the loss. The first
pass never reaches backward, on purpose, on every step: it is part of training, not an evaluation."""
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2),
                                  nn.Linear(64, 3))

    def forward(self, x):
        return self.body(x)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    centres = 2 * torch.randn(3, 16, generator=g)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9)
    for step in range(60):
        y = torch.randint(0, 3, (16,), generator=g)
        x = centres[y] + torch.randn(16, 16, generator=g)
        unlabeled = centres[torch.randint(0, 3, (48,), generator=g)] + torch.randn(48, 16, generator=g)
        weak = unlabeled + 0.1 * torch.randn(48, 16, generator=g)
        strong = unlabeled + 0.8 * torch.randn(48, 16, generator=g)
        probs = torch.softmax(model(weak).detach(), dim=1)
        confidence, pseudo = probs.max(1)
        mask = (confidence > 0.9).float()
        loss = F.cross_entropy(model(x), y) + (F.cross_entropy(model(strong), pseudo, reduction="none") * mask).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f} confident {int(mask.sum())}")


if __name__ == "__main__":
    main()
