"""Gradient accumulation for a tiny language model on packed rows with no padding: every micro-batch
holds the same number of target tokens, so its cross_entropy mean divided by accum_steps adds up to
the mean over every token of the window. Dividing each micro-batch's token mean by the number of
micro-batches is exact when their token counts are equal."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, T = 64, 32


class TinyLM(nn.Module):
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
    stream = torch.randint(0, VOCAB, (1024 * (T + 1),), generator=g)
    stream[1::2] = (stream[0::2] * 5 + 1) % VOCAB
    rows = stream.view(1024, T + 1)
    loader = DataLoader(TensorDataset(rows[:, :-1], rows[:, 1:]), batch_size=4, shuffle=True, generator=g)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    accum_steps = 4
    for i, (ids, targets) in enumerate(loader):
        loss = F.cross_entropy(model(ids).reshape(-1, VOCAB), targets.reshape(-1))
        (loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        if i % 64 == 0:
            print(f"micro-batch {i} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
