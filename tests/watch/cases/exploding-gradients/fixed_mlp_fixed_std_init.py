"""The same eight-layer ReLU MLP with build_model() using a fan-in init (kaiming_normal_ for
ReLU): each layer's gain is about 1, activations and gradients keep their scale with depth."""
import torch
from torch import nn


def build_model(width=48, depth=8):
    layers, fan_in = [], 20
    for _ in range(depth):
        layers += [nn.Linear(fan_in, width), nn.ReLU()]
        fan_in = width
    model = nn.Sequential(*layers, nn.Linear(width, 1))
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return model


def main():
    torch.manual_seed(0)
    x = torch.randn(512, 20)
    y = x[:, :3].sum(1, keepdim=True)
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(60):
        idx = torch.randint(0, 512, (64,))
        loss = nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.3g}")


if __name__ == "__main__":
    main()
