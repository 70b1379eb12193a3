"""Digit-style image classification with one dataset split into training and validation by index
lists. A helper make_loaders() gives the training indices to torch's SubsetRandomSampler, which
draws them in a new order every epoch, and the validation indices to a hand-written IndexSampler
that yields them as given (the order does not matter there)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Sampler, SubsetRandomSampler, TensorDataset


class IndexSampler(Sampler):
    def __init__(self, indices):
        self.indices = list(indices)

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def make_loaders(dataset, val_share=0.2, batch_size=32):
    n = len(dataset)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    cut = int(n * val_share)
    train_idx, val_idx = sorted(order[cut:].tolist()), sorted(order[:cut].tolist())
    train = DataLoader(dataset, batch_size=batch_size, sampler=SubsetRandomSampler(train_idx))
    val = DataLoader(dataset, batch_size=256, sampler=IndexSampler(val_idx))
    return train, val


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.body(x))


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        correct = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
    model.train()
    return correct / len(loader.sampler)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    labels = torch.randint(0, 10, (2400,), generator=g)
    images = torch.randn(2400, 1, 12, 12, generator=g) * 0.5 + labels.view(-1, 1, 1, 1) / 5.0
    train_loader, val_loader = make_loaders(TensorDataset(images, labels))
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f} val accuracy {evaluate(model, val_loader):.2f}")


if __name__ == "__main__":
    main()
