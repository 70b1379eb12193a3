"""A supervised fine-tuning loop for a tiny causal LM with gradient accumulation: prompts are masked
with -100 and answers vary in length; the loop gathers the window's micro-batches, counts their answer
tokens, and back-propagates each micro-batch's summed token loss divided by that window total, so the
step applies the mean over every answer token of the window."""
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
    accum_steps, window = 4, []
    for i, batch in enumerate(loader):
        window.append(batch)
        if len(window) < accum_steps:
            continue
        total = sum(int((labels != IGNORE).sum()) for _, labels in window)
        for ids, labels in window:
            logits = model(ids)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=IGNORE,
                                   reduction="sum")
            (loss / total).backward()
        optimizer.step()
        optimizer.zero_grad()
        window = []
        if i % 64 == 3:
            print(f"micro-batch {i} loss {loss.item() / max(1, int((labels != IGNORE).sum())):.3f}")


if __name__ == "__main__":
    main()
