"""A traffic-flow forecaster in the AGCRN / DDGCRN layout: get_dataloader() loads the
(time, nodes, 1) flow array, calls normalize_dataset(data, 'std') to z-score it, appends
time-of-day and day-of-week channels, splits by ratio into train / val / test, cuts lag/horizon
windows and builds DataLoaders; an adaptive-graph convolutional GRU (node embeddings give a learned
adjacency softmax(relu(E E^T)), graph convolution inside the gates) predicts the next horizon steps
for every node. A Trainer class runs train_epoch / val_epoch / test_epoch, maps outputs and labels
back with scaler.inverse_transform (real_value) and uses an L1 loss, with Adam. The mean and
standard deviation are computed on the whole series before the split, so the statistics of the
validation and test periods (here a rising demand level) are baked into the training inputs and
the validation and test errors are measured on data whose scale leaked into training.

Thread: https://github.com/wengwenchao123/DDGCRN/issues/4
"""
import numpy as np
import torch
from torch import nn


class StandardScaler:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def transform(self, data):
        return (data - self.mean) / self.std

    def inverse_transform(self, data):
        return data * self.std + self.mean


def normalize_dataset(data, normalizer):
    assert normalizer == "std"
    scaler = StandardScaler(float(data.mean()), float(data.std()))
    return scaler.transform(data), scaler


def split_data_by_ratio(data, val_ratio, test_ratio):
    n = data.shape[0]
    test = data[-int(n * test_ratio):]
    val = data[-int(n * (test_ratio + val_ratio)):-int(n * test_ratio)]
    train = data[:-int(n * (test_ratio + val_ratio))]
    return train, val, test


def add_window_horizon(data, lag, horizon):
    xs, ys = [], []
    for i in range(len(data) - lag - horizon + 1):
        xs.append(data[i:i + lag])
        ys.append(data[i + lag:i + lag + horizon])
    return np.stack(xs), np.stack(ys)


def load_flow(length, nodes, steps_per_day, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(length)[:, None]
    daily = 60.0 * (1 + np.sin(2 * np.pi * t / steps_per_day - 1.5 + rng.uniform(-0.4, 0.4, (1, nodes))))
    trend = 0.08 * t
    flow = 120.0 + trend + daily + rng.normal(0.0, 8.0, (length, nodes))
    return flow[..., None].astype(np.float32)


def get_dataloader(args):
    data = load_flow(args["length"], args["num_nodes"], args["steps_per_day"], seed=0)
    data, scaler = normalize_dataset(data, "std")
    L, N, _ = data.shape
    tod = np.tile((np.arange(L) % args["steps_per_day"] / args["steps_per_day"])[:, None, None], (1, N, 1))
    dow = np.tile(((np.arange(L) // args["steps_per_day"]) % 7 / 7.0)[:, None, None], (1, N, 1))
    data = np.concatenate([data, tod, dow], axis=-1).astype(np.float32)
    loaders = []
    for part, shuffle in zip(split_data_by_ratio(data, args["val_ratio"], args["test_ratio"]), (True, False, False)):
        x, y = add_window_horizon(part, args["lag"], args["horizon"])
        ds = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
        loaders.append(torch.utils.data.DataLoader(ds, batch_size=args["batch_size"], shuffle=shuffle,
                                                   drop_last=shuffle,
                                                   generator=torch.Generator().manual_seed(0)))
    return (*loaders, scaler)


class AdaptiveGraphConv(nn.Module):
    def __init__(self, dim_in, dim_out, embed_dim):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(embed_dim, 2, dim_in, dim_out) * 0.1)
        self.bias = nn.Parameter(torch.zeros(embed_dim, dim_out))

    def forward(self, x, node_emb):               # x: (B, N, C)
        supports = torch.softmax(torch.relu(node_emb @ node_emb.t()), dim=1)
        x_g = torch.stack([x, torch.einsum("nm,bmc->bnc", supports, x)], dim=2)   # B, N, 2, C
        w = torch.einsum("nd,dkio->nkio", node_emb, self.weights)
        return torch.einsum("bnki,nkio->bno", x_g, w) + node_emb @ self.bias


class AGCRNCell(nn.Module):
    def __init__(self, dim_in, dim_out, embed_dim):
        super().__init__()
        self.hidden = dim_out
        self.gate = AdaptiveGraphConv(dim_in + dim_out, 2 * dim_out, embed_dim)
        self.update = AdaptiveGraphConv(dim_in + dim_out, dim_out, embed_dim)

    def forward(self, x, state, node_emb):
        zr = torch.sigmoid(self.gate(torch.cat([x, state], -1), node_emb))
        z, r = zr.split(self.hidden, dim=-1)
        hc = torch.tanh(self.update(torch.cat([x, z * state], -1), node_emb))
        return r * state + (1 - r) * hc


class GraphRecurrentForecaster(nn.Module):
    def __init__(self, num_nodes, input_dim, hidden, embed_dim, horizon):
        super().__init__()
        self.node_emb = nn.Parameter(torch.randn(num_nodes, embed_dim))
        self.cell = AGCRNCell(input_dim, hidden, embed_dim)
        self.end_conv = nn.Linear(hidden, horizon)
        self.hidden = hidden

    def forward(self, x):                          # x: (B, T, N, 3)
        state = x.new_zeros(x.shape[0], x.shape[2], self.hidden)
        for t in range(x.shape[1]):
            state = self.cell(x[:, t], state, self.node_emb)
        return self.end_conv(state).permute(0, 2, 1).unsqueeze(-1)   # B, horizon, N, 1


class Trainer:
    def __init__(self, model, loss, optimizer, train_loader, val_loader, test_loader, scaler, args):
        self.model, self.loss, self.optimizer = model, loss, optimizer
        self.train_loader, self.val_loader, self.test_loader = train_loader, val_loader, test_loader
        self.scaler, self.args = scaler, args

    def _step_loss(self, data, target):
        label = target[..., :1]
        output = self.model(data)
        if self.args["real_value"]:
            output = self.scaler.inverse_transform(output)
            label = self.scaler.inverse_transform(label)
        return self.loss(output, label)

    def eval_epoch(self, loader):
        self.model.eval()
        with torch.no_grad():
            losses = [self._step_loss(d, t).item() for d, t in loader]
        return sum(losses) / len(losses)

    def train_epoch(self, epoch):
        self.model.train()
        total = 0.0
        for data, target in self.train_loader:
            self.optimizer.zero_grad()
            loss = self._step_loss(data, target)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(self.train_loader)

    def train(self):
        best = float("inf")
        for epoch in range(self.args["epochs"]):
            train_loss = self.train_epoch(epoch)
            val_loss = self.eval_epoch(self.val_loader)
            best = min(best, val_loss)
            print(f"Epoch {epoch}: train MAE {train_loss:.3f}  val MAE {val_loss:.3f}  best {best:.3f}")
        print(f"test MAE {self.eval_epoch(self.test_loader):.3f}")


def main():
    torch.manual_seed(0)
    args = dict(length=1100, num_nodes=12, steps_per_day=48, lag=12, horizon=3, batch_size=32,
                val_ratio=0.2, test_ratio=0.2, epochs=4, real_value=True)
    train_loader, val_loader, test_loader, scaler = get_dataloader(args)
    model = GraphRecurrentForecaster(args["num_nodes"], 3, 16, 4, args["horizon"])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    Trainer(model, nn.L1Loss(), optimizer, train_loader, val_loader, test_loader, scaler, args).train()


if __name__ == "__main__":
    main()
