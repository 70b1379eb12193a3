"""BiLSTM-CRF named-entity tagger built on a CRF layer of the pytorch-crf kind (batch_first=False, so
emissions, tags and mask are time-major (seq_len, batch)). The model transposes its batch-major
inputs before the LSTM and the CRF, the loss is -crf(emissions, tags, mask), and training is
correct. For evaluation the gold tags are kept as a (batch, seq_len) matrix while the decoded tags
come back time-major (seq_len, batch); both are flattened with reshape(-1) and compared position by
position to compute token accuracy and entity-token F1. The two flat vectors are in different orders,
so each prediction is scored against another sentence's tag: the dev F1 stays low although the
tagger has learned, and it is only right when the batch size is 1.

Thread: https://github.com/kmkurn/pytorch-crf/issues/45
"""
import torch
from torch import nn

VOCAB, N_TAGS, O_TAG = 50, 5, 0   # tags: O, B-PER, I-PER, B-LOC, I-LOC


class CRF(nn.Module):
    def __init__(self, num_tags):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

    def forward(self, emissions, tags, mask):
        """Log-likelihood summed over the batch; emissions (T, B, C), tags and mask (T, B)."""
        T, B, _ = emissions.shape
        ar = torch.arange(B)
        score = self.start_transitions[tags[0]] + emissions[0, ar, tags[0]]
        alpha = self.start_transitions + emissions[0]
        for t in range(1, T):
            m = mask[t].float()
            score = score + (self.transitions[tags[t - 1], tags[t]] + emissions[t, ar, tags[t]]) * m
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + emissions[t].unsqueeze(1), dim=1)
            alpha = torch.where(mask[t].unsqueeze(1), nxt, alpha)
        last = tags.gather(0, (mask.long().sum(0) - 1).unsqueeze(0)).squeeze(0)
        score = score + self.end_transitions[last]
        return (score - torch.logsumexp(alpha + self.end_transitions, dim=1)).sum()

    def decode(self, emissions, mask):
        """Viterbi; returns the best tags as a time-major (T, B) tensor."""
        T, B, _ = emissions.shape
        score, history = self.start_transitions + emissions[0], []
        for t in range(1, T):
            best, idx = (score.unsqueeze(2) + self.transitions + emissions[t].unsqueeze(1)).max(dim=1)
            score = torch.where(mask[t].unsqueeze(1), best, score)
            history.append(torch.where(mask[t].unsqueeze(1), idx, torch.arange(N_TAGS).expand(B, -1)))
        best_last = (score + self.end_transitions).argmax(1)
        path = [best_last]
        for idx in reversed(history):
            path.append(idx.gather(1, path[-1].unsqueeze(1)).squeeze(1))
        return torch.stack(path[::-1])


class BiLSTM_CRF(nn.Module):
    def __init__(self, emb=32, hidden=64):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hidden // 2, bidirectional=True)
        self.hidden2tag = nn.Linear(hidden, N_TAGS)
        self.crf = CRF(N_TAGS)

    def emissions(self, words):                   # words: (batch, seq) -> (seq, batch, tags)
        out, _ = self.lstm(self.embedding(words.t()))
        return self.hidden2tag(out)

    def loss(self, words, tags, mask):
        return -self.crf(self.emissions(words), tags.t(), mask.t()) / words.size(0)

    def predict(self, words, mask):
        return self.crf.decode(self.emissions(words), mask.t())


def make_data(n, g, length=20):
    """Person names are tokens 10-19 (B then I), locations tokens 20-29 after the cue token 5."""
    words = torch.randint(30, VOCAB, (n, length), generator=g)
    tags = torch.zeros(n, length, dtype=torch.long)
    for i in range(n):
        for _ in range(2):
            s = int(torch.randint(0, length - 3, (1,), generator=g))
            if int(torch.randint(0, 2, (1,), generator=g)):
                words[i, s:s + 2] = torch.randint(10, 20, (2,), generator=g)
                tags[i, s], tags[i, s + 1] = 1, 2
            else:
                words[i, s], words[i, s + 1:s + 3] = 5, torch.randint(20, 30, (2,), generator=g)
                tags[i, s + 1], tags[i, s + 2] = 3, 4
    return words, tags


def evaluate(model, words, gold, batch_size):
    model.eval()
    preds = []
    with torch.no_grad():
        for i in range(0, len(words), batch_size):
            w = words[i:i + batch_size]
            preds.append(model.predict(w, torch.ones_like(w, dtype=torch.bool)).reshape(-1))
    pred, gold = torch.cat(preds), gold.reshape(-1)
    tp = ((pred == gold) & (gold != O_TAG)).sum().item()
    p, r = tp / max(int((pred != O_TAG).sum()), 1), tp / max(int((gold != O_TAG).sum()), 1)
    return (pred == gold).float().mean().item(), 2 * p * r / max(p + r, 1e-9)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_w, train_t = make_data(1600, g)
    dev_w, dev_t = make_data(200, g)
    model = BiLSTM_CRF()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch_size = 32
    for epoch in range(2):
        model.train()
        perm = torch.randperm(len(train_w), generator=g)
        for step, i in enumerate(range(0, len(perm), batch_size)):
            idx = perm[i:i + batch_size]
            loss = model.loss(train_w[idx], train_t[idx], torch.ones_like(train_w[idx], dtype=torch.bool))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f}")
        acc, f1 = evaluate(model, dev_w, dev_t, batch_size)
        print(f"epoch {epoch} dev token acc {acc:.3f} entity-token F1 {f1:.3f}")


if __name__ == "__main__":
    main()
