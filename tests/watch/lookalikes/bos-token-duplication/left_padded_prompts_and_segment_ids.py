"""Healthy look-alike of bos-token-duplication: two inputs whose rows open with a repeated id for
good reasons. A decoder-only model is trained on left-padded batches (generation-style padding:
most rows open with several pad ids, then one BOS), and a sentence-pair encoder gets token type
ids that are 0 over the whole first segment (an embedding of 2 rows) next to word ids that open with
one [CLS]. Every sequence holds its start token once."""
import torch
import torch.nn.functional as F
from torch import nn

PAD, BOS, CLS, SEP, VOCAB = 0, 1, 2, 3, 40


class LeftPaddedLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


class PairEncoder(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.words = nn.Embedding(VOCAB, dim)
        self.segments = nn.Embedding(2, dim)
        self.mix = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.cls = nn.Linear(dim, 2)

    def forward(self, ids, segments):
        h = self.mix(self.words(ids) + self.segments(segments))
        return self.cls(h[:, 0])


def left_padded(g, size=16, width=12):
    ids = torch.full((size, width), PAD)
    for r in range(size):
        n = int(torch.randint(4, width + 1, (1,), generator=g))
        start = int(torch.randint(4, VOCAB - n, (1,), generator=g))
        ids[r, width - n] = BOS
        ids[r, width - n + 1:] = torch.arange(start, start + n - 1)
    return ids


def pairs(g, size=16):
    a = torch.randint(4, VOCAB, (size, 4), generator=g)
    b = torch.randint(4, VOCAB, (size, 4), generator=g)
    ids = torch.cat([torch.full((size, 1), CLS), a, torch.full((size, 1), SEP), b, torch.full((size, 1), SEP)], 1)
    segments = torch.cat([torch.zeros(size, 6, dtype=torch.long), torch.ones(size, 5, dtype=torch.long)], 1)
    labels = (a.sum(1) > b.sum(1)).long()
    return ids, segments, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    lm, enc = LeftPaddedLM(), PairEncoder()
    opt_lm = torch.optim.Adam(lm.parameters(), lr=3e-3)
    opt_enc = torch.optim.Adam(enc.parameters(), lr=3e-3)
    for step in range(60):
        ids = left_padded(g)
        logits = lm(ids[:, :-1])
        targets = ids[:, 1:].masked_fill(ids[:, 1:] == PAD, -100)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
        opt_lm.zero_grad()
        loss.backward()
        opt_lm.step()
        pid, seg, y = pairs(g)
        loss2 = F.cross_entropy(enc(pid, seg), y)
        opt_enc.zero_grad()
        loss2.backward()
        opt_enc.step()
        if step % 20 == 0:
            print(f"step {step} lm loss {loss.item():.4f} pair loss {loss2.item():.4f}")


if __name__ == "__main__":
    main()
