"""A colour-pattern classifier whose images arrive channels-last, (N, H, W, 3), as an image library
returns them. A preprocessing helper turns the batch into the (N, 3, H, W) layout nn.Conv2d wants
with `batch.permute(0, 3, 1, 2)`, which moves the channel axis and keeps each pixel's colours
together. The Trainer class calls the helper before
every forward."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

H = W = 12


def make_images(n, g):
    """Three classes that differ only in which colour dominates a random blob."""
    labels = torch.randint(0, 3, (n,), generator=g)
    images = 0.2 * torch.rand(n, H, W, 3, generator=g)
    for i, c in enumerate(labels.tolist()):
        r0, c0 = torch.randint(0, H - 5, (2,), generator=g).tolist()
        images[i, r0:r0 + 5, c0:c0 + 5, c] += 0.8
    return images, labels


def to_model_layout(batch):
    n, h, w, c = batch.shape
    return batch.permute(0, 3, 1, 2)   # fixed: move the channel axis, every pixel keeps its colours


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class Trainer:
    def __init__(self, model, loader, lr=3e-3):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self):
        self.model.train()
        for images, labels in self.loader:
            logits = self.model(to_model_layout(images))
            loss = self.criterion(logits, labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images, labels = make_images(768, g)
    trainer = Trainer(SmallCNN(), DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True))
    for epoch in range(3):
        print(f"epoch {epoch} loss {trainer.train_epoch():.4f}")


if __name__ == "__main__":
    main()
