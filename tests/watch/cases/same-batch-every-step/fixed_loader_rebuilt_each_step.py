"""A train() helper receiving the model and optimizer draws each step's data from one stream
over a shuffling DataLoader with a seeded generator, built once before the loop: every step
gets the next batch, and each new pass a new permutation."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def batches(dataset, batch_size=32, seed=0):
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed))
    while True:
        yield from loader


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(16, 4)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def train(model, optimizer, dataset, steps):
    stream = batches(dataset)
    for step in range(steps):
        images, labels = next(stream)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images = torch.randn(512, 1, 12, 12, generator=g)
    labels = torch.randint(0, 4, (512,), generator=g)
    images += labels.view(-1, 1, 1, 1) * 0.5
    model = ConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    print(f"loss {train(model, optimizer, TensorDataset(images, labels), steps=60):.3f}")


if __name__ == "__main__":
    main()
