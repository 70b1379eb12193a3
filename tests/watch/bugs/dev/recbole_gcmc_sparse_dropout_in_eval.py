"""A graph-autoencoder recommender in the style of a recommendation library: the model class has
calculate_loss(interaction) and full_sort_predict(interaction), a GcEncoder propagates sparse
one-hot node features over the normalised user-item graph and a bilinear BiDecoder scores pairs,
and a Trainer runs fit() with _train_epoch() and a full-ranking _valid_epoch() under model.eval().
The encoder drops entries of the sparse feature matrices with a hand-written SparseDropout module
(p=0.3 by default) whose forward never looks at self.training, so during evaluation about 30% of
the users' and items' features are still zeroed at random and the ranking metric is computed on a
crippled model.

Thread: https://github.com/RUCAIBox/RecBole/issues/599
"""
import math

import torch
from torch import nn


class SparseDropout(nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.kprob = 1 - p

    def forward(self, x):
        mask = (torch.rand(x._values().size()) + self.kprob).floor().bool()
        return torch.sparse_coo_tensor(x._indices()[:, mask], x._values()[mask] / self.kprob, x.shape,
                                       check_invariants=True)


class GcEncoder(nn.Module):
    def __init__(self, num_user, num_item, support, input_dim, gcn_output_dim, dense_output_dim, drop_prob):
        super().__init__()
        self.num_users, self.num_items, self.support = num_user, num_item, support
        self.sparse_dropout = SparseDropout(p=drop_prob)
        self.dropout = nn.Dropout(p=drop_prob)
        r = math.sqrt(2.0 / (input_dim + gcn_output_dim))
        self.weights_u = nn.Parameter(torch.empty(input_dim, gcn_output_dim).uniform_(-r, r))
        self.dense_layer_u = nn.Linear(gcn_output_dim, dense_output_dim, bias=False)

    def forward(self, user_X, item_X):
        user_X = self.sparse_dropout(user_X)
        item_X = self.sparse_dropout(item_X)
        all_embedding = torch.cat([torch.sparse.mm(user_X, self.weights_u), torch.sparse.mm(item_X, self.weights_u)])
        embeddings = torch.sparse.mm(self.support, all_embedding)
        users, items = torch.split(embeddings, [self.num_users, self.num_items])
        u_hidden, v_hidden = self.dropout(torch.relu(users)), self.dropout(torch.relu(items))
        return self.dense_layer_u(u_hidden), self.dense_layer_u(v_hidden)


class BiDecoder(nn.Module):
    def __init__(self, input_dim, output_dim=2, num_weights=2):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.nn.init.orthogonal_(torch.empty(input_dim, input_dim)))
                                         for _ in range(num_weights)])
        self.dense_layer = nn.Linear(num_weights, output_dim, bias=False)

    def forward(self, u_inputs, i_inputs, users, items=None):
        users_emb = u_inputs[users]
        if items is not None:
            basis = [((users_emb @ w) * i_inputs[items]).sum(1) for w in self.weights]
        else:
            basis = [((users_emb @ w) @ i_inputs.t()).reshape(-1) for w in self.weights]
        return self.dense_layer(torch.stack(basis, dim=1))


