"""A knowledge-aware GRU4Rec in the style of a recommendation library: the model class has
forward(item_seq, item_seq_len), calculate_loss(interaction) with a full-softmax cross-entropy over
all items, and full_sort_predict(interaction); one GRU runs over the item embeddings and another over
frozen pre-trained knowledge-graph entity embeddings, the two are concatenated, projected, and the
state at item_seq_len - 1 is gathered. A Trainer runs fit() with _train_epoch() and a full-ranking
_valid_epoch() under model.eval(). forward() applies dropout by constructing nn.Dropout(p) on the
spot, so the module never belongs to the model and model.eval() cannot switch it off: validation
scores are computed with embeddings still randomly dropped, and the reported ranking metric is
noisy and lower than the trained model deserves.

Thread: https://github.com/RUCAIBox/RecBole/pull/1946
"""
import math

import torch
from torch import nn


class GRU4RecKG(nn.Module):
    def __init__(self, n_items, entity_matrix, embedding_size=64, hidden_size=128, num_layers=1,
                 dropout_prob=0.1, freeze_kg=True):
        super().__init__()
        self.n_items, self.dropout = n_items, dropout_prob
        self.item_embedding = nn.Embedding(n_items, embedding_size, padding_idx=0)
        self.entity_embedding = nn.Embedding(n_items, embedding_size, padding_idx=0)
        self.item_gru_layers = nn.GRU(embedding_size, hidden_size, num_layers, bias=False, batch_first=True)
        self.entity_gru_layers = nn.GRU(embedding_size, hidden_size, num_layers, bias=False, batch_first=True)
        self.dense_layer = nn.Linear(hidden_size * 2, embedding_size)
        self.loss_fct = nn.CrossEntropyLoss()
        for m in self.modules():
            if isinstance(m, (nn.Embedding, nn.Linear)):
                nn.init.xavier_normal_(m.weight)
        self.entity_embedding.weight.data.copy_(entity_matrix)
        self.entity_embedding.weight.requires_grad = not freeze_kg

    @staticmethod
    def gather_indexes(output, gather_index):
        index = gather_index.view(-1, 1, 1).expand(-1, -1, output.shape[-1])
        return output.gather(dim=1, index=index).squeeze(1)

    def forward(self, item_seq, item_seq_len):
        item_emb = self.item_embedding(item_seq)
        entity_emb = self.entity_embedding(item_seq)
        item_emb = nn.Dropout(self.dropout)(item_emb)
        entity_emb = nn.Dropout(self.dropout)(entity_emb)
        item_out, _ = self.item_gru_layers(item_emb)
        entity_out, _ = self.entity_gru_layers(entity_emb)
        output = self.dense_layer(torch.cat((item_out, entity_out), -1))
        return self.gather_indexes(output, item_seq_len - 1)

    def calculate_loss(self, interaction):
        seq_output = self.forward(interaction["item_id_list"], interaction["item_length"])
        logits = seq_output @ self.item_embedding.weight.t()
        return self.loss_fct(logits, interaction["item_id"])

    def full_sort_predict(self, interaction):
        seq_output = self.forward(interaction["item_id_list"], interaction["item_length"])
        return seq_output @ self.item_embedding.weight.t()


class Trainer:
    def __init__(self, model, learning_rate=0.003, epochs=4, topk=10):
        self.model, self.epochs, self.topk = model, epochs, topk
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(params, lr=learning_rate)

    def _train_epoch(self, train_data):
        self.model.train()
        total = 0.0
        for interaction in train_data():
            self.optimizer.zero_grad()
            loss = self.model.calculate_loss(interaction)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total

    @torch.no_grad()
    def _valid_epoch(self, valid_data):
        self.model.eval()
        scores = self.model.full_sort_predict(valid_data)
        scores[:, 0] = -math.inf
        rank = (scores > scores.gather(1, valid_data["item_id"].view(-1, 1))).sum(1)
        hit = (rank < self.topk).float()
        ndcg = hit / torch.log2(rank.float() + 2)
        return hit.mean().item(), ndcg.mean().item()

    def fit(self, train_data, valid_data):
        for epoch in range(self.epochs):
            loss = self._train_epoch(train_data)
            recall, ndcg = self._valid_epoch(valid_data)
            print(f"epoch {epoch} train loss {loss:.2f} valid recall@{self.topk} {recall:.4f} ndcg@{self.topk} {ndcg:.4f}")


def make_data(n_users=1000, n_items=301, length=12, max_len=10, g=None):
    factors = torch.randn(n_items, 16, generator=g)
    succ = torch.randint(1, n_items, (n_items, 3), generator=g)
    seqs = torch.zeros(n_users, length, dtype=torch.long)
    seqs[:, 0] = torch.randint(1, n_items, (n_users,), generator=g)
    for t in range(1, length):
        follow = torch.rand(n_users, generator=g) < 0.8
        pick = succ[seqs[:, t - 1], torch.randint(0, 3, (n_users,), generator=g)]
        seqs[:, t] = torch.where(follow, pick, torch.randint(1, n_items, (n_users,), generator=g))

    def examples(end_positions):
        lists, lens, targets = [], [], []
        for end in end_positions:
            prefix = seqs[:, max(0, end - max_len):end]
            padded = torch.zeros(n_users, max_len, dtype=torch.long)
            padded[:, :prefix.shape[1]] = prefix
            lists.append(padded)
            lens.append(torch.full((n_users,), prefix.shape[1]))
            targets.append(seqs[:, end])
        return {"item_id_list": torch.cat(lists), "item_length": torch.cat(lens), "item_id": torch.cat(targets)}

    train = examples([length - 4, length - 3, length - 2])
    valid = examples([length - 1])
    entity = torch.cat([factors, factors @ torch.randn(16, 48, generator=g) * 0.3], 1)
    entity[0] = 0
    return train, valid, entity


def loader(data, batch_size, g):
    def batches():
        order = torch.randperm(len(data["item_id"]), generator=g)
        for s in range(0, len(order), batch_size):
            b = order[s:s + batch_size]
            yield {k: v[b] for k, v in data.items()}
    return batches


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train, valid, entity = make_data(g=g)
    model = GRU4RecKG(301, entity)
    Trainer(model).fit(loader(train, 128, g), valid)


if __name__ == "__main__":
    main()
