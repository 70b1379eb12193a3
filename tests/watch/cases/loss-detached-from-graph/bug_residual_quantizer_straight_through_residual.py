"""A two-stage residual quantizer for sensor feature vectors: helper functions look up the nearest
code of a learned nn.Embedding codebook and return the straight-through output x + (q - x).detach();
each stage adds a codebook loss and a commitment loss. The stage loop forms the next residual from
the straight-through output itself, so that residual is x - (x + c): its gradient cancels exactly and
the second stage's commitment loss sends nothing to the encoder. A Trainer class runs the steps."""
import torch
import torch.nn.functional as F
from torch import nn


def nearest_code(x, codebook):
    return codebook(torch.cdist(x, codebook.weight).argmin(dim=-1))


def straight_through(x, q):
    return x + (q - x).detach()


class ResidualQuantizer(nn.Module):
    def __init__(self, dim, codes, stages):
        super().__init__()
        self.codebooks = nn.ModuleList([nn.Embedding(codes, dim) for _ in range(stages)])

    def forward(self, x):
        residual, out, losses = x, 0.0, []
        for codebook in self.codebooks:
            q = nearest_code(residual, codebook)
            losses.append(F.mse_loss(q, residual.detach()) + 0.25 * F.mse_loss(residual, q.detach()))
            q_st = straight_through(residual, q)
            out = out + q_st
            residual = residual - q_st
        return out, sum(losses)


class Codec(nn.Module):
    def __init__(self, d=16, dim=8, codes=16, stages=2):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, dim))
        self.quantizer = ResidualQuantizer(dim, codes, stages)
        self.decoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, d))

    def forward(self, x):
        q, vq_loss = self.quantizer(self.encoder(x))
        return self.decoder(q), vq_loss


class Trainer:
    def __init__(self, model, lr=2e-3):
        self.model, self.optimizer = model, torch.optim.Adam(model.parameters(), lr=lr)

    def step(self, x):
        recon, vq_loss = self.model(x)
        loss = F.mse_loss(recon, x) + vq_loss
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer = Trainer(Codec())
    for step in range(60):
        loss = trainer.step(torch.randn(64, 16, generator=g))
        if step % 20 == 0:
            print(f"step {step} loss {loss:.4f}")


if __name__ == "__main__":
    main()
