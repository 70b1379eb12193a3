"""The learning rate comes from a config dict, 1e-3 as meant."""
import torch
from torch import nn

CONFIG = {"lr": 1e-3, "weight_decay": 1e-4, "steps": 60, "batch": 32}


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(24, 8), nn.Tanh())
        self.decode = nn.Linear(8, 24)

    def forward(self, x):
        return self.decode(self.encode(x))


def make_optimizer(model, config):
    return torch.optim.AdamW(model.parameters(), lr=config["lr"], weight_decay=config["weight_decay"])


def train(model, optimizer, data, config):
    for step in range(config["steps"]):
        i = (step * config["batch"]) % len(data)
        batch = data[i:i + config["batch"]]
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(batch), batch)
        loss.backward()
        optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    data = torch.randn(320, 4) @ torch.randn(4, 24)
    model = Autoencoder()
    print(f"loss {train(model, make_optimizer(model, CONFIG), data, CONFIG):.3f}")


if __name__ == "__main__":
    main()