class GCMC(nn.Module):
    def __init__(self, n_users, n_items, train_pairs, dropout_prob=0.3, gcn_output_dim=128, embedding_size=32):
        super().__init__()
        self.n_users, self.n_items = n_users, n_items
        n = n_users + n_items
        eye = torch.arange(n)
        self.user_features = torch.sparse_coo_tensor(torch.stack([eye[:n_users], eye[:n_users]]),
                                                     torch.ones(n_users), (n_users, n), check_invariants=True).coalesce()
        self.item_features = torch.sparse_coo_tensor(torch.stack([eye[:n_items], eye[n_users:]]),
                                                     torch.ones(n_items), (n_items, n), check_invariants=True).coalesce()
        u, i = train_pairs[:, 0], train_pairs[:, 1] + n_users
        rows, cols = torch.cat([u, i]), torch.cat([i, u])
        deg = torch.bincount(rows, minlength=n).float() + 1e-7
        vals = deg[rows].pow(-0.5) * deg[cols].pow(-0.5)
        graph = torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (n, n), check_invariants=True).coalesce()
        self.GcEncoder = GcEncoder(n_users, n_items, graph, n, gcn_output_dim, embedding_size, dropout_prob)
        self.BiDecoder = BiDecoder(embedding_size)
        self.loss_function = nn.CrossEntropyLoss()

    def forward(self, users, items):
        u_emb, i_emb = self.GcEncoder(self.user_features, self.item_features)
        return self.BiDecoder(u_emb, i_emb, users, items)

    def calculate_loss(self, interaction):
        user, pos_item, neg_item = interaction["user_id"], interaction["item_id"], interaction["neg_item_id"]
        predict = self.forward(torch.cat([user, user]), torch.cat([pos_item, neg_item]))
        target = torch.zeros(2 * len(user), dtype=torch.long)
        target[:len(user)] = 1
        return self.loss_function(predict, target)

    def full_sort_predict(self, interaction):
        return self.forward(interaction["user_id"], None)[:, 1]


class Trainer:
    def __init__(self, model, learning_rate=0.005, epochs=10, topk=10):
        self.model, self.epochs, self.topk = model, epochs, topk
        self.optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    def _train_epoch(self, train_data):
        self.model.train()
        total = 0.0
        for interaction in train_data:
            self.optimizer.zero_grad()
            loss = self.model.calculate_loss(interaction)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(train_data)

    @torch.no_grad()
    def _valid_epoch(self, valid_data):
        self.model.eval()
        users, history, targets = valid_data
        scores = self.model.full_sort_predict({"user_id": users}).view(len(users), -1)
        scores[history] = -1e9
        top = scores.topk(self.topk, dim=1).indices
        hits = torch.gather(targets, 1, top).sum(1).float()
        return (hits / targets.sum(1).clamp(min=1)).mean().item()

    def fit(self, train_data, valid_data):
        for epoch in range(self.epochs):
            loss = self._train_epoch(train_data)
            recall = self._valid_epoch(valid_data)
            print(f"epoch {epoch} training loss {loss:.4f} valid recall@{self.topk} {recall:.4f}")


def make_data(n_users=200, n_items=300, per_user=15, held_out=3, batch_size=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    pu, qi = torch.randn(n_users, 6, generator=g), torch.randn(n_items, 6, generator=g)
    affinity = pu @ qi.t() + 0.5 * torch.randn(n_users, n_items, generator=g)
    liked = affinity.topk(per_user, dim=1).indices
    perm = torch.argsort(torch.rand(n_users, per_user, generator=g), dim=1)
    liked = torch.gather(liked, 1, perm)
    train_items, valid_items = liked[:, held_out:], liked[:, :held_out]
    train_pairs = torch.stack([torch.arange(n_users).repeat_interleave(per_user - held_out), train_items.reshape(-1)], 1)
    history = torch.zeros(n_users, n_items, dtype=torch.bool).scatter_(1, train_items, True)
    targets = torch.zeros(n_users, n_items, dtype=torch.long).scatter_(1, valid_items, 1)
    return train_pairs, PairwiseLoader(train_pairs, n_items, batch_size, g), (torch.arange(n_users), history, targets)


class PairwiseLoader:
    """Shuffles the training pairs and draws one random negative item per pair, every epoch."""

    def __init__(self, pairs, n_items, batch_size, generator):
        self.pairs, self.n_items, self.batch_size, self.g = pairs, n_items, batch_size, generator

    def __len__(self):
        return math.ceil(len(self.pairs) / self.batch_size)

    def __iter__(self):
        order = torch.randperm(len(self.pairs), generator=self.g)
        for s in range(0, len(order), self.batch_size):
            b = self.pairs[order[s:s + self.batch_size]]
            yield {"user_id": b[:, 0], "item_id": b[:, 1],
                   "neg_item_id": torch.randint(0, self.n_items, (len(b),), generator=self.g)}


def main():
    torch.manual_seed(0)
    train_pairs, train_data, valid_data = make_data()
    model = GCMC(200, 300, train_pairs)
    Trainer(model).fit(train_data, valid_data)


if __name__ == "__main__":
    main()
