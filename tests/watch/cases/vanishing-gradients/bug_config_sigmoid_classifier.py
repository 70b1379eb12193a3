"""A 4-class tabular classifier whose MLP is built by build_model(config) from a config dict, with
hidden sizes and the activation read from it and each Linear initialised for that activation's
gain. The config, carried over from an old setup, asks for ten hidden layers with "sigmoid": each
sigmoid passes back at most a quarter of the gradient, so the first layer's RMS weight gradient is
about 1e-7 of the output layer's, the early layers barely learn and the accuracy stays at chance
(0.24 after 60 steps): vanishing gradients."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CONFIG = {
    "hidden": [64] * 10,
    "activation": "sigmoid",
    "lr": 0.05,
    "momentum": 0.9,
    "batch_size": 64,
}

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


class MLP(nn.Module):
    def __init__(self, features, hidden, classes, activation):
        super().__init__()
        sizes = [features] + hidden
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.act = ACTIVATIONS[activation]()
        self.out = nn.Linear(sizes[-1], classes)

    def forward(self, x):
        for layer in self.layers:
            x = self.act(layer(x))
        return self.out(x)


def build_model(config, features, classes):
    model = MLP(features, config["hidden"], classes, config["activation"])
    for layer in model.layers:
        nn.init.kaiming_normal_(layer.weight, nonlinearity=config["activation"])
        nn.init.zeros_(layer.bias)
    return model


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3840, 12, generator=g)
    y = (x[:, 0] > 0).long() * 2 + (x[:, 1] * x[:, 2] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=CONFIG["batch_size"], shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    model = build_model(CONFIG, features=12, classes=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=CONFIG["lr"], momentum=CONFIG["momentum"])
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    print(f"train accuracy {accuracy:.2f} after {len(loader)} steps")


if __name__ == "__main__":
    main()
