"""Layer frozen by name keeps moving because stale .grad tensors stay in the optimizer.

The user trains a DataParallel-wrapped net whose children include an `fc1` block, then
freezes `fc1` with a helper that walks `model.module.named_children()` and flips
`requires_grad`, prints a slice of `fc1[0].weight`, calls `training(model)` with the same
SGD optimizer (momentum + weight decay) built over all parameters, and prints the slice
again. The freeze helper never drops the `.grad` tensors left from the first phase and the
gradients are zero-filled between steps (the zero_grad default of the torch of the thread),
so SGD keeps applying momentum and weight decay to the frozen layer: it drifts every step.
Thread: https://discuss.pytorch.org/t/why-there-is-still-a-small-change-in-frozen-layer-parameters/153740
"""
from collections.abc import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, d_in=16, d_hidden=32, n_cls=4):
        super().__init__()
        self.fc1 = nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU())
        self.fc2 = nn.Sequential(nn.Linear(d_hidden, d_hidden), nn.ReLU())
        self.out = nn.Linear(d_hidden, n_cls)

    def forward(self, x):
        return self.out(self.fc2(self.fc1(x)))


def make_data(gen, n=512, d_in=16, n_cls=4):
    x = torch.randn(n, d_in, generator=gen)
    w = torch.randn(d_in, n_cls, generator=gen)
    y = (x @ w).argmax(1)
    return x, y


def freeze_layers(model, layer_names, freeze=True):
    if not isinstance(layer_names, Iterable) or isinstance(layer_names, str):
        layer_names = [layer_names]
    for name, child in model.module.named_children():
        if name not in layer_names:
            continue
        print("freeze layer {} -> {}".format(name, freeze))
        for p in child.parameters():
            p.requires_grad = not freeze


def training(model, optimizer, x, y, epochs, batch_size=32, tag=""):
    model.train()
    n = x.shape[0]
    for ep in range(epochs):
        total, correct, run_loss = 0, 0, 0.0
        for i in range(0, n, batch_size):
            xb, yb = x[i:i + batch_size], y[i:i + batch_size]
            # torch < 2.0 zero-filled .grad here instead of dropping it
            optimizer.zero_grad(set_to_none=False)
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            loss.backward()
            optimizer.step()
            run_loss += loss.item() * len(yb)
            correct += (logits.argmax(1) == yb).sum().item()
            total += len(yb)
        print("{} epoch {} loss {:.4f} acc {:.3f}".format(tag, ep, run_loss / total, correct / total))


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    x, y = make_data(gen)
    model = nn.DataParallel(Net())  # no GPU: DataParallel just calls the module
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-3)

    training(model, optimizer, x, y, epochs=3, tag="[all layers]")

    freeze_layers(model, "fc1", freeze=True)
    before = model.module.fc1[0].weight.detach().clone()
    print("before_train", before[0, :6])
    training(model, optimizer, x, y, epochs=3, tag="[fc1 frozen]")
    after = model.module.fc1[0].weight.detach().clone()
    print("after_train ", after[0, :6])
    drift = (after - before).abs().max().item()
    rel = ((after - before).norm() / before.norm()).item()
    print("frozen fc1 max abs change {:.6f}  relative change {:.4f}".format(drift, rel))
    freeze_layers(model, "fc1", freeze=False)


if __name__ == "__main__":
    main()
