"""A BGC-Prophet-style biosynthetic gene cluster (BGC) product classifier: each BGC is a sequence of
per-gene protein-language-model embeddings, and the training table expands every BGC into five rows
taken with different genomic context windows (row ids ending in _0, _-1, _1, _2, _3). A
BGCClassifyData class reads the table and splits it with a private __train_test_split (stratified by
class), and a small transformer encoder over genes is trained with Adam and CrossEntropyLoss, scored
on the held-out rows after every epoch.

Bug: __train_test_split stratifies and shuffles individual rows, not BGCs, so the five context
windows of one cluster land on both sides of the split. The test rows are near-copies of training
rows: the classifier can memorise clusters, the held-out accuracy is far above what it reaches on
clusters it has never seen, and it is the number used to tune the model.

Thread: https://github.com/HUST-NingKang-Lab/BGC-Prophet/issues/8
"""
import numpy as np
import torch
from torch import nn

N_CLASSES, N_GENES, EMB = 6, 12, 32


def simulate_bgcs(n_bgc, rng, class_dirs):
    """Per BGC: a class and an idiosyncratic set of gene embeddings; five context windows each."""
    rows, labels, bgc_ids = [], [], []
    for b in range(n_bgc):
        c = rng.integers(N_CLASSES)
        core = rng.normal(size=(N_GENES + 5, EMB)) + 0.08 * class_dirs[c]
        for shift in (0, -1, 1, 2, 3):
            window = core[2 + shift: 2 + shift + N_GENES] + rng.normal(scale=0.2, size=(N_GENES, EMB))
            rows.append(window)
            labels.append(c)
            bgc_ids.append(f"BGC{b:05d}_{shift}")
    return np.stack(rows).astype(np.float32), np.array(labels), bgc_ids


class BGCClassifyData:
    def __init__(self, features, labels, ids, test_size=0.2, seed=0):
        self.features, self.labels, self.ids = features, labels, ids
        self.train_idx, self.test_idx = self.__train_test_split(test_size, seed)

    def __train_test_split(self, test_size, seed):
        rng = np.random.default_rng(seed)
        train, test = [], []
        for c in np.unique(self.labels):  # stratified by class, over rows
            idx = rng.permutation(np.flatnonzero(self.labels == c))
            n_test = int(round(len(idx) * test_size))
            test.extend(idx[:n_test])
            train.extend(idx[n_test:])
        return np.array(train), np.array(test)

    def loader(self, split, batch_size=32, shuffle=True):
        idx = self.train_idx if split == "train" else self.test_idx
        ds = torch.utils.data.TensorDataset(torch.from_numpy(self.features[idx]), torch.from_numpy(self.labels[idx]))
        return torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=shuffle,
                                           generator=torch.Generator().manual_seed(0))


class BGCTransformerClassifier(nn.Module):
    def __init__(self, d_model=EMB, n_classes=N_CLASSES):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1)
        self.head = nn.Sequential(nn.Linear(d_model, 64), nn.ReLU(), nn.Linear(64, n_classes))

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    class_dirs = rng.normal(size=(N_CLASSES, EMB))
    data = BGCClassifyData(*simulate_bgcs(400, rng, class_dirs))
    new_x, new_y, _ = simulate_bgcs(150, rng, class_dirs)  # clusters never seen in the table
    model = BGCTransformerClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    test_loader = data.loader("test", batch_size=400, shuffle=False)
    for epoch in range(6):
        model.train()
        for x, y in data.loader("train"):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        x_test, y_test = next(iter(test_loader))
        print(f"epoch {epoch} train loss {loss.item():.3f} test acc {accuracy(model, x_test, y_test):.3f}")
    print(f"accuracy on unseen BGCs {accuracy(model, torch.from_numpy(new_x), torch.from_numpy(new_y)):.3f}")


if __name__ == "__main__":
    main()
