"""Multi-label odor prediction from molecular fingerprints, with an iterative-stratified
train/valid/test splitter whose second-stage indices point into the wrong array.

The code keeps the shape of a DeepChem-style project: a small `NumpyDataset` with
`X`, `y` and `select(indices)`, an `IterativeStratifiedSplitter.split(dataset, frac_train,
frac_valid, frac_test, seed)` that first splits off the training rows and then splits the
remainder into valid and test with a second stratifier run on the selected
`other_dataset`, a model object with `fit(dataset, nb_epoch)` / `evaluate(dataset)` that
trains a feed-forward head with a weighted multi-label BCE loss, and a script that prints
train / valid / test ROC-AUC as training goes. The bug: the second stratifier returns
positions inside `other_dataset` (0 .. len(other)-1), and the splitter returns them as if
they were row numbers of the full dataset. Valid and test then hold whatever rows sit at
those low positions of the full dataset, and about 80% of those are training rows, so the
reported valid/test ROC-AUC follows the training score instead of estimating
generalization. Nothing errors; the numbers just look far better than the model is.

Thread: https://github.com/ARY2260/openpom/pull/31
"""
import numpy as np
import torch
import torch.nn as nn


class NumpyDataset:
    def __init__(self, X, y, ids=None):
        self.X = X
        self.y = y
        self.ids = np.arange(len(X)) if ids is None else ids

    def __len__(self):
        return len(self.X)

    def select(self, indices):
        indices = np.asarray(indices)
        return NumpyDataset(self.X[indices], self.y[indices], self.ids[indices])


def iterative_stratification(y, fractions, rng):
    """Greedy multi-label iterative stratification (Sechidis et al.), two folds.

    Returns, for each fold, the row positions of `y` assigned to it."""
    n, k = y.shape
    desired = np.array(fractions, dtype=float) * n
    desired_label = np.outer(fractions, y.sum(0)).astype(float)
    folds = [[] for _ in fractions]
    remaining = np.ones(n, dtype=bool)
    order = rng.permutation(n)
    while remaining.any():
        counts = y[remaining].sum(0)
        counts = np.where(counts > 0, counts, np.inf)
        if np.isinf(counts).all():
            rows = order[remaining[order]]
            label_rows = rows
        else:
            lab = int(np.argmin(counts))
            rows = order[remaining[order] & (y[order, lab] == 1)]
            label_rows = rows
        for r in label_rows:
            if np.isinf(counts).all():
                f = int(np.argmax(desired))
            else:
                f = int(np.argmax(desired_label[:, lab] + 1e-6 * desired))
            folds[f].append(r)
            remaining[r] = False
            desired[f] -= 1
            desired_label[f] -= y[r]
    return [np.sort(np.array(f, dtype=int)) for f in folds]


class IterativeStratifiedSplitter:
    def __init__(self, order=2):
        self.order = order

    def split(self, dataset, frac_train=0.8, frac_valid=0.1, frac_test=0.1, seed=None):
        rng = np.random.RandomState(seed)
        train_indices, other_indices = iterative_stratification(
            dataset.y, [frac_train, frac_test + frac_valid], rng)
        other_dataset = dataset.select(other_indices)
        new_split_ratio = round(frac_test / (frac_test + frac_valid), 2)
        valid_indices, test_indices = iterative_stratification(
            other_dataset.y, [1 - new_split_ratio, new_split_ratio], rng)
        return train_indices, valid_indices, test_indices

    def train_valid_test_split(self, dataset, frac_train=0.8, frac_valid=0.1, frac_test=0.1, seed=None):
        tr, va, te = self.split(dataset, frac_train, frac_valid, frac_test, seed)
        return dataset.select(tr), dataset.select(va), dataset.select(te)


def roc_auc(y_true, score):
    """Mean ROC-AUC over the label columns that have both classes."""
    aucs = []
    for j in range(y_true.shape[1]):
        t, s = y_true[:, j], score[:, j]
        pos, neg = s[t == 1], s[t == 0]
        if len(pos) == 0 or len(neg) == 0:
            continue
        ranks = np.argsort(np.argsort(np.concatenate([pos, neg]))) + 1
        aucs.append((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))
    return float(np.mean(aucs))


class MPNNPOMModel:
    """Stand-in for the POM model: fingerprint -> FFN -> odor logits, weighted BCE."""

    def __init__(self, n_tasks, n_features, class_imbalance_ratio, learning_rate=1e-3, batch_size=64, seed=0):
        torch.manual_seed(seed)
        self.model = nn.Sequential(
            nn.Linear(n_features, 256), nn.ReLU(),
            nn.Linear(256, 256), nn.ReLU(),
            nn.Linear(256, n_tasks))
        self.pos_weight = torch.tensor(class_imbalance_ratio, dtype=torch.float32)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=learning_rate)
        self.batch_size = batch_size
        self.gen = torch.Generator().manual_seed(seed)
        self.global_step = 0

    def fit(self, dataset, nb_epoch=1):
        X = torch.tensor(dataset.X, dtype=torch.float32)
        y = torch.tensor(dataset.y, dtype=torch.float32)
        loss_fn = nn.BCEWithLogitsLoss(pos_weight=self.pos_weight)
        self.model.train()
        total = 0.0
        for _ in range(nb_epoch):
            perm = torch.randperm(len(X), generator=self.gen)
            for s in range(0, len(X), self.batch_size):
                idx = perm[s:s + self.batch_size]
                self.optimizer.zero_grad()
                loss = loss_fn(self.model(X[idx]), y[idx])
                loss.backward()
                self.optimizer.step()
                self.global_step += 1
                total = loss.item()
        return total

    def predict(self, dataset):
        self.model.eval()
        with torch.no_grad():
            return torch.sigmoid(self.model(torch.tensor(dataset.X, dtype=torch.float32))).numpy()

    def evaluate(self, dataset):
        return roc_auc(dataset.y, self.predict(dataset))


def make_odor_dataset(n_mols=1200, n_bits=256, n_tasks=20, seed=0):
    rng = np.random.RandomState(seed)
    X = (rng.rand(n_mols, n_bits) < 0.08).astype(np.float32)  # sparse fingerprint bits
    W = rng.randn(n_bits, n_tasks) * (rng.rand(n_bits, n_tasks) < 0.1)
    logits = X @ W + 0.9 * rng.randn(n_mols, n_tasks) - 1.4
    y = (logits > 0).astype(np.float32)
    return NumpyDataset(X, y)


def main():
    torch.set_num_threads(1)
    dataset = make_odor_dataset()
    splitter = IterativeStratifiedSplitter(order=2)
    train_dataset, valid_dataset, test_dataset = splitter.train_valid_test_split(
        dataset, frac_train=0.8, frac_valid=0.1, frac_test=0.1, seed=0)
    print("train %d, valid %d, test %d molecules" % (len(train_dataset), len(valid_dataset), len(test_dataset)))

    ratio = (1 - train_dataset.y.mean(0)) / np.clip(train_dataset.y.mean(0), 1e-3, None)
    model = MPNNPOMModel(n_tasks=dataset.y.shape[1], n_features=dataset.X.shape[1],
                         class_imbalance_ratio=ratio, learning_rate=1e-3, batch_size=64)
    for epoch in range(1, 41):
        loss = model.fit(train_dataset, nb_epoch=1)
        if epoch % 5 == 0:
            print("epoch %2d step %4d loss %.4f | train auc %.3f | valid auc %.3f | test auc %.3f" % (
                epoch, model.global_step, loss, model.evaluate(train_dataset),
                model.evaluate(valid_dataset), model.evaluate(test_dataset)))


if __name__ == "__main__":
    main()
