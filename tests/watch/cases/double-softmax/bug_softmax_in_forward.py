"""A classifier ported from Keras keeps its softmax output layer and is trained with
nn.CrossEntropyLoss, which applies log_softmax itself."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def build_model(features=12, classes=5):
    return nn.Sequential(
        nn.Linear(features, 48), nn.ReLU(),
        nn.Linear(48, classes),
        nn.Softmax(dim=1),
    )


class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def zero(self):
        self.optimizer.zero_grad()

    def epoch(self):
        total = 0.0
        for x, y in self.loader:
            self.zero()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(self.loader)


def main():
    torch.manual_seed(0)
    centers = torch.randn(5, 12) * 2
    y = torch.randint(0, 5, (640,))
    x = centers[y] + torch.randn(640, 12)
    trainer = Trainer(build_model(), DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True))
    for epoch in range(6):
        loss = trainer.epoch()
    print(f"train loss {loss:.3f}")


if __name__ == "__main__":
    main()
