"""Fine-tuning a classifier: the trainer means to freeze the pretrained backbone and writes
`self.model.backbone.requires_grad = False`, which only stores an attribute on the module; the
optimizer is built over every parameter that requires grad, so the backbone keeps training."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, features=16, hidden=32, classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.backbone(x))


class FineTuner:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.model.backbone.requires_grad = False
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=lr)

    def train_epoch(self, loader):
        self.model.train()
        for x, y in loader:
            loss = F.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 16, generator=g)
    y = (x[:, :3] * 2).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    tuner = FineTuner(Net())
    for epoch in range(5):
        print(f"epoch {epoch} loss {tuner.train_epoch(loader):.3f}")


if __name__ == "__main__":
    main()
