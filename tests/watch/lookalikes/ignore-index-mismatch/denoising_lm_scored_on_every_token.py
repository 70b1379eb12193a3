"""A denoising language model pretrained the BERT way but scored on every position: 15% of the input
ids are replaced by the [MASK] id and the targets are the original ids everywhere, with no -100 at
all. The targets differ from the inputs exactly where [MASK] went in, and there they hold many
different tokens (the ones hidden), not one marker value: nothing is marked with a wrong id."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, MASK_ID, LENGTH = 50, 1, 24


class Encoder(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * dim, VOCAB)

    def forward(self, ids):
        return self.out(self.rnn(self.embed(ids))[0])


def sentences(g, n):
    start = torch.randint(2, VOCAB, (n, 1), generator=g)
    return 2 + (start + 3 * torch.arange(LENGTH)) % (VOCAB - 2)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Encoder()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(60):
        original = sentences(g, 16)
        hidden = torch.rand(original.shape, generator=g) < 0.15
        ids = original.masked_fill(hidden, MASK_ID)
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), original.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
