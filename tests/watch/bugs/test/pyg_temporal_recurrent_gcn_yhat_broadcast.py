"""A recurrent graph forecaster in the PyTorch Geometric Temporal introduction style: a
RecurrentGCN module (a diffusion-convolution GRU cell over a fixed sensor graph, ReLU, then a
Linear(32, 1) head) reads one snapshot at a time (node features = the last four lagged readings of
each node) and predicts the next reading of every node. Each epoch sums the per-snapshot costs,
divides by the number of snapshots and takes one backward/step/zero_grad; a held-out stretch of
snapshots is scored the same way at the end. The head returns y_hat of shape (N, 1) while the
snapshot target is (N,), and the cost is written as torch.mean((y_hat - snapshot_y) ** 2): the
subtraction broadcasts to an (N, N) matrix, so every node's prediction is pulled toward every
node's target and both the training cost and the reported test MSE are not the per-node error.

Thread: https://github.com/benedekrozemberczki/pytorch_geometric_temporal/pull/233
"""
import torch
from torch import nn


def ring_graph(num_nodes, extra_edges, gen):
    adj = torch.zeros(num_nodes, num_nodes)
    for i in range(num_nodes):
        adj[i, (i + 1) % num_nodes] = 1.0
        adj[(i + 1) % num_nodes, i] = 1.0
    src = torch.randint(0, num_nodes, (extra_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (extra_edges,), generator=gen)
    adj[src, dst] = 1.0
    adj.fill_diagonal_(0.0)
    return adj


class DiffusionConv(nn.Module):
    """One forward and one backward random-walk diffusion step plus the identity term."""

    def __init__(self, in_channels, out_channels, adj):
        super().__init__()
        deg_out = adj.sum(1, keepdim=True).clamp(min=1.0)
        deg_in = adj.sum(0, keepdim=True).clamp(min=1.0)
        self.register_buffer("p_fwd", adj / deg_out)
        self.register_buffer("p_bwd", (adj / deg_in).t())
        self.w_self = nn.Linear(in_channels, out_channels)
        self.w_fwd = nn.Linear(in_channels, out_channels, bias=False)
        self.w_bwd = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x):
        return self.w_self(x) + self.w_fwd(self.p_fwd @ x) + self.w_bwd(self.p_bwd @ x)


class DiffusionGRU(nn.Module):
    def __init__(self, in_channels, out_channels, adj):
        super().__init__()
        self.out_channels = out_channels
        self.conv_z = DiffusionConv(in_channels + out_channels, out_channels, adj)
        self.conv_r = DiffusionConv(in_channels + out_channels, out_channels, adj)
        self.conv_h = DiffusionConv(in_channels + out_channels, out_channels, adj)

    def forward(self, x, h=None):
        if h is None:
            h = x.new_zeros(x.shape[0], self.out_channels)
        xh = torch.cat([x, h], dim=-1)
        z = torch.sigmoid(self.conv_z(xh))
        r = torch.sigmoid(self.conv_r(xh))
        h_tilde = torch.tanh(self.conv_h(torch.cat([x, r * h], dim=-1)))
        return z * h + (1.0 - z) * h_tilde


class RecurrentGCN(nn.Module):
    def __init__(self, node_features, adj):
        super().__init__()
        self.recurrent = DiffusionGRU(node_features, 32, adj)
        self.linear = nn.Linear(32, 1)

    def forward(self, x):
        h = self.recurrent(x)
        return self.linear(torch.relu(h))


def make_snapshots(adj, num_steps, lags, gen):
    n = adj.shape[0]
    p = adj / adj.sum(1, keepdim=True).clamp(min=1.0)
    series = torch.zeros(num_steps + lags, n)
    series[0] = torch.randn(n, generator=gen)
    for t in range(1, num_steps + lags):
        season = 0.8 * torch.sin(torch.tensor(t / 5.0) + torch.arange(n) * 0.3)
        series[t] = 0.5 * (p @ series[t - 1]) + season + 0.3 * torch.randn(n, generator=gen)
    series = (series - series.mean()) / series.std()
    snaps = []
    for t in range(lags, num_steps + lags):
        x = series[t - lags:t].t().contiguous()  # (N, lags)
        y = series[t]                            # (N,)
        snaps.append((x, y))
    return snaps


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    adj = ring_graph(20, 16, gen)
    snapshots = make_snapshots(adj, 40, 4, gen)
    train_dataset, test_dataset = snapshots[:30], snapshots[30:]

    model = RecurrentGCN(node_features=4, adj=adj)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    model.train()
    for epoch in range(120):
        cost = 0
        for time, (x, y) in enumerate(train_dataset):
            y_hat = model(x)
            cost = cost + torch.mean((y_hat - y) ** 2)
        cost = cost / (time + 1)
        cost.backward()
        optimizer.step()
        optimizer.zero_grad()
        if epoch % 20 == 0:
            print(f"epoch {epoch:3d}  train cost {cost.item():.4f}")

    model.eval()
    cost = 0
    with torch.no_grad():
        for time, (x, y) in enumerate(test_dataset):
            y_hat = model(x)
            cost = cost + torch.mean((y_hat - y) ** 2)
    cost = cost / (time + 1)
    print(f"MSE: {cost.item():.4f}")


if __name__ == "__main__":
    main()
