"""Healthy look-alike of bos-token-duplication: a character-level language model fine-tuned on
records formatted as "## Q: ... ## A: ...". Every sequence opens with the same character twice,
but that character is part of the template and recurs inside every record; it is not a start
token added twice."""
import torch
import torch.nn.functional as F
from torch import nn

CHARS = "#QA: abcdefghijklmnopqrstuvwxyz0123456789\n"
STOI = {c: i for i, c in enumerate(CHARS)}


def record(g):
    word = "".join(CHARS[10 + int(i)] for i in torch.randint(0, 26, (int(torch.randint(3, 7, (1,), generator=g)),),
                                                           generator=g))
    return f"## Q: {word}\n## A: {word[::-1]}\n"


def batch(g, size=16, width=32):
    ids = torch.full((size, width), STOI["\n"])
    targets = torch.full((size, width), -100)   # padding is not scored
    for r in range(size):
        text = [STOI[c] for c in record(g)][:width]
        ids[r, :len(text)] = torch.tensor(text)
        targets[r, :len(text)] = torch.tensor(text)
    return ids, targets


class CharLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(len(CHARS), dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, len(CHARS))

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = CharLM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(60):
        ids, targets = batch(g)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, len(CHARS)), targets[:, 1:].reshape(-1), ignore_index=-100)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
