"""A BERT-style masked language model: 15% of the positions are replaced by a [MASK] id and the loss
scores only those positions (-100 elsewhere) against the original ids at the same positions. The
encoder attends in both directions, as it should: the targets are not the next tokens."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, MASK, SEQ, DIM = 40, 39, 32, 48


class MLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, DIM))
        layer = nn.TransformerEncoderLayer(DIM, 4, 96, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.head(self.encoder(self.tok(ids) + self.pos))


def mask_tokens(ids, g):
    chosen = torch.rand(ids.shape, generator=g) < 0.15
    inputs = ids.masked_fill(chosen, MASK)
    labels = ids.masked_fill(~chosen, -100)
    return inputs, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    base = torch.randint(0, VOCAB - 1, (2048, SEQ // 2), generator=g)
    ids = torch.cat([base, base.flip(1)], dim=1)          # palindromes: the other half tells a masked id
    loader = DataLoader(TensorDataset(ids), batch_size=32, shuffle=True)
    model = MLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(1):
        for (batch,) in loader:
            inputs, labels = mask_tokens(batch, g)
            loss = F.cross_entropy(model(inputs).reshape(-1, VOCAB), labels.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
