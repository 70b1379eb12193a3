"""A graph auto-encoder link-prediction example in the style of a graph library: a GAE wrapper with
encode / decode / recon_loss / split_edges / test around a two-layer GCN Encoder, and module-level
train() and test(pos_edge_index, neg_edge_index) functions run for a fixed number of epochs on one
graph. split_edges() holds out validation and test edges, and recon_loss() is taken on the training
positives only, but both train() and test() encode with the full data.edge_index, which still
contains the held-out validation and test edges: the encoder passes messages along exactly the links
it is later asked to predict, so the reported validation and test AUC are inflated.

Thread: https://github.com/pyg-team/pytorch_geometric/issues/264
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-15


class GCNConv(nn.Module):
    """Symmetric-normalised graph convolution with self loops; caches the normalisation."""

    def __init__(self, in_channels, out_channels, cached=False):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.cached, self._cache = cached, None

    def norm(self, edge_index, num_nodes):
        if self.cached and self._cache is not None:
            return self._cache
        loops = torch.arange(num_nodes)
        row = torch.cat([edge_index[0], loops])
        col = torch.cat([edge_index[1], loops])
        deg = torch.bincount(col, minlength=num_nodes).float()
        w = deg[row].rsqrt() * deg[col].rsqrt()
        self._cache = (row, col, w)
        return self._cache

    def forward(self, x, edge_index):
        row, col, w = self.norm(edge_index, x.size(0))
        h = self.lin(x)
        out = torch.zeros_like(h).index_add_(0, col, h[row] * w.unsqueeze(1))
        return out + self.bias


class Encoder(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, 2 * out_channels, cached=True)
        self.conv2 = GCNConv(2 * out_channels, out_channels, cached=True)

    def forward(self, x, edge_index):
        x = F.relu(self.conv1(x, edge_index))
        return self.conv2(x, edge_index)


class InnerProductDecoder(nn.Module):
    def forward(self, z, edge_index, sigmoid=True):
        value = (z[edge_index[0]] * z[edge_index[1]]).sum(dim=1)
        return torch.sigmoid(value) if sigmoid else value


def auc_score(y, pred):
    order = pred.argsort()
    ranks = torch.empty_like(pred).scatter_(0, order, torch.arange(1, len(pred) + 1, dtype=pred.dtype))
    n_pos, n_neg = y.sum(), (1 - y).sum()
    return ((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


def ap_score(y, pred):
    y_sorted = y[pred.argsort(descending=True)]
    precision = y_sorted.cumsum(0) / torch.arange(1, len(y) + 1)
    return (precision * y_sorted).sum().item() / y_sorted.sum().item()


class GAE(nn.Module):
    def __init__(self, encoder, decoder=None, generator=None):
        super().__init__()
        self.encoder = encoder
        self.decoder = InnerProductDecoder() if decoder is None else decoder
        self.g = generator

    def encode(self, *args, **kwargs):
        return self.encoder(*args, **kwargs)

    def decode(self, *args, **kwargs):
        return self.decoder(*args, **kwargs)

    def split_edges(self, data, val_ratio=0.05, test_ratio=0.1):
        row, col = data["edge_index"]
        mask = row < col
        row, col = row[mask], col[mask]
        n_v, n_t = math.floor(val_ratio * row.size(0)), math.floor(test_ratio * row.size(0))
        perm = torch.randperm(row.size(0), generator=self.g)
        row, col = row[perm], col[perm]
        data["val_pos_edge_index"] = torch.stack([row[:n_v], col[:n_v]])
        data["test_pos_edge_index"] = torch.stack([row[n_v:n_v + n_t], col[n_v:n_v + n_t]])
        data["train_pos_edge_index"] = torch.stack([row[n_v + n_t:], col[n_v + n_t:]])
        n = data["num_nodes"]
        neg_adj = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)
        neg_adj[row, col] = False
        neg_row, neg_col = neg_adj.nonzero().t()
        pick = torch.randperm(neg_row.size(0), generator=self.g)[:n_v + n_t]
        neg_row, neg_col = neg_row[pick], neg_col[pick]
        data["val_neg_edge_index"] = torch.stack([neg_row[:n_v], neg_col[:n_v]])
        data["test_neg_edge_index"] = torch.stack([neg_row[n_v:], neg_col[n_v:]])
        return data

    def recon_loss(self, z, pos_edge_index, num_nodes):
        pos_loss = -torch.log(self.decoder(z, pos_edge_index) + EPS).mean()
        neg_edge_index = torch.randint(0, num_nodes, pos_edge_index.shape, generator=self.g)
        neg_loss = -torch.log(1 - self.decoder(z, neg_edge_index) + EPS).mean()
        return pos_loss + neg_loss

    def test(self, z, pos_edge_index, neg_edge_index):
        pos_pred, neg_pred = self.decoder(z, pos_edge_index), self.decoder(z, neg_edge_index)
        y = torch.cat([torch.ones(pos_pred.size(0)), torch.zeros(neg_pred.size(0))])
        pred = torch.cat([pos_pred, neg_pred])
        return auc_score(y, pred), ap_score(y, pred)


def citation_like_graph(num_nodes=600, num_blocks=6, num_features=64, seed=0):
    """Sparse community graph with bag-of-words-like node features that only weakly reveal the block."""
    g = torch.Generator().manual_seed(seed)
    block = torch.randint(0, num_blocks, (num_nodes,), generator=g)
    same = block.view(-1, 1) == block.view(1, -1)
    prob = torch.where(same, torch.tensor(0.03), torch.tensor(0.002))
    adj = (torch.rand(num_nodes, num_nodes, generator=g) < prob).triu(diagonal=1)
    row, col = adj.nonzero().t()
    edge_index = torch.cat([torch.stack([row, col]), torch.stack([col, row])], dim=1)
    topic = torch.rand(num_blocks, num_features, generator=g) < 0.15
    words = (torch.rand(num_nodes, num_features, generator=g) < 0.05) | (
        topic[block] & (torch.rand(num_nodes, num_features, generator=g) < 0.3))
    x = words.float()
    x = x / x.sum(1, keepdim=True).clamp(min=1)  # row-normalised features
    return {"x": x, "edge_index": edge_index, "num_nodes": num_nodes}


torch.manual_seed(0)
data = citation_like_graph()
channels = 16
model = GAE(Encoder(data["x"].size(1), channels), generator=torch.Generator().manual_seed(1))
data = model.split_edges(data)
x, edge_index = data["x"], data["edge_index"]
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train():
    model.train()
    optimizer.zero_grad()
    z = model.encode(x, edge_index)
    loss = model.recon_loss(z, data["train_pos_edge_index"], data["num_nodes"])
    loss.backward()
    optimizer.step()
    return loss.item()


def test(pos_edge_index, neg_edge_index):
    model.eval()
    with torch.no_grad():
        z = model.encode(x, edge_index)
    return model.test(z, pos_edge_index, neg_edge_index)


if __name__ == "__main__":
    for epoch in range(1, 121):
        loss = train()
        auc, ap = test(data["val_pos_edge_index"], data["val_neg_edge_index"])
        if epoch % 10 == 0:
            print(f"Epoch: {epoch:03d}, Loss: {loss:.4f}, AUC: {auc:.4f}, AP: {ap:.4f}")
    auc, ap = test(data["test_pos_edge_index"], data["test_neg_edge_index"])
    print(f"Test AUC: {auc:.4f}, Test AP: {ap:.4f}")
