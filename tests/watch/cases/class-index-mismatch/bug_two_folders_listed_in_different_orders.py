"""An image classifier whose dataset class numbers its classes in the order the directory listing
returns the class folders (os.listdir gives no order). The training and validation roots are
listed in different orders, so the same class gets another index in each split: the model learns
the training numbering and is scored against the validation numbering."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

# what os.listdir returned for each root on the machine the run was reported from
LISTINGS = {"data/train": ["fox", "cat", "owl", "dog"], "data/val": ["cat", "dog", "fox", "owl"]}
TEMPLATES = dict(zip(["cat", "dog", "fox", "owl"], torch.rand(4, 3, 12, 12, generator=torch.Generator().manual_seed(5))))


def listdir(root):
    return list(LISTINGS[root])


class FolderDataset(Dataset):
    def __init__(self, root, per_class, seed):
        self.classes = listdir(root)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
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
    train_set, val_set = FolderDataset("data/train", 160, 0), FolderDataset("data/val", 40, 1)
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=64)
    model = SmallConvNet(len(train_set.classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    for epoch in range(3):
        train_accuracy = run_epoch(model, train_loader, optimizer)
        print(f"epoch {epoch}: train {train_accuracy:.2f}  val {run_epoch(model, val_loader):.2f}")


if __name__ == "__main__":
    main()
