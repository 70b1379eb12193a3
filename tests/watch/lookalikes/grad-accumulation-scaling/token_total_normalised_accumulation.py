"""Gradient accumulation for a small token tagger, normalised the way padded token losses should be:
the loop first counts the real (non-pad) tokens of the whole accumulation window, then each
micro-batch's loss is a sum over its tokens (reduction="sum", ignore_index for padding) divided by
that window total, so the step applies the mean over every token of the window."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, TAGS, T, PAD = 50, 6, 24, -100


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 32, batch_first=True)
        self.out = nn.Linear(32, TAGS)

    def forward(self, ids):
        return self.out(self.rnn(self.embed(ids))[0])


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (1024, T), generator=g)
    tags = ids % TAGS
    lengths = torch.randint(4, T + 1, (1024,), generator=g)
    tags[torch.arange(T) >= lengths[:, None]] = PAD
    loader = DataLoader(TensorDataset(ids, tags), batch_size=16, shuffle=True, generator=g)
    model = Tagger()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    accum, window = 4, []
    for epoch in range(2):
        for batch in loader:
            window.append(batch)
            if len(window) < accum:
                continue
            total = sum(int((y != PAD).sum()) for _, y in window)
            for x, y in window:
                logits = model(x)
                loss = F.cross_entropy(logits.reshape(-1, TAGS), y.reshape(-1), ignore_index=PAD, reduction="sum")
                (loss / total).backward()
            optimizer.step()
            optimizer.zero_grad()
            window = []
        print(f"epoch {epoch} last loss {loss.item() / total:.3f}")


if __name__ == "__main__":
    main()
