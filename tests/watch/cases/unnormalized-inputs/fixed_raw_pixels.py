"""A Trainer class fits a small CNN on 8-bit images decoded into float tensors; the fix has the
pipeline scale the pixels to [0, 1] and standardize them, so the first convolution sees inputs
on the scale of 1."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def decode_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=g)
    pixels = torch.randint(0, 200, (n, 3, 16, 16), generator=g)
    pixels[torch.arange(n), labels % 3] += 30 + 10 * labels.view(-1, 1, 1)   # the class tints one channel
    return pixels.clamp(0, 255).to(torch.uint8), labels


def to_tensor(images):
    return (images.float() / 255 - 0.45) / 0.25


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self):
        self.model.train()
        for images, labels in self.loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(images), labels)
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    images, labels = decode_images(512, 0)
    loader = DataLoader(TensorDataset(to_tensor(images), labels), batch_size=32, shuffle=True)
    trainer = Trainer(SmallCNN(), loader)
    for epoch in range(4):
        loss = trainer.train_epoch()
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
