"""A text classifier restored from a checkpoint (a state dict kept in memory here) and given a
few domain words: the model's add_words() concatenates torch.randn rows onto the trained embedding
weight, in place of the nn.Parameter, and fine-tuning continues. The trained rows have norms near
1, the new ones near sqrt(128), about 11."""
import torch
from torch import nn


class BagClassifier(nn.Module):
    def __init__(self, vocab, dim=128, classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=0)
        self.out = nn.Linear(dim, classes)

    def forward(self, ids):
        mask = (ids != 0).float().unsqueeze(-1)
        return self.out((self.emb(ids) * mask).sum(1) / mask.sum(1).clamp(min=1))

    def add_words(self, count):
        old = self.emb.weight.data
        self.emb.weight = nn.Parameter(torch.cat([old, torch.randn(count, old.shape[1])]))
        self.emb.num_embeddings = self.emb.weight.shape[0]


def make_batch(vocab, g):
    ids = torch.randint(1, vocab, (32, 20), generator=g)
    return ids, (ids % 3 == 0).sum(1).remainder(3)


def fit(model, steps, vocab, g, lr):
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        ids, y = make_batch(vocab, g)
        loss = nn.functional.cross_entropy(model(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    base = BagClassifier(300)
    with torch.no_grad():
        base.emb.weight.mul_(1 / base.emb.weight.shape[1] ** 0.5)  # a checkpoint whose rows have norm near 1
        base.emb.weight[0].zero_()
    checkpoint = {k: v.clone() for k, v in base.state_dict().items()}
    model = BagClassifier(300)
    model.load_state_dict(checkpoint)
    model.add_words(12)
    print(f"loss {fit(model, 60, 312, g, 1e-3):.3f}")


if __name__ == "__main__":
    main()
