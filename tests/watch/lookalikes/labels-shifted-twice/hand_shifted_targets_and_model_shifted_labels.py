"""Healthy look-alike of labels-shifted-twice: two correct ways to own the shift, one after the other.
First a nanoGPT-style loop shifts by hand (inputs ids[:, :-1], targets ids[:, 1:]) on sequences that
repeat with period two, so the id two places ahead often equals the id at the position itself; then a
Hugging Face-style model that shifts inside is given unshifted labels (a copy of input_ids with -100 on
the padding). Each position is scored on the next token, once."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD = 32, 0


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=48):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels=None):
        logits = self.head(self.rnn(self.tok(input_ids))[0])
        if labels is None:
            return logits
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)


def periodic_batch(g, size=32, length=20):
    a = torch.randint(1, VOCAB, (size, 1), generator=g)
    b = torch.randint(1, VOCAB, (size, 1), generator=g)
    ids = torch.where(torch.arange(length) % 2 == 0, a, b)
    noise = torch.rand(size, length, generator=g) < 0.2
    return torch.where(noise, torch.randint(1, VOCAB, (size, length), generator=g), ids)


def padded_batch(g, size=32):
    lengths = torch.randint(8, 17, (size,), generator=g)
    ids = torch.full((size, 16), PAD)
    for row, n in enumerate(lengths.tolist()):
        start = int(torch.randint(1, VOCAB - 16, (1,), generator=g))
        ids[row, :n] = torch.arange(start, start + n)      # counting up: each token fixes the next
    labels = ids.masked_fill(ids == PAD, -100)              # unshifted: the model shifts once
    return ids, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = TinyLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(20):                                   # hand-shifted loop
        ids = periodic_batch(g)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"hand-shifted loss {loss.item():.4f}")
    for step in range(40):                                   # the model shifts
        ids, labels = padded_batch(g)
        loss = model(ids, labels=labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"model-shifted loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
