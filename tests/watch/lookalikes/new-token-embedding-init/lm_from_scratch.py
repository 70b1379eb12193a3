"""Healthy: a small transformer LM trained from scratch, its token and position embeddings at
torch's default N(0, 1) init: every row of each table comes from one distribution, so no tail of
rows stands apart, however large the rows are."""
import torch
from torch import nn


class LM(nn.Module):
    def __init__(self, vocab=500, dim=64, length=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(length, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 128, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        n = ids.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n)
        h = self.tok(ids) + self.pos(torch.arange(n))
        return self.head(self.body(h, mask=mask, is_causal=True))


def main():
    torch.manual_seed(0)
    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(60):
        ids = torch.randint(0, 500, (8, 32))
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 500), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
