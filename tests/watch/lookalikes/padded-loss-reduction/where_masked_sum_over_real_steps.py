"""A sequence-to-one sensor model whose auxiliary reconstruction loss covers only the real time
steps of zero-padded windows: `torch.where(valid, per_step, 0).sum() / valid.sum()` plus the main
loss, a cross_entropy that is already one number. The where keeps the padded steps out of both
the sum and the count, and nothing multiplies the reduced main loss by a mask."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_windows(n=640, width=40, channels=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, width + 1, (n,), generator=g)
    x = torch.randn(n, width, channels, generator=g)
    valid = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    x = x * valid.unsqueeze(-1)
    y = (x[:, :, 0].sum(dim=1) > 0).long()
    return TensorDataset(x, valid, y)


class SensorNet(nn.Module):
    def __init__(self, channels=3, hidden=32):
        super().__init__()
        self.rnn = nn.GRU(channels, hidden, batch_first=True)
        self.classify = nn.Linear(hidden, 2)
        self.reconstruct = nn.Linear(hidden, channels)

    def forward(self, x):
        states = self.rnn(x)[0]
        return self.classify(states[:, -1]), self.reconstruct(states)


def main():
    torch.manual_seed(0)
    loader = DataLoader(make_windows(), batch_size=32, shuffle=True)
    model = SensorNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(2):
        for x, valid, y in loader:
            logits, recon = model(x)
            per_step = ((recon - x) ** 2).mean(dim=-1)
            aux = torch.where(valid, per_step, torch.zeros_like(per_step)).sum() / valid.sum()
            loss = F.cross_entropy(logits, y) + 0.5 * aux
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
