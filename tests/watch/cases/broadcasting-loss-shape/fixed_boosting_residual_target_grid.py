"""Gradient boosting with small networks: a Booster class adds one weak learner per stage and fits
it to the current residual with MSELoss. The label batch is viewed as (N, 1) before the residual
is taken, so the residual, the ensemble's prediction and each weak learner's output are all (N, 1)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def weak_learner():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))


class Booster:
    def __init__(self, shrinkage=0.5):
        self.learners, self.shrinkage = [], shrinkage

    @torch.no_grad()
    def predict(self, x):
        out = torch.zeros(x.shape[0], 1)
        for learner in self.learners:
            out += self.shrinkage * learner(x)
        return out

    def add_stage(self, loader, epochs=2, lr=1e-2):
        learner = weak_learner()
        optimizer = torch.optim.Adam(learner.parameters(), lr=lr)
        criterion = nn.MSELoss()
        for _ in range(epochs):
            for x, y in loader:
                residual = y.view(-1, 1) - self.predict(x)
                loss = criterion(learner(x), residual)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        self.learners.append(learner)
        return loss.item()


def make_data(n=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    return TensorDataset(x, x[:, 0] * 2 + torch.sin(3 * x[:, 1]))


def main():
    torch.manual_seed(0)
    loader = DataLoader(make_data(), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    booster = Booster()
    for stage in range(4):
        print(f"stage {stage} loss {booster.add_stage(loader):.3f}")


if __name__ == "__main__":
    main()
