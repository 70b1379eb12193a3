"""A traffic-speed forecaster in the PyTorch Geometric Temporal A3T-GCN layout: an attention
temporal graph cell runs a T-GCN gated recurrent cell (graph convolution over the sensor graph
inside each gate) on every one of the `periods` input time steps and mixes the results with a
softmax over a per-period attention vector; a TemporalGNN module puts ReLU and a Linear(32,
periods) head on top for single-shot multi-step prediction. Batches of (B, nodes, features,
periods) windows are trained with Adam and MSELoss (backward, step, zero_grad per batch) and a
held-out split is scored at the end. The attention vector is created in the cell as a plain
tensor, torch.empty(periods) filled with uniform noise, instead of an nn.Parameter: it is not
registered with the module, never reaches the optimizer and gets no gradient, so the period
weights stay at their random start and the "attention" model cannot focus on the recent steps.

Thread: https://github.com/benedekrozemberczki/pytorch_geometric_temporal/pull/122
"""
import torch
import torch.nn.functional as F
from torch import nn


def normalized_adjacency(num_nodes, gen):
    adj = torch.zeros(num_nodes, num_nodes)
    idx = torch.arange(num_nodes)
    adj[idx, (idx + 1) % num_nodes] = 1.0
    adj[(idx + 1) % num_nodes, idx] = 1.0
    extra = torch.randint(0, num_nodes, (2, num_nodes // 2), generator=gen)
    adj[extra[0], extra[1]] = 1.0
    adj[extra[1], extra[0]] = 1.0
    adj = adj + torch.eye(num_nodes)
    adj = adj.clamp(max=1.0)
    d = adj.sum(1).rsqrt()
    return d[:, None] * adj * d[None, :]


class GraphConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels)

    def forward(self, x, a_hat):          # x: (B, N, C)
        return a_hat @ self.lin(x)


class TGCNCell(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.out_channels = out_channels
        self.conv_z, self.conv_r, self.conv_h = (GraphConv(in_channels, out_channels) for _ in range(3))
        self.linear_z = nn.Linear(2 * out_channels, out_channels)
        self.linear_r = nn.Linear(2 * out_channels, out_channels)
        self.linear_h = nn.Linear(2 * out_channels, out_channels)

    def forward(self, x, a_hat, h=None):
        if h is None:
            h = x.new_zeros(x.shape[0], x.shape[1], self.out_channels)
        z = torch.sigmoid(self.linear_z(torch.cat([self.conv_z(x, a_hat), h], dim=-1)))
        r = torch.sigmoid(self.linear_r(torch.cat([self.conv_r(x, a_hat), h], dim=-1)))
        h_tilde = torch.tanh(self.linear_h(torch.cat([self.conv_h(x, a_hat), h * r], dim=-1)))
        return z * h + (1 - z) * h_tilde


class AttentionTGCN(nn.Module):
    def __init__(self, in_channels, out_channels, periods):
        super().__init__()
        self.periods = periods
        self._base_tgcn = TGCNCell(in_channels, out_channels)
        self._attention = torch.empty(periods)
        nn.init.uniform_(self._attention)

    def forward(self, x, a_hat, h=None):   # x: (B, N, F, T)
        probs = torch.softmax(self._attention, dim=0)
        h_accum = 0
        for period in range(self.periods):
            h_accum = h_accum + probs[period] * self._base_tgcn(x[:, :, :, period], a_hat, h)
        return h_accum


class TemporalGNN(nn.Module):
    def __init__(self, node_features, periods):
        super().__init__()
        self.tgnn = AttentionTGCN(node_features, 32, periods)
        self.linear = nn.Linear(32, periods)

    def forward(self, x, a_hat):
        return self.linear(F.relu(self.tgnn(x, a_hat)))


def make_windows(a_hat, num_nodes, length, periods, gen):
    speed = torch.zeros(length, num_nodes)
    speed[0] = torch.randn(num_nodes, generator=gen)
    for t in range(1, length):
        speed[t] = 0.9 * (a_hat @ speed[t - 1]) + 0.45 * torch.randn(num_nodes, generator=gen)
    hour = torch.sin(torch.arange(length, dtype=torch.float32) * 2 * torch.pi / 48.0)
    feats = torch.stack([speed, hour[:, None].expand(length, num_nodes)], dim=-1)   # (L, N, 2)
    xs, ys = [], []
    for s in range(0, length - 2 * periods):
        xs.append(feats[s:s + periods].permute(1, 2, 0))       # (N, F, T)
        ys.append(speed[s + periods:s + 2 * periods].t())      # (N, T)
    return torch.stack(xs), torch.stack(ys)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    num_nodes, periods, batch_size = 20, 6, 32
    a_hat = normalized_adjacency(num_nodes, gen)
    x, y = make_windows(a_hat, num_nodes, 820, periods, gen)
    split = int(0.8 * len(x))
    train_set = torch.utils.data.TensorDataset(x[:split], y[:split])
    test_set = torch.utils.data.TensorDataset(x[split:], y[split:])
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True,
                                               generator=torch.Generator().manual_seed(0))
    test_loader = torch.utils.data.DataLoader(test_set, batch_size=batch_size, shuffle=False)

    model = TemporalGNN(node_features=2, periods=periods)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()

    model.train()
    for epoch in range(5):
        loss_list = []
        for encoder_inputs, labels in train_loader:
            y_hat = model(encoder_inputs, a_hat)
            loss = loss_fn(y_hat, labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss_list.append(loss.item())
        print(f"Epoch {epoch} train MSE: {sum(loss_list) / len(loss_list):.4f}")

    model.eval()
    total = []
    with torch.no_grad():
        for encoder_inputs, labels in test_loader:
            total.append(loss_fn(model(encoder_inputs, a_hat), labels).item())
    print(f"Test MSE: {sum(total) / len(total):.4f}")


if __name__ == "__main__":
    main()
