"""A Dataset class whose transform argument scales uint8 images to [0, 1] and standardizes them;
the training set gets the transform, the validation set is built without it (transform=None), so
the CNN is validated on raw 0-255 pixels it never saw in training."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, images, labels, transform=None):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        x = self.images[i].float()
        return (self.transform(x) if self.transform else x), self.labels[i]


def standardize(x):
    return (x / 255.0 - 0.5) / 0.25


def make_data(n, g):
    labels = torch.randint(0, 3, (n,), generator=g)
    base = torch.tensor([60.0, 128.0, 200.0])[labels].view(n, 1, 1, 1)
    images = (base + 30 * torch.randn(n, 3, 12, 12, generator=g)).clamp(0, 255).to(torch.uint8)
    return images, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_set = Images(*make_data(512, g), transform=standardize)
    val_set = Images(*make_data(128, g), transform=None)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        model.train()
        for step, (x, y) in enumerate(DataLoader(train_set, batch_size=32, shuffle=True, generator=g)):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 4 == 0:
                model.eval()
                with torch.no_grad():
                    acc = sum((model(xv).argmax(1) == yv).sum().item()
                              for xv, yv in DataLoader(val_set, batch_size=64)) / len(val_set)
                model.train()
        print(f"epoch {epoch} loss {loss.item():.3f} val acc {acc:.3f}")


if __name__ == "__main__":
    main()
