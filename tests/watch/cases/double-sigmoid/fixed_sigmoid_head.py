"""A binary classifier returns logits from forward() and is trained with nn.BCEWithLogitsLoss,
which applies the sigmoid itself."""
import torch
from torch import nn


class Detector(nn.Module):
    def __init__(self, features=16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.fc = nn.Linear(32, 1)

    def forward(self, x):
        return self.fc(self.body(x)).squeeze(-1)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_batch(self, x, y):
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x[:, 0] + x[:, 1] > 0).float()
    trainer = Trainer(Detector())
    for step in range(60):
        i = (step * 64) % 512
        loss = trainer.train_batch(x[i:i + 64], y[i:i + 64])
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
