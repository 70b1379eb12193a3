"""A convolutional DSSM (C-DSSM) for query-document retrieval, written as one CDSSM module with
separate query and document towers: each word of a query or document is a letter-trigram hash
vector, a width-1 Conv1d plus tanh turns every word into a K-dim feature, k-max pooling (k=1)
keeps the strongest value per feature, a tanh dense layer maps it to the L-dim semantic space,
and the model scores one clicked (positive) document against J random unclicked ones by the dot
product with the query, scaled by a learned 1x1 Conv1d "gamma". Training is one query at a time
with nn.CrossEntropyLoss against target index 0 (the positive document) and SGD with momentum.
The bug: forward() ends with F.softmax over the J+1 gamma-scaled scores and returns those
probabilities, which the loop then hands to CrossEntropyLoss as if they were logits. The loss
applies its own log-softmax on top, so every input lies in [0, 1], the loss can never go below
log(e + J) - 1 and the gradient reaching the towers is shrunk by the extra softmax Jacobian; the
run finishes without any error, but the retrieval model learns far less than it should.

Thread: https://github.com/nishnik/Deep-Semantic-Similarity-Model-PyTorch/issues/2
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

WORD_DEPTH = 240   # size of the letter-trigram hash vector of one word (toy size)
K = 64             # conv / max-pooling dimensionality
L = 32             # semantic space
J = 4              # negatives per query
FILTER_LENGTH = 1


def kmax_pooling(x, dim, k):
    index = x.topk(k, dim=dim)[1].sort(dim=dim)[0]
    return x.gather(dim, index)


class CDSSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_conv = nn.Conv1d(WORD_DEPTH, K, FILTER_LENGTH)
        self.query_sem = nn.Linear(K, L)
        self.doc_conv = nn.Conv1d(WORD_DEPTH, K, FILTER_LENGTH)
        self.doc_sem = nn.Linear(K, L)
        self.learn_gamma = nn.Conv1d(1, 1, 1)

    def _tower(self, x, conv, sem):
        x = x.transpose(1, 2)                        # (1, WORD_DEPTH, n_words)
        c = torch.tanh(conv(x))
        k = kmax_pooling(c, 2, 1).transpose(1, 2)    # (1, 1, K)
        return torch.tanh(sem(k)).reshape(L)

    def forward(self, q, pos, negs):
        q_s = self._tower(q, self.query_conv, self.query_sem)
        pos_s = self._tower(pos, self.doc_conv, self.doc_sem)
        neg_ss = [self._tower(n, self.doc_conv, self.doc_sem) for n in negs]
        dots = torch.stack([q_s.dot(pos_s)] + [q_s.dot(n) for n in neg_ss])
        with_gamma = self.learn_gamma(dots.reshape(J + 1, 1, 1))
        # P(D+|Q): probabilities over the J+1 candidate documents
        prob = F.softmax(with_gamma, dim=0)
        return prob


def make_corpus(gen, n_topics=20, words_per_topic=12, n_pairs=600):
    """Synthetic click log: each topic owns a few 'words' (sparse trigram-hash vectors); a query
    and its clicked document draw words from the same topic, plus a few generic words."""
    vocab = (torch.rand(n_topics * words_per_topic + 60, WORD_DEPTH, generator=gen) < 0.1).float()
    generic = torch.arange(n_topics * words_per_topic, vocab.shape[0])

    def sample_text(topic, n):
        own = topic * words_per_topic + torch.randint(0, words_per_topic, (n,), generator=gen)
        noise = generic[torch.randint(0, len(generic), (n // 2 + 1,), generator=gen)]
        ids = torch.cat([own, noise])[torch.randperm(n + n // 2 + 1, generator=gen)]
        return vocab[ids].unsqueeze(0)

    queries, docs = [], []
    for _ in range(n_pairs):
        t = int(torch.randint(0, n_topics, (1,), generator=gen))
        queries.append((t, sample_text(t, int(torch.randint(2, 5, (1,), generator=gen)))))
        docs.append((t, sample_text(t, int(torch.randint(8, 20, (1,), generator=gen)))))
    return queries, docs


def negatives_for(i, docs, gen):
    t = docs[i][0]
    out = []
    while len(out) < J:
        j = int(torch.randint(0, len(docs), (1,), generator=gen))
        if j != i and docs[j][0] != t:
            out.append(docs[j][1])
    return out


def precision_at_1(model, queries, docs, idx, gen):
    hits = 0
    with torch.no_grad():
        for i in idx:
            prob = model(queries[i][1], docs[i][1], negatives_for(i, docs, gen))
            hits += int(prob.reshape(-1).argmax() == 0)
    return hits / len(idx)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    queries, docs = make_corpus(gen)
    train_idx, test_idx = list(range(0, 500)), list(range(500, 600))

    model = CDSSM()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
    y = torch.zeros(1, dtype=torch.long)   # the clicked document sits at index 0

    steps, running = 0, 0.0
    for epoch in range(4):
        order = torch.randperm(len(train_idx), generator=gen).tolist()
        for n, k in enumerate(order):
            i = train_idx[k]
            y_pred = model(queries[i][1], docs[i][1], negatives_for(i, docs, gen))
            loss = criterion(y_pred.reshape(1, J + 1), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.item()
            steps += 1
            if steps % 250 == 0:
                print(f"epoch {epoch} step {steps:5d} | train loss {running / 250:.4f}")
                running = 0.0
        p1 = precision_at_1(model, queries, docs, test_idx, gen)
        print(f"epoch {epoch} | held-out P@1 (positive ranked first of {J + 1}) = {p1:.3f}")


if __name__ == "__main__":
    main()
