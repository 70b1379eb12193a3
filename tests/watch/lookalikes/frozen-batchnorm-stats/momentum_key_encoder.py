"""Healthy look-alike of frozen-batchnorm-stats: a MoCo-style contrastive learner whose key encoder
is a submodule run under torch.no_grad() in training mode inside the model's forward, with its
BatchNorm layers on batch statistics by design. Its weights never get a gradient and are in no
optimizer, but they are not frozen: a momentum update moves them toward the query encoder after
every step."""
import copy

import torch
import torch.nn.functional as F
from torch import nn


def encoder():
    return nn.Sequential(nn.Linear(24, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 16))


class MoCo(nn.Module):
    def __init__(self, momentum=0.99, temperature=0.2, queue_size=256):
        super().__init__()
        self.encoder_q = encoder()
        self.encoder_k = copy.deepcopy(self.encoder_q)
        for p in self.encoder_k.parameters():
            p.requires_grad = False
        self.m, self.t = momentum, temperature
        self.register_buffer("queue", F.normalize(torch.randn(queue_size, 16), dim=1))

    @torch.no_grad()
    def momentum_update(self):
        for q, k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            k.mul_(self.m).add_(q.detach(), alpha=1 - self.m)

    def forward(self, view_q, view_k):
        q = F.normalize(self.encoder_q(view_q), dim=1)
        with torch.no_grad():
            k = F.normalize(self.encoder_k(view_k), dim=1)
        logits = torch.cat([(q * k).sum(1, keepdim=True), q @ self.queue.t()], 1) / self.t
        self.queue = torch.cat([k, self.queue[:-len(k)]])
        return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = torch.randn(1280, 24, generator=g)
    model = MoCo()
    optimizer = torch.optim.SGD(model.encoder_q.parameters(), lr=0.05, momentum=0.9)
    model.train()
    for epoch in range(2):
        for i in range(0, len(data), 32):
            x = data[i:i + 32]
            loss = model(x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            model.momentum_update()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
