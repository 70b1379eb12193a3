"""The same classifier and Trainer, whose _init_weights() uses kaiming_normal_ (fan-in, ReLU):
a gain of about 1 per layer, so the six convolutions keep the signal's scale."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, channels=48, classes=10):
        super().__init__()
        convs, c_in = [], 3
        for _ in range(6):
            convs += [nn.Conv2d(c_in, channels, 3, padding=1), nn.ReLU()]
            c_in = channels
        self.features = nn.Sequential(*convs)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


class Trainer:
    def __init__(self, model, lr=0.01):
        self.model = model
        self._init_weights()
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def _init_weights(self):
        for m in self.model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                m.bias.data.zero_()

    def step(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    trainer = Trainer(Net())
    for _ in range(60):
        x = torch.randn(16, 3, 16, 16)
        y = torch.randint(0, 10, (16,))
        loss = trainer.step(x, y)
    print(f"loss {loss:.3g}")


if __name__ == "__main__":
    main()
