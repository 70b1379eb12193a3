"""A sequence classifier built on torch's own nn.TransformerEncoder (attention and feed-forward
dropout 0.2), trained by a fit() helper and scored every 10 steps by an evaluate() helper in eval
mode, once under no_grad and once with grad enabled (a saliency pass). nn.MultiheadAttention
hands its dropout to the attention kernel only in training mode, so nothing is dropped while the
model is evaluated."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, SEQ, CLASSES = 30, 12, 4


class EncoderClassifier(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        layer = nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=64, dropout=0.2, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)).mean(1))


def evaluate(model, ids, y):
    model.eval()
    with torch.no_grad():
        loss = F.cross_entropy(model(ids), y).item()
    emb = model.embed(ids[:8]).detach().requires_grad_(True)  # a saliency pass, grad enabled, eval mode
    model.head(model.encoder(emb).mean(1)).max(1).values.sum().backward()
    model.zero_grad()
    model.train()
    return loss, float(emb.grad.abs().mean())


def fit(model, optimizer, ids, y, val_ids, val_y, steps=60):
    g = torch.Generator().manual_seed(1)
    model.train()
    for step in range(1, steps + 1):
        rows = torch.randint(0, len(ids), (32,), generator=g)
        optimizer.zero_grad()
        F.cross_entropy(model(ids[rows]), y[rows]).backward()
        optimizer.step()
        if step % 10 == 0:
            print(step, evaluate(model, val_ids, val_y))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (500, SEQ), generator=g)
    y = ids[:, :3].sum(1) % CLASSES
    model = EncoderClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    fit(model, optimizer, ids[:400], y[:400], ids[400:], y[400:])


if __name__ == "__main__":
    main()
