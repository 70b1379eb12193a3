"""A small MLP regressor on standardised features, trained by a Trainer class with plain SGD at
lr=0.5: the step is above the stability limit for this network, each update overshoots along the
sharpest direction, the loss climbs from the first steps and overflows within about ten."""
import torch
from torch import nn


class Trainer:
    def __init__(self, model, lr):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def train_step(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main(lr=0.5):
    torch.manual_seed(0)
    x = torch.randn(1024, 16)
    y = x @ torch.randn(16, 1) + 0.3 * torch.sin(3 * x[:, :1]) + 0.1 * torch.randn(1024, 1)
    trainer = Trainer(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)), lr)
    for step in range(60):
        idx = torch.randint(0, len(x), (64,))
        loss = trainer.train_step(x[idx], y[idx])
    print(f"final loss {loss:.3g}")


if __name__ == "__main__":
    main()
