"""The same denoising autoencoder with AddNoise drawing from torch's default generator, which the
DataLoader seeds differently in every worker and every epoch (the run stays reproducible through
torch.manual_seed): each worker corrupts its batches with noise of its own."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class RandomGain:
    def __init__(self, low, high):
        self.low, self.high = low, high

    def __call__(self, x):
        return x * (self.low + (self.high - self.low) * torch.rand(()))


class AddNoise:
    def __init__(self, sigma, generator=None):
        self.sigma, self.generator = sigma, generator

    def __call__(self, x):
        return x + self.sigma * torch.randn(x.shape, generator=self.generator)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class Traces(Dataset):
    def __init__(self, n, length=128, transform=None):
        g = torch.Generator().manual_seed(0)
        t = torch.linspace(0, 1, length)
        freq = 2 + 6 * torch.rand(n, 1, generator=g)
        self.clean = torch.sin(2 * torch.pi * freq * t)
        self.transform = transform

    def __len__(self):
        return len(self.clean)

    def __getitem__(self, index):
        clean = self.clean[index]
        return self.transform(clean), clean


def make_transform():
    return Compose([RandomGain(0.9, 1.1), AddNoise(0.3)])


class DenoisingAE(nn.Module):
    def __init__(self, length=128):
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(length, 64), nn.ReLU(), nn.Linear(64, 16))
        self.decode = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, length))

    def forward(self, x):
        return self.decode(self.encode(x))


def main():
    torch.manual_seed(0)
    loader = DataLoader(Traces(1024, transform=make_transform()), batch_size=64, shuffle=True, num_workers=2)
    model = DenoisingAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(4):
        for noisy, clean in loader:
            loss = F.mse_loss(model(noisy), clean)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: reconstruction loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
