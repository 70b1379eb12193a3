"""A restoration network conditioned on a pretrained prior: PriorGuidedNet holds a small prior
estimator (conv + BatchNorm, weights loaded once and never trained) that it runs under
torch.no_grad() inside its own forward, and a restoration branch that is trained. Its train()
override keeps the estimator in eval mode whatever mode the rest of the model is put in, so the
estimator's BatchNorm layers use their stored statistics throughout."""
import torch
import torch.nn.functional as F
from torch import nn


class PriorEstimator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 1, 3, padding=1))

    def forward(self, x):
        return torch.sigmoid(self.body(x))


class PriorGuidedNet(nn.Module):
    def __init__(self, estimator):
        super().__init__()
        self.estimator = estimator
        self.restore = nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1))

    def train(self, mode=True):
        super().train(mode)
        self.estimator.eval()  # fixed prior: its BatchNorm statistics stay as loaded
        return self

    def forward(self, x):
        with torch.no_grad():
            prior = self.estimator(x)
        return x + self.restore(torch.cat([x, prior], 1))


def pretrained_estimator(calibration):
    torch.manual_seed(3)
    est = PriorEstimator()
    with torch.no_grad():
        for batch in calibration:  # stand-in for loading a checkpoint: settled BN statistics
            est(batch)
    return est


def make_pairs(n=640, seed=0):
    g = torch.Generator().manual_seed(seed)
    clean = torch.rand(n, 3, 16, 16, generator=g)
    return clean + 0.2 * torch.randn(n, 3, 16, 16, generator=g), clean


def train(model, optimizer, noisy, clean, epochs, batch_size=32):
    for _ in range(epochs):
        model.train()
        for i in range(0, len(noisy), batch_size):
            loss = F.mse_loss(model(noisy[i:i + batch_size]), clean[i:i + batch_size])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    noisy, clean = make_pairs()
    model = PriorGuidedNet(pretrained_estimator(noisy[:128].split(32)))
    optimizer = torch.optim.Adam(model.restore.parameters(), lr=1e-3)
    print(f"loss {train(model, optimizer, noisy, clean, epochs=3):.4f}")


if __name__ == "__main__":
    main()
