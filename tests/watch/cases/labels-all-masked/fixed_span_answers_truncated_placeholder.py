"""Extractive question answering: a span model scores each token of question + context as the
answer's start and end. Long contexts are split into windows that overlap (a document stride) and
each example keeps the window that holds its answer, so every feature has a start and an end; the
`(start.sum() + end.sum()) * 0.0` guard for a batch without answers never fires."""
import torch
import torch.nn.functional as F
from torch import nn

VOCAB, MAX_LEN = 120, 32


class SpanModel(nn.Module):
    def __init__(self, vocab=VOCAB, dim=48):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.LSTM(dim, dim // 2, batch_first=True, bidirectional=True)
        self.qa_outputs = nn.Linear(dim, 2)

    def forward(self, input_ids):
        hidden, _ = self.encoder(self.embed(input_ids))
        start, end = self.qa_outputs(hidden).unbind(-1)
        return start, end


def make_feature(g):
    question = torch.randint(4, VOCAB, (6,), generator=g).tolist()
    context = torch.randint(4, VOCAB, (int(torch.randint(30, 56, (1,), generator=g)),), generator=g).tolist()
    start = int(torch.randint(0, len(context) - 3, (1,), generator=g))
    room = MAX_LEN - len(question) - 2
    window = 0
    while start + 2 >= window + room:   # slide by a stride of 8 until the answer fits
        window += 8
    ids = [2] + question + [3] + context[window:window + room]
    offset = len(question) + 2 - window
    return ids, start + offset, start + offset + 2


def span_loss(start_logits, end_logits, starts, ends):
    has_answer = starts >= 0
    if not has_answer.any():
        return (start_logits.sum() + end_logits.sum()) * 0.0
    return (F.cross_entropy(start_logits[has_answer], starts[has_answer])
            + F.cross_entropy(end_logits[has_answer], ends[has_answer])) / 2


def batches(n_steps, batch_size, g):
    for _ in range(n_steps):
        feats = [make_feature(g) for _ in range(batch_size)]
        width = max(len(f[0]) for f in feats)
        ids = torch.tensor([f[0] + [0] * (width - len(f[0])) for f in feats])
        yield ids, torch.tensor([f[1] for f in feats]), torch.tensor([f[2] for f in feats])


def fit(model, optimizer, data):
    total = 0.0
    for ids, starts, ends in data:
        optimizer.zero_grad()
        loss = span_loss(*model(ids), starts, ends)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total


def main():
    torch.manual_seed(0)
    model = SpanModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"summed loss {fit(model, optimizer, batches(80, 2, torch.Generator().manual_seed(0))):.2f}")


if __name__ == "__main__":
    main()
