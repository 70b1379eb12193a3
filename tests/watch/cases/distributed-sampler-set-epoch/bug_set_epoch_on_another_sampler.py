"""A train() helper receiving the model and optimizer, with a build_loader() helper that makes its
own DistributedSampler (num_replicas=1, rank=0: a single-process run). The training loop calls
set_epoch on a second sampler it built itself, not on the one the loader uses, so the loader's
sampler stays at epoch 0 and every epoch repeats one order."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build_loader(dataset, batch_size=16):
    return DataLoader(dataset, batch_size=batch_size,
                      sampler=DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True))


def train(model, optimizer, loader, sampler, epochs):
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(192, 6, generator=g)
    y = x @ torch.randn(6, 2, generator=g)
    dataset = TensorDataset(x, y)
    loader = build_loader(dataset)
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True)
    model = nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    print(f"loss {train(model, optimizer, loader, sampler, epochs=5):.4f}")


if __name__ == "__main__":
    main()
