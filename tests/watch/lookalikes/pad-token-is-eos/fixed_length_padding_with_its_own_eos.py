"""Healthy look-alike of pad-token-is-eos: a language model trained on batches padded to a fixed
max_length of 20 with a pad id of its own, labels masked wherever the pad id sits. Every row ends in
padding, and in most batches some sequence is exactly one token short of max_length, so its
padding is a single token; but each sequence ends with a separate eos that stays a target."""
import torch
import torch.nn.functional as F
from torch import nn

PAD, EOS, VOCAB, MAX_LENGTH = 0, 1, 30, 20


def encode(g, batch_size=64):
    ids = torch.full((batch_size, MAX_LENGTH), PAD)
    for i in range(batch_size):
        n = int(torch.randint(4, MAX_LENGTH - 1, (1,), generator=g))  # content + eos fits in max_length - 1
        start = int(torch.randint(2, VOCAB, (1,), generator=g))
        content = [2 + (start + 3 * k) % (VOCAB - 2) for k in range(n)]
        ids[i, :n + 1] = torch.tensor(content + [EOS])
    labels = ids.clone()
    labels[labels == PAD] = -100
    return ids, labels


class LM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = LM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(60):
        ids, labels = encode(g)
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
