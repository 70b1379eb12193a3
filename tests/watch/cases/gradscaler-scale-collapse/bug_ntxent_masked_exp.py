"""A contrastive (NT-Xent) encoder trained by train(model, optimizer, scaler, loader) with fp16
autocast and a GradScaler. The loss is written by hand: exp(similarity / 0.08) over the 2N x 2N
similarity matrix, with each sample's similarity to itself removed by torch.where. That diagonal
is 1 / 0.08 = 12.5, and exp(12.5) is inf in float16: torch.where drops it in the forward pass,
but the backward pass multiplies its zero gradient by inf, so every gradient is NaN whatever the
scale (and a close positive pair can overflow the sum too): the GradScaler skips every step and
halves its scale each time."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def nt_xent(z1, z2, temperature=0.08):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    n = len(z1)
    sim = z @ z.T / temperature
    self_mask = torch.eye(2 * n, dtype=torch.bool)
    exp_sim = torch.where(self_mask, torch.zeros_like(sim), torch.exp(sim))
    positives = torch.cat([sim.diagonal(n), sim.diagonal(-n)])
    return (torch.log(exp_sim.float().sum(1)) - positives.float()).mean()


def augment(x, g):
    return x + torch.randn(x.shape, generator=g)


def train(model, optimizer, scaler, loader, g):
    model.train()
    for (x,) in loader:
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nt_xent(model(augment(x, g)), model(augment(x, g)))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(768, 32, generator=g)
    loader = DataLoader(TensorDataset(x), batch_size=32, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 64))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu")
    loss = train(model, optimizer, scaler, loader, g)
    print(f"loss {loss:.3f}, scale {scaler.get_scale():.3g}")


if __name__ == "__main__":
    main()
