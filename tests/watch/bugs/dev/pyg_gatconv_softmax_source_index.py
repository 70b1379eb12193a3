"""A graph-attention layer written the message-passing way: GATConv(in_channels, out_channels, heads)
projects the node features, and for every edge (j -> i) of edge_index a message() computes the
attention logit from the concatenated source and target features, leaky-ReLU, then a scatter softmax
grouped by a node index, and returns x_j weighted by it; propagate() sums the messages into the target
nodes edge_index[1]. A two-layer GAT is trained full-batch for semi-supervised node classification
with Adam and nll_loss on a train mask. The softmax is grouped by edge_index[0], the source node, while
the messages are summed at edge_index[1], the target: the weights that sum to 1 are a node's outgoing
edges, so the weights a node receives no longer form a distribution over its neighbours and high
in-degree nodes get large, unnormalised sums.

Thread: https://github.com/pyg-team/pytorch_geometric/issues/224
"""
import torch
import torch.nn.functional as F
from torch import nn


def scatter_softmax(src, index, num_nodes):
    """Softmax of src (E, H) within the groups of edges that share the same index."""
    h = src.size(1)
    idx = index.view(-1, 1).expand(-1, h)
    group_max = torch.full((num_nodes, h), float('-inf')).scatter_reduce(0, idx, src, 'amax', include_self=True)
    out = (src - group_max[index]).exp()
    denom = torch.zeros(num_nodes, h).index_add_(0, index, out)
    return out / (denom[index] + 1e-16)


class GATConv(nn.Module):
    def __init__(self, in_channels, out_channels, heads=1, concat=True, dropout=0.0):
        super().__init__()
        self.heads, self.out_channels, self.concat, self.dropout = heads, out_channels, concat, dropout
        self.weight = nn.Parameter(torch.empty(in_channels, heads * out_channels))
        self.att = nn.Parameter(torch.empty(1, heads, 2 * out_channels))
        self.bias = nn.Parameter(torch.zeros(heads * out_channels if concat else out_channels))
        nn.init.xavier_uniform_(self.weight)
        nn.init.xavier_uniform_(self.att)

    def forward(self, x, edge_index):
        x = (x @ self.weight).view(-1, self.heads, self.out_channels)
        return self.propagate(edge_index, x=x, num_nodes=x.size(0))

    def propagate(self, edge_index, x, num_nodes):
        x_j, x_i = x[edge_index[0]], x[edge_index[1]]
        msg = self.message(x_i, x_j, edge_index, num_nodes)
        out = torch.zeros(num_nodes, self.heads, self.out_channels).index_add_(0, edge_index[1], msg)
        out = out.reshape(num_nodes, -1) if self.concat else out.mean(dim=1)
        return out + self.bias

    def message(self, x_i, x_j, edge_index, num_nodes):
        alpha = (torch.cat([x_i, x_j], dim=-1) * self.att).sum(dim=-1)
        alpha = F.leaky_relu(alpha, 0.2)
        alpha = scatter_softmax(alpha, edge_index[0], num_nodes)  # grouped by the source node
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        return x_j * alpha.unsqueeze(-1)


class GAT(nn.Module):
    def __init__(self, in_dim, hidden, num_classes, heads=4):
        super().__init__()
        self.conv1 = GATConv(in_dim, hidden, heads=heads, dropout=0.2)
        self.conv2 = GATConv(hidden * heads, num_classes, heads=1, concat=False, dropout=0.2)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.3, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.3, training=self.training)
        return F.log_softmax(self.conv2(x, edge_index), dim=1)


def make_graph(num_nodes=600, num_classes=4, seed=0):
    """Homophilous directed graph with skewed in-degrees and noisy features, plus self loops."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (num_nodes,), generator=g)
    centers = torch.randn(num_classes, 16, generator=g)
    x = 0.35 * centers[y] + torch.randn(num_nodes, 16, generator=g)
    popularity = torch.rand(num_nodes, generator=g) ** 3 + 0.01
    src, dst = [], []
    for i in range(num_nodes):
        same = (y == y[i]).nonzero().view(-1)
        other = (y != y[i]).nonzero().view(-1)
        k_same = int(torch.randint(2, 10, (1,), generator=g))
        picks = same[torch.multinomial(popularity[same], k_same, generator=g)]
        noise = other[torch.multinomial(popularity[other], 2, generator=g)]
        for j in torch.cat([picks, noise]).tolist():
            src.append(j)
            dst.append(i)
    loops = torch.arange(num_nodes)
    edge_index = torch.stack([torch.tensor(src + loops.tolist()), torch.tensor(dst + loops.tolist())])
    perm = torch.randperm(num_nodes, generator=g)
    train_mask = torch.zeros(num_nodes, dtype=torch.bool)
    train_mask[perm[:120]] = True
    test_mask = torch.zeros(num_nodes, dtype=torch.bool)
    test_mask[perm[300:]] = True
    return x, y, edge_index, train_mask, test_mask


def main():
    torch.manual_seed(0)
    x, y, edge_index, train_mask, test_mask = make_graph()
    model = GAT(16, 8, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
    for epoch in range(1, 121):
        model.train()
        optimizer.zero_grad()
        out = model(x, edge_index)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()
        if epoch % 20 == 0:
            model.eval()
            with torch.no_grad():
                pred = model(x, edge_index).argmax(dim=1)
            acc = (pred[test_mask] == y[test_mask]).float().mean().item()
            print(f"epoch {epoch:03d} loss {loss.item():.4f} test acc {acc:.3f}")


if __name__ == "__main__":
    main()
