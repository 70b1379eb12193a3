"""Extractive question answering: a span model scores each token of question + context as the
answer's start and end. Features are cut to MAX_LEN tokens with no sliding window, so an answer
that lies past the cut gets no position (-1, masked out of the loss). A helper returns
`(start.sum() + end.sum()) * 0.0` when no example of the batch kept its answer, so that the step
still runs; about one batch in six has none, and those steps learn nothing."""
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
    ids = ([2] + question + [3] + context)[:MAX_LEN]
    offset = len(question) + 2
    s, e = start + offset, start + offset + 2
    if e >= MAX_LEN:            # the answer was cut away with the end of the context
        s = e = -1
    return ids, s, e


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
