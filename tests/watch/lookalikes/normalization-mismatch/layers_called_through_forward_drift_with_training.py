"""A click-through model trained for several epochs: item embeddings, a query projection over the
candidate's embedding, attention pooling of the viewing history and an MLP. The training loop calls
model.forward(...) directly, so each layer it reaches is called on its own, on embeddings that the
training itself moves (Adam, the embeddings at a learning rate 20 times the dense layers', as
recommenders often set it). The test split is evaluated after every epoch
under no_grad on inputs built exactly like the training ones: the layers' inputs have drifted with
the weights, not with any preprocessing."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ITEMS, HIST = 500, 12


def split(n, seed):
    g = torch.Generator().manual_seed(seed)
    taste = torch.randn(ITEMS, 8, generator=torch.Generator().manual_seed(7))
    users = torch.randn(n, 8, generator=g)
    hist = torch.multinomial(torch.softmax(users @ taste.T, 1), HIST, replacement=True, generator=g)
    cand = torch.randint(0, ITEMS, (n,), generator=g)
    click = (torch.rand(n, generator=g) < torch.sigmoid(2 * (users * taste[cand]).sum(1))).float()
    return TensorDataset(hist, cand, click)


class ClickModel(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.item_emb = nn.Embedding(ITEMS, dim)
        nn.init.normal_(self.item_emb.weight, std=0.05)
        self.query = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(3 * dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, hist, cand):
        h, c = self.item_emb(hist), self.item_emb(cand)
        att = torch.softmax((h @ self.query(c).unsqueeze(-1)).squeeze(-1) / math.sqrt(h.shape[-1]), dim=1)
        user = (att.unsqueeze(-1) * h).sum(1)
        return self.mlp(torch.cat([user, c, user * c], 1)).squeeze(1)


def main():
    torch.manual_seed(0)
    train = DataLoader(split(6000, 1), batch_size=256, shuffle=True, generator=torch.Generator().manual_seed(0))
    test = DataLoader(split(2000, 2), batch_size=500)
    model = ClickModel()
    dense = [p for name, p in model.named_parameters() if not name.startswith("item_emb")]
    optimizer = torch.optim.Adam([{"params": model.item_emb.parameters(), "lr": 0.1},   # sparse features learn fast
                                  {"params": dense, "lr": 0.005}])
    for epoch in range(10):
        model.train()
        for hist, cand, click in train:
            optimizer.zero_grad()
            F.binary_cross_entropy_with_logits(model.forward(hist, cand), click).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            correct = sum(((model.forward(h, c) > 0).float() == y).sum().item() for h, c, y in test)
        print(f"epoch {epoch}: test accuracy {correct / 2000:.3f}")


if __name__ == "__main__":
    main()
