"""A production-style active learning loop: an ActiveSet wraps a file dataset and keeps a pool of
unlabelled items, a ModelWrapper trains an MLP with dropout and predicts the pool with Monte-Carlo
dropout, BALD ranks the pool, and the oracle's labels are looked up by file name. The ranking
returns indices into the pool, but the labels are fetched with train_dataset.files[idx] as if they
were indices into the full dataset, so from the second round on every acquired item is labelled
with another file's label and the training set fills up with wrong labels.

Thread: https://github.com/baal-org/baal/issues/200
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
N, D, C = 1200, 24, 5
g = torch.Generator().manual_seed(0)
CENTERS = 2.0 * torch.randn(C, D, generator=g)
TRUE_Y = torch.randint(0, C, (N,), generator=g)
FEATS = CENTERS[TRUE_Y] + 1.5 * torch.randn(N, D, generator=g)


class FileDataset:
    def __init__(self):
        self.files = [f"img_{i:05d}.png" for i in range(N)]

    def load(self, i):
        return FEATS[i]


def get_label(path):  # the human annotator
    return int(TRUE_Y[int(path[4:9])])


class ActiveSet:
    def __init__(self, ds):
        self.ds, self.labels = ds, torch.full((N,), -1)

    def pool_indices(self):
        return (self.labels < 0).nonzero().squeeze(1)

    def label(self, pool_idx, labels):  # pool indices, remapped internally
        oracle = self.pool_indices()[torch.as_tensor(pool_idx)]
        self.labels[oracle] = torch.as_tensor(labels)

    def labelled(self):
        idx = (self.labels >= 0).nonzero().squeeze(1)
        return torch.stack([self.ds.load(int(i)) for i in idx]), self.labels[idx]

    def pool(self):
        return torch.stack([self.ds.load(int(i)) for i in self.pool_indices()])


class ModelWrapper:
    def __init__(self, model):
        self.model, self.init = model, {k: v.clone() for k, v in model.state_dict().items()}

    def train_on_dataset(self, x, y, optimizer, batch_size, epoch):
        self.model.train()
        for _ in range(epoch):
            for idx in torch.randperm(len(y)).split(batch_size):
                optimizer.zero_grad()
                loss = F.cross_entropy(self.model(x[idx]), y[idx])
                loss.backward()
                optimizer.step()
        return loss.item()

    @torch.no_grad()
    def predict_on_dataset(self, x, iterations):
        self.model.train()  # dropout on for MC sampling
        return torch.stack([F.softmax(self.model(x), 1) for _ in range(iterations)], -1)


def bald(probs):  # probs [N, C, I] -> pool indices, most informative first
    mean = probs.mean(-1)
    h = -(mean * mean.clamp_min(1e-12).log()).sum(1)
    eh = -(probs * probs.clamp_min(1e-12).log()).sum(1).mean(-1)
    return torch.argsort(h - eh, descending=True)


def main():
    train_dataset = FileDataset()
    active_ds = ActiveSet(train_dataset)
    first = torch.randperm(N, generator=torch.Generator().manual_seed(1))[:100]
    active_ds.label(first, [get_label(train_dataset.files[int(i)]) for i in first])
    model = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, C))
    wrapper = ModelWrapper(model)
    for step in range(8):
        model.load_state_dict(wrapper.init)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x, y = active_ds.labelled()
        loss = wrapper.train_on_dataset(x, y, optimizer, batch_size=32, epoch=3)
        predictions = wrapper.predict_on_dataset(active_ds.pool(), iterations=10)
        top_uncertainty = bald(predictions)[:40]
        labels = [get_label(train_dataset.files[int(idx)]) for idx in top_uncertainty]
        active_ds.label(top_uncertainty, labels)
        print(f"step {step} labelled {len(y)} train loss {loss:.3f}")


if __name__ == "__main__":
    main()
