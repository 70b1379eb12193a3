"""The same image classifier with the evaluation transform ending in the same Normalize(0.5, 0.25)
as the training transform: training and validation images reach the network on one scale."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, Subset


class RandomCrop:
    def __init__(self, size, padding):
        self.size, self.padding = size, padding

    def __call__(self, img):
        padded = F.pad(img, (self.padding,) * 4, mode="reflect")
        i, j = torch.randint(0, 2 * self.padding + 1, (2,)).tolist()
        return padded[:, i:i + self.size, j:j + self.size]


class RandomHorizontalFlip:
    def __call__(self, img):
        return img.flip(-1) if torch.rand(()) < 0.5 else img


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, img):
        return (img - self.mean) / self.std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ShapesFolder(Dataset):
    """Stands in for an ImageFolder: 3x16x16 images of 4 classes, each a noisy class template."""

    def __init__(self, n, transform=None, seed=0):
        g = torch.Generator().manual_seed(seed)
        templates = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(42))
        self.targets = torch.randint(0, 4, (n,), generator=g)
        self.images = (templates[self.targets] + 0.3 * torch.randn(n, 3, 16, 16, generator=g)).clamp(0, 1)
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img = self.images[index]
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.targets[index])


def build_model():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 4))


class Trainer:
    def __init__(self, model, train_loader, val_loader, epochs=3):
        self.model, self.train_loader, self.val_loader, self.epochs = model, train_loader, val_loader, epochs
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_one_epoch(self):
        self.model.train()
        for images, labels in self.train_loader:
            loss = F.cross_entropy(self.model(images), labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        correct = total = 0
        for images, labels in self.val_loader:
            correct += (self.model(images).argmax(1) == labels).sum().item()
            total += labels.numel()
        return correct / total

    def fit(self):
        for epoch in range(self.epochs):
            self.train_one_epoch()
            print(f"epoch {epoch}: val accuracy {self.evaluate():.3f}")


def main():
    torch.manual_seed(0)
    train_tf = Compose([RandomCrop(16, padding=2), RandomHorizontalFlip(), Normalize(0.5, 0.25)])
    eval_tf = Compose([Normalize(0.5, 0.25)])
    order = torch.randperm(800, generator=torch.Generator().manual_seed(1)).tolist()
    train_set = Subset(ShapesFolder(800, transform=train_tf), order[:640])
    val_set = Subset(ShapesFolder(800, transform=eval_tf), order[640:])
    trainer = Trainer(build_model(), DataLoader(train_set, batch_size=32, shuffle=True),
                      DataLoader(val_set, batch_size=64))
    trainer.fit()


if __name__ == "__main__":
    main()
