"""Stage-wise boosting: an Ensemble module registers its learners (nn.ModuleList) and a learnable
shrinkage scale. Each stage trains only the new learner, with the ensemble's scale in the loss but
held by no optimizer yet (the stage calls ensemble.forward() directly, as GrowNet's trainer does);
a corrective phase then trains the whole ensemble, scale included. The scale is registered all
along, so nothing is left out by mistake."""
import torch
from torch import nn


class Ensemble(nn.Module):
    def __init__(self):
        super().__init__()
        self.learners = nn.ModuleList()
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        out = torch.zeros(len(x), 1)
        for learner in self.learners:
            out = out + learner(x)
        return self.scale * out


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 6, generator=g)
    y = (x[:, :1] * 2 - x[:, 1:2]) + 0.1 * torch.randn(512, 1, generator=g)
    ensemble = Ensemble()
    for stage in range(3):
        learner = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.Adam(learner.parameters(), lr=1e-2)
        for step in range(30):
            with torch.no_grad():
                residual = y - ensemble.forward(x)
            loss = ((ensemble.scale * learner(x) - residual) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        ensemble.learners.append(learner)
        corrective = torch.optim.Adam(ensemble.parameters(), lr=1e-3)
        for step in range(10):
            loss = ((ensemble.forward(x) - y) ** 2).mean()
            corrective.zero_grad()
            loss.backward()
            corrective.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
