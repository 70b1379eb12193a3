"""A small LSTM language model with embedding dropout in the AWD-LSTM style: forward() draws a
0/1 mask over the rows of the embedding matrix (`weight.new_empty(V, 1).bernoulli_(1 - p)`), scales
the kept rows and looks the ids up in the masked matrix with F.embedding. The mask is drawn on every
call, without `if self.training`. The training loop runs 64 batches per epoch and computes the
validation perplexity after each epoch under model.eval(); there a tenth of the vocabulary still maps
to zero vectors."""
import math

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, DIM = 200, 48


class LSTMLM(nn.Module):
    def __init__(self, p_embed=0.1):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.rnn = nn.LSTM(DIM, DIM, batch_first=True)
        self.decoder = nn.Linear(DIM, VOCAB)
        self.p_embed = p_embed

    def embedded_dropout(self, ids):
        weight = self.embed.weight
        mask = weight.new_empty(weight.size(0), 1).bernoulli_(1 - self.p_embed) / (1 - self.p_embed)
        return F.embedding(ids, mask * weight)

    def forward(self, ids):
        out, _ = self.rnn(self.embedded_dropout(ids))
        return self.decoder(out)


def batches(tokens, batch_size, length):
    n = (len(tokens) - 1) // length
    chunks = tokens[:n * length + 1]
    for i in range(0, n - batch_size + 1, batch_size):
        rows = torch.stack([chunks[j * length:(j + 1) * length + 1] for j in range(i, i + batch_size)])
        yield rows[:, :-1], rows[:, 1:]


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    table = torch.randint(0, VOCAB, (VOCAB,), generator=g)  # a token mostly decides the next
    tokens = torch.zeros(20001, dtype=torch.long)
    for i in range(1, len(tokens)):
        nxt = table[tokens[i - 1]]
        tokens[i] = nxt if torch.rand(1, generator=g).item() < 0.8 else torch.randint(0, VOCAB, (1,), generator=g)
    train, val = tokens[:16385], tokens[16384:]
    model = LSTMLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        model.train()
        for x, y in batches(train, 8, 32):
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            losses = [F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1)).item() for x, y in batches(val, 8, 32)]
        print(f"epoch {epoch} train loss {loss.item():.3f} val ppl {math.exp(sum(losses) / len(losses)):.1f}")


if __name__ == "__main__":
    main()
