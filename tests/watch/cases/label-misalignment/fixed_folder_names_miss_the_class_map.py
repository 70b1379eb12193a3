"""The same folder dataset with the folder name lower-cased before the class_to_idx lookup: the
three classes get their own labels."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CLASSES = ["cat", "dog", "fox"]


class FolderDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.folders = [["Cat", "Dog", "Fox"][int(i)] for i in torch.randint(0, 3, (n,), generator=g)]
        centers = {"Cat": -1.0, "Dog": 0.0, "Fox": 1.0}
        self.images = [torch.randn(1, 8, 8, generator=g) + centers[f] for f in self.folders]
        self.class_to_idx = {name: i for i, name in enumerate(CLASSES)}

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.class_to_idx[self.folders[i].lower()]


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def fit(self, epochs):
        for _ in range(epochs):
            correct = 0
            for images, labels in self.loader:
                logits = self.model(images)
                loss = self.criterion(logits, labels)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                correct += (logits.argmax(1) == labels).sum().item()
            print(f"loss {loss.item():.3f} accuracy {correct / len(self.loader.dataset):.3f}")


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                          nn.Linear(32, 3))
    loader = DataLoader(FolderDataset(960, 0), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(1))
    Trainer(model, loader).fit(2)


if __name__ == "__main__":
    main()
