"""Healthy look-alike of padded-loss-reduction: a causal language model whose labels keep the pad id
at the padded positions, but the loss is computed per token (reduction="none"), multiplied by the
attention mask and divided by the number of real tokens, so the padding contributes nothing."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, PAD = 40, 0


class LM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


def batch_of(g, size=32):
    lengths = torch.randint(5, 20, (size,), generator=g)
    ids = torch.full((size, int(lengths.max())), PAD)
    for i, n in enumerate(lengths.tolist()):
        start = int(torch.randint(1, VOCAB - 20, (1,), generator=g))
        ids[i, :n] = torch.arange(start, start + n) % (VOCAB - 1) + 1
    return ids, (ids != PAD).float()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = LM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(60):
        ids, mask = batch_of(g)
        logits = model(ids[:, :-1])
        per_token = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (per_token * mask[:, 1:]).sum() / mask[:, 1:].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
