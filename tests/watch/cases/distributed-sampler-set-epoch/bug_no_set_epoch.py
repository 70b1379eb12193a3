"""A DDP-style Trainer (one process here: the DistributedSampler is given num_replicas=1 and
rank=0, as a single-node debug run sets them) shards the training set with a shuffling
DistributedSampler, but fit() never calls sampler.set_epoch(epoch): every epoch repeats the
first epoch's order and batch composition."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Trainer:
    def __init__(self, model, dataset, world_size=1, rank=0, batch_size=32):
        self.model = model
        self.sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
        self.loader = DataLoader(dataset, batch_size=batch_size, sampler=self.sampler)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self):
        for x, y in self.loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def fit(self, epochs):
        for epoch in range(epochs):
            loss = self.train_epoch()
        return loss


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(384, 10, generator=g)
    y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 0.5).long()
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    print(f"loss {Trainer(model, TensorDataset(x, y)).fit(epochs=5):.3f}")


if __name__ == "__main__":
    main()
