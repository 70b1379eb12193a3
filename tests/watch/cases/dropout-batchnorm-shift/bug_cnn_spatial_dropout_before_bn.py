"""A small CNN classifying 12x12 synthetic images (bright bar: horizontal, vertical or diagonal),
whose conv blocks are built from a config as Conv2d -> ReLU -> Dropout2d(p) -> BatchNorm2d, with
the spatial dropout placed before the normalisation. Each BatchNorm2d records the variance of
channels that Dropout2d zeroed and rescaled in training, which the validation pass (dropout off)
does not have: its running variance ends 1.9-2.8 times the variance of its eval-time input, and
validation accuracy is 0.80 (1.00 with the dropout moved after the BatchNorm)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"channels": (8, 16), "dropout": 0.3, "lr": 2e-3, "batch_size": 32, "epochs": 3}


class ConvBlock(nn.Module):
    def __init__(self, cin, cout, p):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.drop = nn.Dropout2d(p)
        self.norm = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.norm(self.drop(torch.relu(self.conv(x))))


class BarNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        c1, c2 = cfg["channels"]
        self.features = nn.Sequential(ConvBlock(1, c1, cfg["dropout"]), nn.MaxPool2d(2),
                                      ConvBlock(c1, c2, cfg["dropout"]), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(c2, 3)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def make_images(n, g):
    labels = torch.randint(0, 3, (n,), generator=g)
    images = 0.3 * torch.randn(n, 1, 12, 12, generator=g)
    pos = torch.randint(2, 10, (n,), generator=g)
    for i in range(n):
        if labels[i] == 0:
            images[i, 0, pos[i], :] += 1.0
        elif labels[i] == 1:
            images[i, 0, :, pos[i]] += 1.0
        else:
            images[i, 0] += torch.eye(12)
    return images, labels


class Trainer:
    def __init__(self, model, cfg):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])

    def train_step(self, images, labels):
        self.model.train()
        loss = nn.functional.cross_entropy(self.model(images), labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def validate(self, loader):
        self.model.eval()
        correct = total = 0
        for images, labels in loader:
            correct += (self.model(images).argmax(1) == labels).sum().item()
            total += len(labels)
        return correct / total


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_set = TensorDataset(*make_images(640, g))
    val_set = TensorDataset(*make_images(256, g))
    train_loader = DataLoader(train_set, batch_size=CONFIG["batch_size"], shuffle=True, generator=g)
    val_loader = DataLoader(val_set, batch_size=128)
    trainer = Trainer(BarNet(CONFIG), CONFIG)
    for epoch in range(CONFIG["epochs"]):
        for images, labels in train_loader:
            loss = trainer.train_step(images, labels)
        accuracy = trainer.validate(val_loader)
    print(f"loss {loss:.3f} val accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
