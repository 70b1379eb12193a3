"""A DeepChem-style atomic convolutional network (ACNN) for protein-ligand binding energies, wrapped in
a TorchModel-like class with fit(dataset, nb_epoch) and predict(dataset); predict() calls
model.eval() and runs under torch.no_grad(). The AtomicConv module expands each atom's neighbour
distances in radial filters per neighbour atom type, then runs atomwise dense layers and sums them to
an energy; the binding energy is E(complex) - E(ligand) - E(protein). Its forward applies
F.dropout(x, dropout) with the default dropouts of 0.5 and without training=self.training, so dropout
stays on after model.eval(): validation predictions are random, two predict() calls on the same
molecules disagree, and the reported validation error is worse than the trained model's.

Thread: https://github.com/deepchem/deepchem/issues/5092
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

N_TYPES = 3


class AtomicConv(nn.Module):
    def __init__(self, n_rbf=12, layer_sizes=(32, 32), dropouts=0.5):
        super().__init__()
        self.register_buffer("centers", torch.linspace(0.5, 6.0, n_rbf))
        d = n_rbf * N_TYPES
        self.layers = nn.ModuleList()
        for size in layer_sizes:
            self.layers.append(nn.Linear(d, size))
            d = size
        self.out = nn.Linear(d, 1)
        self.dropouts = [dropouts] * len(layer_sizes)

    def energy(self, coords, types):
        n = coords.shape[1]
        d = torch.cdist(coords, coords) + torch.eye(n) * 100.0  # self pairs pushed out of range
        filt = torch.exp(-1.5 * (d[..., None] - self.centers) ** 2) * (d[..., None] < 6.0)
        onehot = F.one_hot(types, N_TYPES).float()  # (B, N, T)
        x = torch.einsum("bijr,bjt->bitr", filt, onehot).flatten(2)
        for layer, dropout in zip(self.layers, self.dropouts):
            x = torch.tanh(layer(x))
            if dropout > 0:
                x = F.dropout(x, dropout)
        return self.out(x).sum((1, 2))

    def forward(self, frag1, frag2, complex_):
        return self.energy(*complex_) - self.energy(*frag1) - self.energy(*frag2)


class TorchModel:
    def __init__(self, model, learning_rate=1e-3, batch_size=32):
        self.model, self.batch_size = model, batch_size
        self.optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
        self.rng = np.random.default_rng(0)

    def _batches(self, dataset, shuffle):
        X, y = dataset
        order = self.rng.permutation(len(y)) if shuffle else np.arange(len(y))
        for s in range(0, len(y), self.batch_size):
            i = torch.as_tensor(order[s:s + self.batch_size])
            yield [(c[i], t[i]) for c, t in X], y[i]

    def fit(self, dataset, nb_epoch=1):
        self.model.train()
        for epoch in range(nb_epoch):
            for inputs, labels in self._batches(dataset, shuffle=True):
                loss = F.mse_loss(self.model(*inputs), labels)  # L2 loss
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            print(f"epoch {epoch} train_loss {loss.item():.4f}")

    def predict(self, dataset):
        self.model.eval()
        with torch.no_grad():
            return torch.cat([self.model(*inputs) for inputs, _ in self._batches(dataset, shuffle=False)])


def make_complexes(n, g):
    lig = torch.randn(n, 4, 3, generator=g) * 0.8
    prot = torch.randn(n, 8, 3, generator=g) * 1.5 + torch.tensor([2.5, 0.0, 0.0])
    lt, pt = torch.randint(0, N_TYPES, (n, 4), generator=g), torch.randint(0, N_TYPES, (n, 8), generator=g)
    comp, ct = torch.cat([lig, prot], 1), torch.cat([lt, pt], 1)
    d = torch.cdist(lig, prot)
    strength = 1.0 + 0.5 * (lt[:, :, None] == pt[:, None, :]).float()
    y = -(strength * torch.exp(-((d - 2.5) ** 2))).sum((1, 2))
    return [(lig, lt), (prot, pt), (comp, ct)], y


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train, valid = make_complexes(640, g), make_complexes(160, g)
    y_mean, y_std = train[1].mean(), train[1].std()  # normalization transformer on y, fitted on train
    train, valid = (train[0], (train[1] - y_mean) / y_std), (valid[0], (valid[1] - y_mean) / y_std)
    model = TorchModel(AtomicConv(), learning_rate=1e-3, batch_size=32)
    model.fit(train, nb_epoch=4)
    y = valid[1]
    for run in range(2):
        pred = model.predict(valid)
        r2 = 1 - ((pred - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        print(f"valid predict() call {run}: MAE {(pred - y).abs().mean().item():.4f} R2 {r2.item():.4f}")


if __name__ == "__main__":
    main()
