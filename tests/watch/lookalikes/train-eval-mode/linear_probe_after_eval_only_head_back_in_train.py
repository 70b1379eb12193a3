"""A linear probe: a pretrained-style convolutional backbone with BatchNorm and dropout is frozen
(requires_grad False, its layers kept in eval mode on purpose) and only a linear head is trained.
The probe's validate() calls model.eval() on the whole Sequential, and train_epoch() puts back only
the head (model.head.train()), so after the first validation the model's root and backbone stay in
eval mode while it trains. That is correct: the frozen backbone is meant to run in eval mode, and
the head, the only part the optimizer holds, has no dropout or BatchNorm whose mode matters. The
epochs are 70 steps, so under --steps 50 the first validation runs in the evaluation pass."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Dropout(0.2))

    def forward(self, x):
        return self.features(x)


class Probe(nn.Module):
    def __init__(self, backbone, classes=5):
        super().__init__()
        self.backbone, self.head = backbone, nn.Linear(32, classes)

    def forward(self, x):
        return self.head(self.backbone(x))


def pretrain_statistics(backbone, images):
    """Stand-in for loading pretrained weights: the BatchNorm statistics are set from the data."""
    backbone.train()
    with torch.no_grad():
        for chunk in images.split(128):
            backbone(chunk)


class ProbeTrainer:
    def __init__(self, model, train_loader, val_loader):
        self.model, self.train_loader, self.val_loader = model, train_loader, val_loader
        for p in model.backbone.parameters():
            p.requires_grad_(False)
        model.backbone.eval()
        self.optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-2)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=1, gamma=0.5)
        self.criterion = nn.CrossEntropyLoss()

    def train_epoch(self):
        self.model.head.train()
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            self.criterion(self.model(x), y).backward()
            self.optimizer.step()
        self.scheduler.step()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        hits = sum((self.model(x).argmax(1) == y).sum().item() for x, y in self.val_loader)
        return hits / len(self.val_loader.dataset)

    def fit(self, epochs):
        for epoch in range(epochs):
            self.train_epoch()
            print(f"epoch {epoch}: val accuracy {self.validate():.3f}")


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 5, (n,), generator=g)
    x = torch.randn(n, 3, 16, 16, generator=g) * 0.5 + y.view(-1, 1, 1, 1).float() * 0.3
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    train_set, val_set = make_split(70 * 16, 0), make_split(160, 1)
    backbone = Backbone()
    pretrain_statistics(backbone, train_set.tensors[0])
    trainer = ProbeTrainer(Probe(backbone), DataLoader(train_set, batch_size=16, shuffle=True),
                           DataLoader(val_set, batch_size=32))
    trainer.fit(epochs=3)


if __name__ == "__main__":
    main()
