"""A KBAT-style knowledge-graph completion setup: a Corpus class holds the train, validation and test
triples and builds get_iteration_batch(iter_num), which copies each positive triple and corrupts its
head or tail with a random entity (labels 1 / -1), redrawing the entity while the corrupted triple is
in self.valid_triples_dict; a graph-attention-like encoder (entity and relation embeddings, neighbour
messages over the training adjacency, W_entities) is trained with a margin ranking loss on L1
translation distances, Adam and a StepLR, and scored with filtered MRR / Hits@10 on the test triples.
valid_triples_dict is built from train + validation + test triples, so the negative sampler never
labels a test triple as false: the test facts are kept out of the negatives during training, which
tells the model they are true and inflates the reported test metrics.

Thread: https://github.com/deepakn97/relationPrediction/issues/17
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

N_ENT, N_REL = 50, 4


def build_graph(seed=0):
    """True triples: each (h, r) points to the 3 entities nearest to e_h + v_r in a latent space."""
    g = torch.Generator().manual_seed(seed)
    ent, rel = torch.randn(N_ENT, 6, generator=g), 0.8 * torch.randn(N_REL, 6, generator=g)
    triples = []
    for h in range(N_ENT):
        for r in range(N_REL):
            d = (ent[h] + rel[r] - ent).norm(dim=1)
            d[h] = float("inf")
            triples += [(h, r, int(t)) for t in d.argsort()[:3]]
    perm = torch.randperm(len(triples), generator=g).tolist()
    triples = [triples[i] for i in perm]
    n_val = n_test = len(triples) // 10
    return triples[n_val + n_test:], triples[:n_val], triples[n_val:n_val + n_test]


class Corpus:
    def __init__(self, train_triples, validation_triples, test_triples, batch_size, invalid_valid_ratio):
        self.train_triples = train_triples
        self.validation_triples = validation_triples
        self.test_triples = test_triples
        self.batch_size = batch_size
        self.invalid_valid_ratio = invalid_valid_ratio
        self.train_indices = np.array(train_triples, dtype=np.int64)
        self.train_adj_matrix = torch.tensor(self.train_indices)
        self.valid_triples_dict = {t: i for i, t in enumerate(
            self.train_triples + self.validation_triples + self.test_triples)}

    def get_iteration_batch(self, iter_num):
        pos = self.train_indices[iter_num * self.batch_size:(iter_num + 1) * self.batch_size]
        n = len(pos)
        half = self.invalid_valid_ratio // 2
        batch_indices = np.tile(pos, (self.invalid_valid_ratio + 1, 1))
        batch_values = np.ones((len(batch_indices), 1), dtype=np.float32)
        for i in range(n):
            for j in range(half):
                k = n + i * half + j
                ent = np.random.randint(N_ENT)
                while (ent, batch_indices[k, 1], batch_indices[k, 2]) in self.valid_triples_dict:
                    ent = np.random.randint(N_ENT)
                batch_indices[k, 0], batch_values[k] = ent, -1
            for j in range(half):
                k = n + n * half + i * half + j
                ent = np.random.randint(N_ENT)
                while (batch_indices[k, 0], batch_indices[k, 1], ent) in self.valid_triples_dict:
                    ent = np.random.randint(N_ENT)
                batch_indices[k, 2], batch_values[k] = ent, -1
        return torch.as_tensor(batch_indices), torch.as_tensor(batch_values)


class SpKBGAT(nn.Module):
    def __init__(self, dim=32, drop=0.3):
        super().__init__()
        self.entity_embeddings = nn.Parameter(torch.randn(N_ENT, dim) * 0.1)
        self.relation_embeddings = nn.Parameter(torch.randn(N_REL, dim) * 0.1)
        self.attn = nn.Linear(3 * dim, 1)
        self.W_entities = nn.Linear(dim, dim, bias=False)
        self.drop = nn.Dropout(drop)

    def forward(self, adj):
        h, r, t = adj[:, 0], adj[:, 1], adj[:, 2]
        e, rel = self.entity_embeddings, self.relation_embeddings
        msg = e[t] - rel[r]
        score = torch.exp(-F.leaky_relu(self.attn(torch.cat([e[h], e[t], rel[r]], 1))).squeeze(1))
        num = torch.zeros_like(e).index_add_(0, h, self.drop(score.unsqueeze(1) * msg))
        den = torch.zeros(N_ENT).index_add_(0, h, score).clamp_min(1e-8).unsqueeze(1)
        out = F.normalize(self.W_entities(e) + F.elu(num / den), dim=1)
        return out, rel


def batch_gat_loss(loss_func, train_indices, entity_embed, relation_embed, n_pos):
    def dist(ix):
        return (entity_embed[ix[:, 0]] + relation_embed[ix[:, 1]] - entity_embed[ix[:, 2]]).abs().sum(1)
    pos_norm = dist(train_indices[:n_pos]).repeat(len(train_indices) // n_pos - 1)
    neg_norm = dist(train_indices[n_pos:])
    y = -torch.ones(len(neg_norm))
    return loss_func(pos_norm, neg_norm, y)


@torch.no_grad()
def evaluate(model, corpus):
    model.eval()
    ent, rel = model(corpus.train_adj_matrix)
    known = corpus.valid_triples_dict
    ranks = []
    for h, r, t in corpus.test_triples:
        d = (ent[h] + rel[r] - ent).abs().sum(1)
        for other in range(N_ENT):
            if other != t and (h, r, other) in known:
                d[other] = float("inf")
        ranks.append(int((d < d[t]).sum()) + 1)
    model.train()
    ranks = np.array(ranks)
    return float((1.0 / ranks).mean()), float((ranks <= 10).mean())


def train_gat(corpus, epochs=9):
    model = SpKBGAT()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=500, gamma=0.5)
    gat_loss_func = nn.MarginRankingLoss(margin=1.0)
    rng = np.random.default_rng(0)
    for epoch in range(epochs):
        rng.shuffle(corpus.train_indices)
        num_iters = int(np.ceil(len(corpus.train_indices) / corpus.batch_size))
        epoch_loss = []
        for iters in range(num_iters):
            train_indices, train_values = corpus.get_iteration_batch(iters)
            entity_embed, relation_embed = model(corpus.train_adj_matrix)
            optimizer.zero_grad()
            n_pos = int((train_values == 1).sum())
            loss = batch_gat_loss(gat_loss_func, train_indices, entity_embed, relation_embed, n_pos)
            loss.backward()
            optimizer.step()
            epoch_loss.append(loss.item())
        scheduler.step()
        mrr, hits10 = evaluate(model, corpus)
        print(f"epoch {epoch} loss {np.mean(epoch_loss):.4f} test MRR {mrr:.3f} Hits@10 {hits10:.3f}")


def main():
    np.random.seed(0)
    torch.manual_seed(0)
    train, valid, test = build_graph()
    corpus = Corpus(train, valid, test, batch_size=64, invalid_valid_ratio=2)
    train_gat(corpus)


if __name__ == "__main__":
    main()
