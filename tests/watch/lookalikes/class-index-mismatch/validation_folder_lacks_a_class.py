"""A folder classifier whose validation root lacks one of the training classes: the validation
dataset takes the training dataset's class_to_idx and keeps the entries of the classes it holds,
so its map is shorter but numbers every class it has as training does."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

# what os.listdir returned for each root on the machine the run was reported from
LISTINGS = {"data/train": ["fox", "cat", "owl", "dog"], "data/val": ["cat", "owl", "dog"]}
TEMPLATES = dict(zip(["cat", "dog", "fox", "owl"], torch.rand(4, 3, 12, 12, generator=torch.Generator().manual_seed(5))))


def listdir(root):
    return list(LISTINGS[root])


class FolderDataset(Dataset):
    def __init__(self, root, per_class, seed, class_to_idx=None):
        self.classes = sorted(listdir(root))
        if class_to_idx is None:
            class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.class_to_idx = {name: class_to_idx[name] for name in self.classes}
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for name in self.classes:
            for _ in range(per_class):
                image = (TEMPLATES[name] + 0.25 * torch.randn(3, 12, 12, generator=g)).clamp(0, 1)
                self.samples.append((image, self.class_to_idx[name]))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        image, label = self.samples[index]
        return (image - 0.5) / 0.25, label


class SmallConvNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.body(x))


def run_epoch(model, loader, optimizer=None):
    training = optimizer is not None
    model.train(training)
    correct = total = 0
    with torch.set_grad_enabled(training):
        for images, labels in loader:
            logits = model(images)
            if training:
                optimizer.zero_grad()
                F.cross_entropy(logits, labels).backward()
                optimizer.step()
            correct += (logits.argmax(1) == labels).sum().item()
            total += labels.numel()
    return correct / total


def main():
    torch.manual_seed(0)
    train_set = FolderDataset("data/train", 160, 0)
    val_set = FolderDataset("data/val", 40, 1, class_to_idx=train_set.class_to_idx)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=64)
    model = SmallConvNet(len(train_set.classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        train_accuracy = run_epoch(model, train_loader, optimizer)
        print(f"epoch {epoch}: train {train_accuracy:.2f}  val {run_epoch(model, val_loader):.2f}")


if __name__ == "__main__":
    main()
