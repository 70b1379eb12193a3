"""Fine-tuning a tabular model on a small new dataset with "frozen BatchNorm": a helper sets
requires_grad=False on every BatchNorm layer's weight and bias and the optimizer gets the remaining
parameters, but the Trainer keeps the whole model in training mode, so those layers still
overwrite their running statistics with each batch of the new data."""
import torch
from torch import nn


def freeze_batchnorm(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.weight.requires_grad_(False)
            m.bias.requires_grad_(False)


class Trainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)

    def train_epoch(self, loader):
        self.model.train()
        total = 0.0
        for x, y in loader:
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(x).squeeze(-1), y)
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total / len(loader)


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 64), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 1))
    freeze_batchnorm(model)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(512, 10, generator=g) * 4 + 1
    y = x[:, :2].sum(1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True)
    trainer = Trainer(model)
    for epoch in range(3):
        print(f"epoch {epoch}: loss {trainer.train_epoch(loader):.3f}")


if __name__ == "__main__":
    main()
