"""A 1-D CNN with BatchNorm for vibration-sensor fault classification, trained from scratch. The
training dataset standardizes each window with the training set's mean and std; the validation
dataset is built by a separate helper that forgets to pass the transform, so evaluate() feeds raw
sensor counts (offset 2048, spread in the hundreds) to a model whose BatchNorm statistics were
learned on standardized windows."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


def raw_windows(n, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=g)
    t = torch.arange(128).float()
    freq = torch.tensor([0.05, 0.11, 0.23])[labels].unsqueeze(1)
    signal = torch.sin(2 * torch.pi * freq * t) + 0.3 * torch.randn(n, 128, generator=g)
    return 2048 + 300 * signal, labels


class Windows(Dataset):
    def __init__(self, windows, labels, transform=None):
        self.windows, self.labels, self.transform = windows, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.windows[i]
        if self.transform is not None:
            x = self.transform(x)
        return x.unsqueeze(0), self.labels[i]


def build_datasets():
    train_x, train_y = raw_windows(1600, 0)
    mean, std = train_x.mean(), train_x.std()

    def standardize(x):
        return (x - mean) / std
    val_x, val_y = raw_windows(256, 1)
    return Windows(train_x, train_y, standardize), make_eval_set(val_x, val_y, standardize)


def make_eval_set(windows, labels, transform):
    return Windows(windows, labels)


class FaultNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(4),
                                      nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(),
                                      nn.AdaptiveAvgPool1d(1), nn.Flatten())
        self.classifier = nn.Linear(32, 3)

    def forward(self, x):
        return self.classifier(self.features(x))


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    model.train()
    return correct / len(loader.dataset)


def main():
    torch.manual_seed(0)
    train_set, val_set = build_datasets()
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=64)
    model = FaultNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(2):
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f} val accuracy {evaluate(model, val_loader):.2f}")


if __name__ == "__main__":
    main()
