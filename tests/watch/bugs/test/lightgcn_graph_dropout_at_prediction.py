"""A LightGCN recommender in the style of a recommendation toolkit: user and item embedding tables
propagated over a normalized sparse user-item adjacency for three layers and averaged, a hand-written
dropout(x, keep_prob) that drops edges of the sparse adjacency, and a predict(users, items) method
that scores pairs under no_grad. A ModelEngine base class builds Adam from a config dict; a
LightGCNEngine subclass implements train_single_batch (BPR loss with softplus plus an L2 term on the
layer-0 embeddings) and train_an_epoch; a leave-one-out evaluation ranks each user's held-out item
against 100 sampled negatives with predict(). forward() applies the edge dropout unconditionally,
so every prediction also propagates over a randomly thinned graph (keep_prob 0.6): the evaluation
scores are noisy and two evaluations of the same weights disagree.

Thread: https://github.com/beta-team/beta-recsys/pull/426
"""
import math

import torch
import torch.nn as nn

CONFIG = {
    "model": {"n_users": 300, "n_items": 400, "emb_dim": 64, "layer_size": [64, 64, 64], "keep_pro": 0.6,
              "optimizer": "adam", "lr": 0.05, "regs": [1e-5], "batch_size": 1024, "max_epoch": 12},
}


class LightGCN(nn.Module):
    def __init__(self, config, norm_adj):
        super().__init__()
        self.config = config
        self.n_users, self.n_items = config["n_users"], config["n_items"]
        self.n_layers = len(config["layer_size"])
        self.norm_adj = norm_adj
        self.user_embedding = nn.Embedding(self.n_users, config["emb_dim"])
        self.item_embedding = nn.Embedding(self.n_items, config["emb_dim"])
        nn.init.xavier_uniform_(self.user_embedding.weight)
        nn.init.xavier_uniform_(self.item_embedding.weight)

    def dropout(self, x, keep_prob):
        index, values = x.indices().t(), x.values()
        keep = (torch.rand(len(values)) + keep_prob).int().bool()
        return torch.sparse_coo_tensor(index[keep].t(), values[keep] / keep_prob, x.size())

    def forward(self, norm_adj):
        all_emb = torch.cat([self.user_embedding.weight, self.item_embedding.weight], dim=0)
        embs = [all_emb]
        norm_adj = norm_adj.coalesce()
        norm_adj = self.dropout(x=norm_adj, keep_prob=self.config["keep_pro"])
        for _ in range(self.n_layers):
            all_emb = torch.sparse.mm(norm_adj, all_emb)
            embs.append(all_emb)
        embs = torch.stack(embs, dim=1).mean(dim=1)
        return torch.split(embs, [self.n_users, self.n_items])

    def predict(self, users, items):
        with torch.no_grad():
            ua, ia = self.forward(self.norm_adj)
            return (ua[users] * ia[items]).sum(dim=1)


class ModelEngine:
    def __init__(self, config):
        self.config = config
        m = config["model"]
        if m["optimizer"] == "sgd":
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=m["lr"])
        else:
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=m["lr"])


class LightGCNEngine(ModelEngine):
    def __init__(self, config, norm_adj):
        self.decay = config["model"]["regs"][0]
        self.norm_adj = norm_adj
        self.model = LightGCN(config["model"], norm_adj)
        super().__init__(config)

    def train_single_batch(self, batch_data):
        self.optimizer.zero_grad()
        ua, ia = self.model.forward(self.norm_adj)
        users, pos, neg = batch_data
        mf_loss, reg_loss = self.loss_comput(ua[users], ia[pos], ia[neg], users, pos, neg)
        loss = mf_loss + reg_loss
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def train_an_epoch(self, train_loader, epoch_id):
        self.model.train()
        total = 0.0
        for batch_data in train_loader:
            total += self.train_single_batch(batch_data)
        print(f"[Training Epoch {epoch_id}] loss {total / len(train_loader):.4f}")

    def loss_comput(self, u_e, pos_e, neg_e, users, pos, neg):
        pos_scores, neg_scores = (u_e * pos_e).sum(1), (u_e * neg_e).sum(1)
        u0, p0, n0 = self.model.user_embedding(users), self.model.item_embedding(pos), self.model.item_embedding(neg)
        reg = 0.5 * (u0.norm(2).pow(2) + p0.norm(2).pow(2) + n0.norm(2).pow(2)) / float(len(users))
        return torch.nn.functional.softplus(neg_scores - pos_scores).mean(), reg * self.decay


def build_data(n_users, n_items, per_user=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    pu, qi = torch.randn(n_users, 6, generator=g), torch.randn(n_items, 6, generator=g)
    pref = torch.softmax(2.0 * (pu @ qi.T), dim=1)
    liked = torch.multinomial(pref, per_user + 1, generator=g)
    train_pairs = torch.stack([torch.arange(n_users).repeat_interleave(per_user), liked[:, :per_user].reshape(-1)], 1)
    test_items = liked[:, per_user]
    seen = torch.zeros(n_users, n_items, dtype=torch.bool)
    seen[torch.arange(n_users).unsqueeze(1), liked] = True
    neg_pool = [torch.nonzero(~seen[u]).view(-1) for u in range(n_users)]
    eval_neg = torch.stack([p[torch.randperm(len(p), generator=g)[:100]] for p in neg_pool])
    # symmetric normalized adjacency of the bipartite train graph
    n = n_users + n_items
    rows = torch.cat([train_pairs[:, 0], n_users + train_pairs[:, 1]])
    cols = torch.cat([n_users + train_pairs[:, 1], train_pairs[:, 0]])
    deg = torch.bincount(rows, minlength=n).float().clamp(min=1)
    vals = deg[rows].rsqrt() * deg[cols].rsqrt()
    norm_adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (n, n)).coalesce()
    return train_pairs, test_items, eval_neg, seen, norm_adj


def train_loader(train_pairs, seen, batch_size, epoch):
    g = torch.Generator().manual_seed(100 + epoch)
    order = torch.randperm(len(train_pairs), generator=g)
    batches = []
    for b in range(math.ceil(len(order) / batch_size)):
        sel = train_pairs[order[b * batch_size:(b + 1) * batch_size]]
        users, pos = sel[:, 0], sel[:, 1]
        neg = torch.randint(0, seen.shape[1], (len(users),), generator=g)
        batches.append((users, pos, neg))
    return batches


def evaluate(engine, test_items, eval_neg, k=10):
    n_users = len(test_items)
    users = torch.arange(n_users)
    cand = torch.cat([test_items.unsqueeze(1), eval_neg], 1)
    scores = engine.model.predict(users.repeat_interleave(cand.shape[1]), cand.reshape(-1)).view(n_users, -1)
    rank = 1 + (scores[:, 1:] > scores[:, :1]).sum(1)
    ndcg = torch.where(rank <= k, 1.0 / torch.log2(rank.float() + 1), torch.zeros(n_users)).mean().item()
    return ndcg


def main():
    torch.manual_seed(0)
    m = CONFIG["model"]
    train_pairs, test_items, eval_neg, seen, norm_adj = build_data(m["n_users"], m["n_items"])
    engine = LightGCNEngine(CONFIG, norm_adj)
    for epoch in range(m["max_epoch"]):
        loader = train_loader(train_pairs, seen, m["batch_size"], epoch)
        engine.train_an_epoch(loader, epoch)
        print(f"[Evaluating Epoch {epoch}] NDCG@10 = {evaluate(engine, test_items, eval_neg):.4f}")


if __name__ == "__main__":
    main()
