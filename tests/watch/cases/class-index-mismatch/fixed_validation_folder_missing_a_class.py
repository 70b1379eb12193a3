"""The fixed twin: both splits number their folders with the training split's sorted class list, so the
validation images of the classes it holds keep the indices the model was trained on."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

TEMPLATES = torch.rand(4, 1, 12, 12, generator=torch.Generator().manual_seed(3))
NAMES = ["ant", "bee", "fly", "moth"]
# the class folders found under each root
FOLDERS = {"train": ["ant", "bee", "fly", "moth"], "val": ["bee", "fly", "moth"]}


class FolderImages(Dataset):
    def __init__(self, split, per_class, seed, classes):
        g = torch.Generator().manual_seed(seed)
        self.samples = []
        for name in sorted(FOLDERS[split]):
            index = classes.index(name)
            template = TEMPLATES[NAMES.index(name)]
            for _ in range(per_class):
                self.samples.append((template + 0.3 * torch.randn(1, 12, 12, generator=g), index))

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.samples[i]


class Classifier(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(3), nn.Flatten())
        self.fc = nn.Linear(72, classes)

    def forward(self, x):
        return self.fc(self.features(x))


class Trainer:
    def __init__(self, model, train_loader, val_loader):
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        self.best = 0.0

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        correct = total = 0
        for images, labels in self.val_loader:
            correct += int((self.model(images).argmax(1) == labels).sum())
            total += len(labels)
        self.model.train()
        return correct / total

    def fit(self, epochs):
        for epoch in range(epochs):
            self.model.train()
            for images, labels in self.train_loader:
                loss = F.cross_entropy(self.model(images), labels)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            accuracy = self.validate()
            self.best = max(self.best, accuracy)
            print(f"epoch {epoch} loss {loss.item():.3f} val top-1 {accuracy:.3f} (best {self.best:.3f})")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    classes = sorted(FOLDERS["train"])   # one class list, from the training split
    train_loader = DataLoader(FolderImages("train", 96, 0, classes), batch_size=32, shuffle=True, generator=g)
    val_loader = DataLoader(FolderImages("val", 32, 1, classes), batch_size=48)
    Trainer(Classifier(), train_loader, val_loader).fit(epochs=6)


if __name__ == "__main__":
    main()
