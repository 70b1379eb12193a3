"""A tabular churn model trained with CyclicLR (step_size_up=32 iterations) in a train() function
that takes the model, loader, optimizer and scheduler as arguments and steps the scheduler after
every optimizer.step(), as CyclicLR is meant to be: the learning rate cycles between base_lr and
max_lr every 64 batches."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def churn_table(n=2048, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    y = ((x[:, 0] - 0.5 * x[:, 3] + 0.3 * torch.randn(n, generator=g)) > 0).float().unsqueeze(1)
    return TensorDataset(x, y)


def train(model, loader, optimizer, scheduler, epochs=2):
    for epoch in range(epochs):
        total = 0.0
        for x, y in loader:
            loss = F.binary_cross_entropy_with_logits(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total / len(loader):.4f}")


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CyclicLR(optimizer, base_lr=1e-4, max_lr=0.05, step_size_up=32)
    train(model, DataLoader(churn_table(), batch_size=32, shuffle=True), optimizer, scheduler)


if __name__ == "__main__":
    main()
