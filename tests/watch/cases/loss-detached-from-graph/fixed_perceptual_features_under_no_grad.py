"""A denoising network trained with an L1 term plus a perceptual term: PerceptualLoss, an nn.Module
holding a frozen convolutional feature extractor, computes the clean image's features under
`torch.no_grad()` and the output's with grad enabled: the frozen network's parameters get no
gradient, the denoiser gets the perceptual term's. A Trainer class runs the steps."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class PerceptualLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        for p in self.features.parameters():
            p.requires_grad_(False)

    def forward(self, output, target):
        with torch.no_grad():
            f_target = self.features(target)
        f_out = self.features(output)
        return F.mse_loss(f_out, f_target)


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))

    def forward(self, x):
        return x - self.body(x)


class Trainer:
    def __init__(self, model, perceptual_weight=0.5):
        self.model = model
        self.perceptual = PerceptualLoss()
        self.weight = perceptual_weight
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(self, noisy, clean):
        out = self.model(noisy)
        l1 = F.l1_loss(out, clean)
        perceptual = self.perceptual(out, clean)
        loss = l1 + self.weight * perceptual
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return l1.item(), perceptual.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    clean = torch.rand(400, 1, 16, 16, generator=g).cumsum(-1) / 8
    noisy = clean + 0.1 * torch.randn(clean.shape, generator=g)
    loader = DataLoader(TensorDataset(noisy, clean), batch_size=16, shuffle=True, generator=g)
    trainer = Trainer(Denoiser())
    for epoch in range(3):
        for xb, yb in loader:
            l1, perceptual = trainer.step(xb, yb)
        print(f"epoch {epoch} l1 {l1:.4f} perceptual {perceptual:.4f}")


if __name__ == "__main__":
    main()
