"""Attention-based multiple-instance learning: each bag of instances is fed to the model as one
batch (instances, features), an attention score per instance is normalised over the instances with
softmax(dim=0), and the bag gets one label. Normalising over the batch axis is the point here: the
bag is the sample, and its loss is scored once per bag."""
import torch
import torch.nn.functional as F
from torch import nn

FEATURES = 12


class AttentionMIL(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU())
        self.attention = nn.Sequential(nn.Linear(hidden, 16), nn.Tanh(), nn.Linear(16, 1))
        self.classifier = nn.Linear(hidden, 1)

    def forward(self, instances):
        h = self.embed(instances)                     # (instances, hidden)
        a = F.softmax(self.attention(h), dim=0)       # (instances, 1): weights over the bag
        bag = (a * h).sum(dim=0, keepdim=True)        # (1, hidden)
        return self.classifier(bag)                   # (1, 1)


def make_bag(g, key):
    n = int(torch.randint(8, 24, (1,), generator=g))
    x = torch.randn(n, FEATURES, generator=g)
    positive = bool(torch.rand(1, generator=g) < 0.5)
    if positive:
        x[int(torch.randint(0, n, (1,), generator=g))] += key
    return x, torch.tensor([[1.0 if positive else 0.0]])


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    key = 3 * torch.randn(FEATURES, generator=g)
    model = AttentionMIL()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(150):
        x, y = make_bag(g, key)
        loss = F.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
