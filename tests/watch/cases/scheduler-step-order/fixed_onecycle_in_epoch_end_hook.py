"""An image classifier trained by a Trainer class with hooks: OneCycleLR is built with
total_steps = epochs * len(train_loader), a per-batch plan, and the Trainer steps it after every
optimizer.step(), so the learning rate rises to max_lr and anneals over the run; the
on_epoch_end() hook only reports."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def shapes(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 5, (n,), generator=g)
    images = torch.randn(n, 1, 16, 16, generator=g) * 0.3
    for c in range(5):
        images[labels == c, :, 2 * c:2 * c + 4, 2 * c:2 * c + 4] += 1.0
    return TensorDataset(images, labels)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 12, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(12, 24, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                      nn.Flatten())
        self.classifier = nn.Linear(96, 5)

    def forward(self, x):
        return self.classifier(self.features(x))


class Trainer:
    def __init__(self, model, train_loader, epochs=3, max_lr=0.05):
        self.model, self.loader, self.epochs = model, train_loader, epochs
        self.optimizer = torch.optim.SGD(model.parameters(), lr=max_lr, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, max_lr=max_lr,
                                                             total_steps=epochs * len(train_loader))

    def on_epoch_end(self, epoch, loss):
        print(f"epoch {epoch} loss {loss:.3f} lr {self.optimizer.param_groups[0]['lr']:.4f}")

    def fit(self):
        for epoch in range(self.epochs):
            for x, y in self.loader:
                loss = F.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()
            self.on_epoch_end(epoch, loss.item())


def main():
    torch.manual_seed(0)
    Trainer(Net(), DataLoader(shapes(960, 0), batch_size=32, shuffle=True)).fit()


if __name__ == "__main__":
    main()
