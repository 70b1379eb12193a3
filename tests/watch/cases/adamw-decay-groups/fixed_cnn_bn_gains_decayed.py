"""A CNN trainer that builds two SGD groups: convolution and linear weights decayed with 5e-4,
biases and BatchNorm gains (every 1-D parameter) exempt."""
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.relu(self.bn2(self.conv2(x))).mean((2, 3))
        return self.fc(x)


class Trainer:
    def __init__(self, model, lr=0.05, wd=5e-4):
        decay = [p for p in model.parameters() if p.dim() > 1]
        no_decay = [p for p in model.parameters() if p.dim() <= 1]
        self.model = model
        self.optimizer = torch.optim.SGD([{"params": decay, "weight_decay": wd},
                                          {"params": no_decay, "weight_decay": 0.0}], lr=lr, momentum=0.9)

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    trainer = Trainer(Net())
    for step in range(60):
        x = torch.randn(16, 3, 16, 16, generator=g)
        loss = trainer.step(x, (x.mean((1, 2, 3)) > 0).long())
        if step % 20 == 0:
            print(f"step {step} loss {loss:.3f}")


if __name__ == "__main__":
    main()
