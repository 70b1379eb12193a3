"""An image classifier trained by a Trainer class with SGD and momentum, its settings read from a
config dictionary. The clipping threshold was copied from a recipe for a much larger model whose
loss was summed: max_norm=0.005 against gradient norms of about 0.2-0.6 here, so every step is
clipped to a fraction of a percent of itself and the loss barely moves."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {"lr": 0.05, "momentum": 0.9, "batch_size": 32, "epochs": 4, "grad_clip": 0.005}


def make_data(n, g):
    x = torch.randn(n, 3, 12, 12, generator=g)
    y = (x[:, 0].mean(dim=(1, 2)) > 0).long() + 2 * (x[:, 1].mean(dim=(1, 2)) > 0).long()
    return TensorDataset(x, y)


class SmallNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class Trainer:
    def __init__(self, model, dataset, config):
        self.model, self.config = model, config
        self.loader = DataLoader(dataset, batch_size=config["batch_size"], shuffle=True)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])

    def training_step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config["grad_clip"])
        self.optimizer.step()
        return loss.item()

    def fit(self):
        for _ in range(self.config["epochs"]):
            for x, y in self.loader:
                last = self.training_step(x, y)
        return last


def main():
    torch.manual_seed(0)
    trainer = Trainer(SmallNet(), make_data(640, torch.Generator().manual_seed(0)), CONFIG)
    print(f"final loss {trainer.fit():.4f}")


if __name__ == "__main__":
    main()
