"""A BALD active learning experiment: ActiveLearningData splits a dataset into a training Subset and a
pool Subset with boolean masks, a RandomFixedLengthSampler is meant to draw target_length shuffled
indices per training pass, and every acquisition round trains a fresh Bayesian MLP (Monte-Carlo
dropout, k samples per forward) with Adam. When the training set is larger than target_length the
sampler returns range(len(dataset)), so training walks the labelled set in the same index order on
every pass and never shuffles.

Thread: https://github.com/BlackHC/batchbald_redux/pull/6
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import data

torch.manual_seed(0)


class ActiveLearningData:
    def __init__(self, dataset):
        self.dataset = dataset
        self.training_mask = np.full((len(dataset),), False)
        self.pool_mask = np.full((len(dataset),), True)
        self.training_dataset = data.Subset(dataset, [])
        self.pool_dataset = data.Subset(dataset, [])
        self._update_indices()

    def _update_indices(self):
        self.training_dataset.indices = np.nonzero(self.training_mask)[0]
        self.pool_dataset.indices = np.nonzero(self.pool_mask)[0]

    def acquire(self, pool_indices):
        indices = self.pool_dataset.indices[pool_indices]
        self.training_mask[indices], self.pool_mask[indices] = True, False
        self._update_indices()


class RandomFixedLengthSampler(data.Sampler):
    def __init__(self, dataset, target_length):
        self.dataset, self.target_length = dataset, target_length

    def __iter__(self):
        if self.target_length < len(self.dataset):  # keep all the data...
            return iter(range(len(self.dataset)))  # ...but in fixed index order
        return iter((torch.randperm(self.target_length) % len(self.dataset)).tolist())

    def __len__(self):
        return self.target_length


class BayesianMLP(nn.Module):
    def __init__(self, d, c):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(d, 128), nn.Linear(128, 64), nn.Linear(64, c)

    def forward(self, x, k):
        x = x.unsqueeze(1).expand(-1, k, -1)
        x = F.dropout(F.relu(self.fc1(x)), 0.5, training=True)
        x = F.dropout(F.relu(self.fc2(x)), 0.5, training=True)
        return F.log_softmax(self.out(x), dim=-1)  # [B, k, C]


def main():
    g = torch.Generator().manual_seed(0)
    centers = 1.5 * torch.randn(10, 32, generator=g)
    y = torch.randint(0, 10, (4000,), generator=g)
    x = centers[y] + torch.randn(4000, 32, generator=g)
    train_dataset = data.TensorDataset(x[:3000], y[:3000])
    test_loader = data.DataLoader(data.TensorDataset(x[3000:], y[3000:]), batch_size=256)
    al = ActiveLearningData(train_dataset)
    al.acquire(np.arange(200))
    train_loader = data.DataLoader(al.training_dataset, batch_size=16,
                                   sampler=RandomFixedLengthSampler(al.training_dataset, 160))
    pool_loader = data.DataLoader(al.pool_dataset, batch_size=256, shuffle=False)
    for rnd in range(6):
        model = BayesianMLP(32, 10)
        optimizer = torch.optim.Adam(model.parameters())
        model.train()
        for xb, yb in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(xb, 1).squeeze(1), yb)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            correct = sum((model(xb, 5).exp().mean(1).argmax(1) == yb).sum().item() for xb, yb in test_loader)
            logp = torch.cat([model(xb, 20) for xb, _ in pool_loader])
        mean_p = logp.exp().mean(1)
        entropy = -(mean_p * mean_p.clamp_min(1e-12).log()).sum(-1)
        scores = entropy + (logp.exp() * logp).sum(-1).mean(1)
        al.acquire(scores.topk(10).indices.numpy())
        print(f"round {rnd} train size {len(al.training_dataset) - 10} loss {loss.item():.3f} "
              f"test acc {correct / 1000:.3f}")


if __name__ == "__main__":
    main()
