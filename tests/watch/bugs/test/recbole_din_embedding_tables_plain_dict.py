"""A Deep Interest Network click model in the style of a recommendation library: a shared
ContextSeqEmbAbstractLayer builds one field-offset embedding table per feature type ('user',
'item') in get_embedding(), a ContextSeqEmbLayer subclass embeds the user fields and the behaviour
sequence plus the target item, an attention layer pools the history against the target, an MLP with
BatchNorm and a sigmoid output gives the click probability, and calculate_loss() applies BCELoss.
A Trainer class owns Adam over model.parameters(), runs _train_epoch() per epoch and evaluates AUC.
The abstract layer keeps its tables in plain Python dicts (self.token_embedding_table = {}), so
the embedding tables are not registered: Adam never receives them and the user and item
embeddings keep their initial random values while only the attention and MLP weights train.

Thread: https://github.com/RUCAIBox/RecBole/issues/1128
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class FieldEmbedding(nn.Module):
    def __init__(self, field_dims, embed_dim):
        super().__init__()
        self.embedding = nn.Embedding(int(sum(field_dims)), embed_dim)
        offsets = np.array((0, *np.cumsum(field_dims)[:-1]), dtype=np.int64)
        self.register_buffer("offsets", torch.from_numpy(offsets))

    def forward(self, x):  # [..., num_fields] -> [..., num_fields, dim]
        return self.embedding(x + self.offsets)


class ContextSeqEmbAbstractLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding_table = {}
        self.token_field_dims = None

    def get_embedding(self):
        for type in self.types:
            if len(self.token_field_dims[type]) > 0:
                self.token_embedding_table[type] = FieldEmbedding(self.token_field_dims[type], self.embedding_size)

    def embed_token_fields(self, token_fields, type):
        return self.token_embedding_table[type](token_fields)


class ContextSeqEmbLayer(ContextSeqEmbAbstractLayer):
    def __init__(self, field_dims, embedding_size):
        super().__init__()
        self.types = ["user", "item"]
        self.embedding_size = embedding_size
        self.token_field_dims = field_dims
        self.get_embedding()

    def forward(self, user_fields, item_fields):
        return self.embed_token_fields(user_fields, "user"), self.embed_token_fields(item_fields, "item")


class SequenceAttLayer(nn.Module):
    def __init__(self, in_dim, hidden):
        super().__init__()
        self.att_mlp = nn.Sequential(nn.Linear(4 * in_dim, hidden), nn.Sigmoid(), nn.Linear(hidden, 1))

    def forward(self, target, keys, mask):
        q = target.unsqueeze(1).expand_as(keys)
        w = self.att_mlp(torch.cat([q, keys, q - keys, q * keys], dim=-1)).squeeze(-1)
        w = w.masked_fill(~mask, 0.0)
        return (w.unsqueeze(-1) * keys).sum(1)


class DIN(nn.Module):
    def __init__(self, field_dims, embedding_size=16, mlp_hidden_size=(64, 32)):
        super().__init__()
        n_item_feat = len(field_dims["item"])
        d = n_item_feat * embedding_size
        self.embedding_layer = ContextSeqEmbLayer(field_dims, embedding_size)
        self.attention = SequenceAttLayer(d, mlp_hidden_size[0])
        layers, prev = [], 3 * d + len(field_dims["user"]) * embedding_size
        for h in mlp_hidden_size:
            layers += [nn.Linear(prev, h), nn.BatchNorm1d(h), nn.ReLU()]
            prev = h
        self.dnn_mlp_layers = nn.Sequential(*layers)
        self.dnn_predict_layers = nn.Linear(prev, 1)
        self.sigmoid = nn.Sigmoid()
        self.loss = nn.BCELoss()
        for m in self.modules():
            if isinstance(m, nn.Embedding):
                nn.init.xavier_normal_(m.weight)
        for emb in self.embedding_layer.token_embedding_table.values():
            nn.init.xavier_normal_(emb.embedding.weight)

    def forward(self, user_fields, item_seq_fields, target_fields, seq_mask):
        seq_and_target = torch.cat([item_seq_fields, target_fields.unsqueeze(1)], dim=1)
        user_emb, item_emb = self.embedding_layer(user_fields, seq_and_target)
        b, l1 = item_emb.shape[:2]
        item_emb = item_emb.reshape(b, l1, -1)
        history, target = item_emb[:, :-1], item_emb[:, -1]
        interest = self.attention(target, history, seq_mask)
        din_in = torch.cat([interest, target, interest * target, user_emb.reshape(b, -1)], dim=-1)
        return self.sigmoid(self.dnn_predict_layers(self.dnn_mlp_layers(din_in))).squeeze(1)

    def calculate_loss(self, batch):
        user_fields, item_seq, target, mask, label = batch
        return self.loss(self.forward(user_fields, item_seq, target, mask), label)

    def predict(self, batch):
        user_fields, item_seq, target, mask, _ = batch
        return self.forward(user_fields, item_seq, target, mask)


def auc(scores, labels):
    order = torch.argsort(scores)
    ranks = torch.empty_like(order, dtype=torch.float)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=torch.float)
    pos = labels == 1
    n_pos, n_neg = pos.sum().item(), (~pos).sum().item()
    return (ranks[pos].sum().item() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class Trainer:
    def __init__(self, model, learning_rate=0.001, epochs=6):
        self.model = model
        self.epochs = epochs
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=learning_rate)

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        total = 0.0
        for batch in train_data:
            self.optimizer.zero_grad()
            loss = self.model.calculate_loss(batch)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(train_data)

    @torch.no_grad()
    def evaluate(self, eval_data):
        self.model.eval()
        scores, labels = [], []
        for batch in eval_data:
            scores.append(self.model.predict(batch))
            labels.append(batch[-1])
        return auc(torch.cat(scores), torch.cat(labels))

    def fit(self, train_data, valid_data):
        for epoch_idx in range(self.epochs):
            loss = self._train_epoch(train_data, epoch_idx)
            print(f"epoch {epoch_idx} train loss {loss:.4f} valid auc {self.evaluate(valid_data):.4f}")


def make_clicks(n_users=400, n_items=600, n_cats=12, n=16000, seq_len=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    item_cat = torch.randint(0, n_cats, (n_items,), generator=g)
    user_age = torch.randint(0, 6, (n_users,), generator=g)
    item_bias = 1.5 * torch.randn(n_items, generator=g)
    user_bias = torch.randn(n_users, generator=g)
    users = torch.randint(0, n_users, (n,), generator=g)
    history = torch.randint(0, n_items, (n, seq_len), generator=g)
    lengths = torch.randint(2, seq_len + 1, (n,), generator=g)
    mask = torch.arange(seq_len).unsqueeze(0) < lengths.unsqueeze(1)
    history = history * mask
    target = torch.randint(0, n_items, (n,), generator=g)
    same_cat = ((item_cat[history] == item_cat[target].unsqueeze(1)) & mask).float().sum(1)
    logit = item_bias[target] + user_bias[users] + 0.8 * same_cat - 1.0
    label = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    user_fields = torch.stack([users, user_age[users]], dim=1)
    seq_fields = torch.stack([history, item_cat[history]], dim=-1)
    target_fields = torch.stack([target, item_cat[target]], dim=1)
    field_dims = {"user": [n_users, 6], "item": [n_items, n_cats]}
    data = (user_fields, seq_fields, target_fields, mask, label)
    cut = int(0.85 * n)
    train = TensorDataset(*(t[:cut] for t in data))
    valid = TensorDataset(*(t[cut:] for t in data))
    return field_dims, train, valid


def main():
    torch.manual_seed(0)
    field_dims, train, valid = make_clicks()
    train_data = DataLoader(train, batch_size=256, shuffle=True, generator=torch.Generator().manual_seed(0))
    valid_data = DataLoader(valid, batch_size=512)
    model = DIN(field_dims)
    Trainer(model).fit(train_data, valid_data)


if __name__ == "__main__":
    main()
