"""A chemprop-style MPNN regressor on molecular graphs plus extra molecule-level descriptors X_d (a
molecular weight and a logP-like value on their raw scales). The datasets scale X_d and the targets
with scalers fitted on the training split; the model carries an X_d_transform and an output_transform
that act only in eval mode, so that raw inputs given at prediction time are scaled and the outputs
unscaled. Validation runs the model in eval mode and, in on_validation_model_eval, switches only the
output_transform back to train mode so the loss is scored in the scaled space. The X_d_transform is
left in eval mode, so the validation descriptors, already scaled by the dataset, are scaled a second
time. Training is fine and raw-input test predictions are good, but the logged val_loss is several
times too high, and it is what early stopping and checkpoint selection read.

Thread: https://github.com/chemprop/chemprop/pull/1097
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class ScaleTransform(nn.Module):
    def __init__(self, mean, scale):
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32)[None])
        self.register_buffer("scale", torch.as_tensor(scale, dtype=torch.float32)[None])

    def forward(self, X):
        return X if self.training else (X - self.mean) / self.scale


class UnscaleTransform(ScaleTransform):
    def forward(self, X):
        return X if self.training else X * self.scale + self.mean


class MoleculeDataset:
    def __init__(self, graphs, X_d, Y):
        self.graphs, self.X_d, self.Y = graphs, X_d.copy(), Y.copy()

    def normalize_inputs(self, scaler=None):
        scaler = scaler or (self.X_d.mean(0), self.X_d.std(0))
        self.X_d = (self.X_d - scaler[0]) / scaler[1]
        return scaler

    def normalize_targets(self, scaler=None):
        scaler = scaler or (self.Y.mean(0), self.Y.std(0))
        self.Y = (self.Y - scaler[0]) / scaler[1]
        return scaler

    def batches(self, bs, rng=None):
        order = rng.permutation(len(self.Y)) if rng is not None else np.arange(len(self.Y))
        for s in range(0, len(order), bs):
            idx = order[s:s + bs]
            V, src, dst, batch, off = [], [], [], [], 0
            for k, i in enumerate(idx):
                x, e = self.graphs[i]
                V.append(x); src.append(e[0] + off); dst.append(e[1] + off)
                batch.append(np.full(len(x), k)); off += len(x)
            yield (torch.tensor(np.concatenate(V)), torch.tensor(np.concatenate(src)), torch.tensor(np.concatenate(dst)),
                   torch.tensor(np.concatenate(batch)), torch.tensor(self.X_d[idx]), torch.tensor(self.Y[idx]))


class MPNN(nn.Module):
    def __init__(self, d_v, d_xd, X_d_transform, output_transform, d_h=64, depth=3):
        super().__init__()
        self.W_i, self.W_h, self.depth = nn.Linear(d_v, d_h), nn.Linear(d_h, d_h), depth
        self.X_d_transform = X_d_transform
        self.predictor = nn.Sequential(nn.Linear(d_h + d_xd, 64), nn.ReLU(), nn.Linear(64, 1))
        self.output_transform = output_transform

    def fingerprint(self, V, src, dst, batch, X_d):
        h0 = F.relu(self.W_i(V))
        h = h0
        for _ in range(self.depth - 1):
            h = F.relu(h0 + self.W_h(torch.zeros_like(h).index_add(0, dst, h[src])))
        n = int(batch.max()) + 1
        H = torch.zeros(n, h.shape[1]).index_add(0, batch, h) / torch.bincount(batch, minlength=n)[:, None]
        return torch.cat((H, self.X_d_transform(X_d)), 1)

    def forward(self, V, src, dst, batch, X_d):
        return self.output_transform(self.predictor(self.fingerprint(V, src, dst, batch, X_d)))

    def training_step(self, b):
        return F.mse_loss(self(*b[:5]), b[5])

    def on_validation_model_eval(self):
        self.eval()
        self.output_transform.train()

    def validation_step(self, b):
        return F.mse_loss(self(*b[:5]), b[5])


def make_data(n, rng, w):
    graphs, X_d, Y = [], [], []
    for _ in range(n):
        k = rng.integers(5, 11)
        x = rng.normal(size=(k, 8)).astype(np.float32)
        ring = np.arange(k)
        e = np.concatenate([np.stack([ring, (ring + 1) % k]), np.stack([(ring + 1) % k, ring])], 1)
        mw, logp = rng.normal(320, 80), rng.normal(2.5, 1.5)
        graphs.append((x, e))
        X_d.append([mw, logp])
        Y.append([np.tanh(x.mean(0) @ w) * 2 + 0.01 * (mw - 320) + 0.8 * logp + rng.normal(0, 0.1)])
    return graphs, np.array(X_d, np.float32), np.array(Y, np.float32)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    w = rng.normal(size=8)
    train, val, test = [MoleculeDataset(*make_data(n, rng, w)) for n in (640, 160, 160)]
    x_scaler = train.normalize_inputs()
    val.normalize_inputs(x_scaler)
    y_scaler = train.normalize_targets()
    val.normalize_targets(y_scaler)
    model = MPNN(8, 2, ScaleTransform(*x_scaler), UnscaleTransform(*y_scaler))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(8):
        model.train()
        for b in train.batches(64, rng):
            loss = model.training_step(b)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.on_validation_model_eval()
        with torch.no_grad():
            val_loss = np.mean([model.validation_step(b).item() for b in val.batches(80)])
        print(f"epoch {epoch} train_loss {loss.item():.4f} val_loss {val_loss:.4f}")
    model.eval()
    with torch.no_grad():
        preds = torch.cat([model(*b[:5]) for b in test.batches(80)])
    y = torch.tensor(test.Y)
    print(f"test MSE in scaled units {((preds - y) ** 2).mean().item() / float(y_scaler[1][0]) ** 2:.4f}")


if __name__ == "__main__":
    main()
