"""Image classification with module-level helpers train_one_epoch(model, loader, optimizer, device)
and evaluate(model, loader, device), a test loader built next to the training loader, and early
stopping on the best validation accuracy. The epoch loop passes train_loader to evaluate() where
val_loader was meant, so the "validation" accuracy is measured on the rows just trained on and the
checkpoint chosen by it is simply the most overfitted one."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_images(n, g):
    labels = torch.randint(0, 5, (n,), generator=g)
    protos = torch.randn(5, 1, 14, 14, generator=torch.Generator().manual_seed(7))
    images = 1.5 * protos[labels] + torch.randn(n, 1, 14, 14, generator=g)
    return images, labels


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


def train_one_epoch(model, loader, optimizer, device):
    model.train()
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def evaluate(model, loader, device):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x.to(device)).argmax(1) == y.to(device)).sum().item()
    return correct / len(loader.dataset)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    device = "cpu"
    train_loader = DataLoader(TensorDataset(*make_images(640, g)), batch_size=32, shuffle=True)
    val_loader = DataLoader(TensorDataset(*make_images(256, g)), batch_size=64)
    model = ConvNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    best, best_state = 0.0, None
    for epoch in range(4):
        train_one_epoch(model, train_loader, optimizer, device)
        acc = evaluate(model, train_loader, device)   # bug: the training loader, not val_loader
        if acc > best:
            best, best_state = acc, {k: v.clone() for k, v in model.state_dict().items()}
        print(f"epoch {epoch} val acc {acc:.3f}")
    model.load_state_dict(best_state)


if __name__ == "__main__":
    main()
