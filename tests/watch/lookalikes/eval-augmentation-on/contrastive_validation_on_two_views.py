"""SimCLR-style pretraining on sensor windows: every read of an item returns two random views of
it (gain, jitter, time shift), the encoder is trained with the NT-Xent loss, and the validation
loss is the same contrastive loss on two random views of held-out windows. Random views are the
point of the method here, in training and in its validation loss."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

WINDOW, CHANNELS = 64, 3


class TwoViews(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.arange(WINDOW) / WINDOW
        freqs = torch.rand(n, CHANNELS, 1, generator=g) * 6 + 1
        self.signals = torch.sin(2 * torch.pi * freqs * t) + 0.2 * torch.randn(n, CHANNELS, WINDOW, generator=g)

    def __len__(self):
        return len(self.signals)

    @staticmethod
    def view(x):
        x = x * torch.empty(()).uniform_(0.8, 1.2) + 0.05 * torch.randn_like(x)
        return torch.roll(x, int(torch.randint(-8, 9, ())), dims=-1)

    def __getitem__(self, index):
        x = self.signals[index]
        return self.view(x), self.view(x)


class Encoder(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(CHANNELS, 32, 5, padding=2), nn.ReLU(), nn.Conv1d(32, 32, 5, padding=2),
                                 nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, dim))

    def forward(self, x):
        return self.net(x)


def nt_xent(z1, z2, temperature=0.2):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.t() / temperature
    sim.fill_diagonal_(float("-inf"))
    n = z1.shape[0]
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(sim, targets)


def main():
    torch.manual_seed(0)
    encoder = Encoder()
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    train_loader = DataLoader(TwoViews(1024, 0), batch_size=64, shuffle=True, drop_last=True)
    val_loader = DataLoader(TwoViews(256, 1), batch_size=64)
    for epoch in range(4):
        encoder.train()
        for a, b in train_loader:
            loss = nt_xent(encoder(a), encoder(b))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        encoder.eval()
        with torch.no_grad():
            val = sum(nt_xent(encoder(a), encoder(b)).item() for a, b in val_loader) / len(val_loader)
        print(f"epoch {epoch}: contrastive validation loss {val:.3f}")


if __name__ == "__main__":
    main()
