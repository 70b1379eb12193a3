"""Healthy look-alike of view-instead-of-permute: a hypernetwork generates a Conv1d kernel from one
descriptor per OUTPUT channel, laid out (out_channels, in_channels * k), so view(out_channels,
in_channels, k) only splits the last axis and keeps every value where it belongs; a second kernel is
generated per input channel as (in_channels, k * out_channels) and is viewed (in_channels, k,
out_channels) before its permute."""
import torch
import torch.nn.functional as F
from torch import nn

IN_CH, OUT_CH, K, LENGTH, CLASSES = 3, 16, 5, 64, 4


class TwoGeneratedStems(nn.Module):
    def __init__(self, desc_dim=6):
        super().__init__()
        self.per_out = nn.Sequential(nn.Linear(desc_dim, 32), nn.GELU(), nn.Linear(32, IN_CH * K))
        self.per_in = nn.Sequential(nn.Linear(desc_dim, 32), nn.GELU(), nn.Linear(32, K * OUT_CH))
        self.head = nn.Linear(2 * OUT_CH, CLASSES)

    def forward(self, x, out_desc, in_desc):
        w_out = self.per_out(out_desc).view(OUT_CH, IN_CH, K)
        w_in = self.per_in(in_desc).view(IN_CH, K, OUT_CH).permute(2, 0, 1)
        h = torch.cat([F.conv1d(x, 0.3 * w_out, padding=K // 2), F.conv1d(x, 0.3 * w_in, padding=K // 2)], 1)
        return self.head(F.relu(h).mean(-1))


def train(model, out_desc, in_desc, steps, g):
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    t = torch.arange(LENGTH).float()
    for step in range(steps):
        y = torch.randint(0, CLASSES, (32,), generator=g)
        freq = (1 + y.float())[:, None, None] * torch.tensor([0.05, 0.1, 0.2])[None, :, None]
        x = torch.sin(freq * t) + 0.3 * torch.randn(32, IN_CH, LENGTH, generator=g)
        loss = F.cross_entropy(model(x, out_desc, in_desc), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train(TwoGeneratedStems(), torch.randn(OUT_CH, 6, generator=g), torch.randn(IN_CH, 6, generator=g), 60, g)


if __name__ == "__main__":
    main()
