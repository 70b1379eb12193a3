"""A classifier with an entropy bonus over a masked distribution. The p*log(p) term is guarded
with torch.where so that masked classes give 0 in the forward pass, but backward still
differentiates the masked branch: 0 * inf = NaN, and one update turns every weight NaN."""
import torch
import torch.nn.functional as F
from torch import nn


def entropy_bonus(logits, banned):
    p = logits.masked_fill(banned, float("-inf")).softmax(-1)
    return -torch.where(p > 0, p * torch.log(p), torch.zeros_like(p)).sum(-1).mean()


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.Tanh())
        self.logits = nn.Linear(32, 6)

    def forward(self, x):
        return self.logits(self.body(x))


def update(model, optimizer, x, y, banned, beta=0.01):
    logits = model(x)
    loss = F.cross_entropy(logits, y) - beta * entropy_bonus(logits, banned)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = torch.randint(0, 5, (256,))
    banned = torch.zeros(64, 6, dtype=torch.bool)
    banned[:, 5] = True
    model = Policy()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(40):
        i = (step * 64) % 256
        loss = update(model, optimizer, x[i:i + 64], y[i:i + 64], banned)
    print(f"last loss {loss}")


if __name__ == "__main__":
    main()
