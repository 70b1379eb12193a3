"""Healthy: a Dataset and a collate_fn build every tensor with torch.tensor from Python lists and
numpy arrays, read by a DataLoader with two worker processes; the training step builds a smoothed
label tensor from detached values with torch.tensor as well."""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Tabular(Dataset):
    def __init__(self, n=512, seed=0):
        rng = np.random.default_rng(seed)
        self.rows = rng.normal(size=(n, 8)).astype(np.float32)
        self.labels = (self.rows[:, :3].sum(1) > 0).astype(np.int64).tolist()

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return torch.tensor(self.rows[i]), torch.tensor(self.labels[i])


def collate(items):
    xs, ys = zip(*items)
    return torch.stack(xs), torch.tensor([int(y) for y in ys])


def main():
    torch.manual_seed(0)
    loader = DataLoader(Tabular(), batch_size=32, shuffle=True, num_workers=2, collate_fn=collate,
                        generator=torch.Generator().manual_seed(0))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            logits = model(x)
            confidence = logits.softmax(1).max(1).values
            smooth = torch.tensor([0.05 + 0.05 * c.detach() for c in confidence])
            target = F.one_hot(y, 2).float() * (1 - smooth[:, None]) + smooth[:, None] / 2
            loss = -(target * logits.log_softmax(1)).sum(1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
