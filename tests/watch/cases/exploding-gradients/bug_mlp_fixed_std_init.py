"""An eight-layer ReLU MLP on 48-wide layers whose build_model() initialises every weight with
nn.init.normal_(std=0.35): each layer's gain is about 0.35 x sqrt(48) x 0.71 = 1.7, so the
activations, and the gradients on the way back, grow about 1.7x per layer. SGD overshoots from
the first step and the loss runs off to inf and NaN."""
import torch
from torch import nn


def build_model(width=48, depth=8, init_std=0.35):
    layers, fan_in = [], 20
    for _ in range(depth):
        layers += [nn.Linear(fan_in, width), nn.ReLU()]
        fan_in = width
    model = nn.Sequential(*layers, nn.Linear(width, 1))
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=init_std)
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
