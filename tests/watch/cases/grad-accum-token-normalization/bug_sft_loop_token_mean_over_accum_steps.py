"""A supervised fine-tuning loop for a tiny causal LM with gradient accumulation: prompts are masked
with -100, answers vary from a few tokens to most of the row, and each micro-batch's loss is
F.cross_entropy (a mean over that micro-batch's answer tokens) divided by accum_steps. The step then
applies a mean of means: a token of a micro-batch of short answers weighs several times more than
one of a micro-batch of long answers."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

VOCAB, T, IGNORE = 64, 32, -100


class TinyLM(nn.Module):
    def __init__(self, dim=48):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


def build_rows(n, g):
    ids = torch.randint(1, VOCAB, (n, T), generator=g)
    labels = torch.full((n, T), IGNORE)
    for i in range(n):
        prompt = int(torch.randint(4, 8, (1,), generator=g))
        answer = 2 if (i // 4) % 2 else T - prompt - 1   # micro-batches of short and of long answers
        labels[i, prompt:prompt + answer] = (ids[i, prompt:prompt + answer] * 3) % VOCAB
    return ids, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(*build_rows(1024, g)), batch_size=4, shuffle=False)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    accum_steps = 4
    for i, (ids, labels) in enumerate(loader):
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=IGNORE)
        (loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        if i % 64 == 0:
            print(f"micro-batch {i} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
