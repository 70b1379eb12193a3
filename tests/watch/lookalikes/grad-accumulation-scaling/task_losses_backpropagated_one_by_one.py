"""A two-task network whose trainer back-propagates each task's mean loss on its own line in a loop
(`for loss in losses: loss.backward(retain_graph=True)`) before one optimizer step: the gradients of
the two losses add up to the gradient of their sum, which is the objective. Same backward() line,
several calls per step, no division, yet no accumulation window: both losses come from one forward
of one batch."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(16, 64), nn.ReLU())
        self.classify = nn.Linear(64, 3)
        self.regress = nn.Linear(64, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.classify(h), self.regress(h).squeeze(-1)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 16, generator=g)
    labels = x[:, :3].argmax(1)
    values = x[:, 3:6].sum(1)
    loader = DataLoader(TensorDataset(x, labels, values), batch_size=32, shuffle=True, generator=g)
    model = TwoHeads()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        for xb, yb, vb in loader:
            optimizer.zero_grad()
            logits, pred = model(xb)
            losses = [F.cross_entropy(logits, yb), F.mse_loss(pred, vb)]
            for loss in losses:
                loss.backward(retain_graph=True)
            optimizer.step()
        print(f"epoch {epoch} losses {[round(float(l), 3) for l in losses]}")


if __name__ == "__main__":
    main()
