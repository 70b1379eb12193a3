"""Healthy look-alike of autoregressive-off-by-one: masked-language-model pretraining of a small
bidirectional encoder. The targets are the original ids, but only at the 15% of positions whose
input was replaced by the mask token (the rest are -100): where a target is scored, the model does
not see it, so targets and inputs agree almost nowhere."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, MASK, LENGTH = 64, 1, 24


class Encoder(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(LENGTH, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        return self.head(self.encoder(self.tok(ids) + self.pos))


def mask_tokens(ids, g):
    labels = ids.clone()
    chosen = torch.rand(ids.shape, generator=g) < 0.15
    labels[~chosen] = -100
    inputs = ids.clone()
    inputs[chosen] = MASK
    return inputs, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Encoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(60):
        ids = torch.randint(2, VOCAB, (32, LENGTH), generator=g)
        inputs, labels = mask_tokens(ids, g)
        logits = model(inputs)
        loss = F.cross_entropy(logits.view(-1, VOCAB), labels.view(-1), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
