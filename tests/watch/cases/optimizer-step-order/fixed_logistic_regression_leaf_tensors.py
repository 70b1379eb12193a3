"""Logistic regression written with leaf tensors, as in a from-scratch tutorial: w and b are
updated through .data after each backward(), and both gradients are reset to zero after the
update."""
import torch


def model(x, w, b):
    return torch.sigmoid(x @ w + b)


def bce(p, y):
    return -(y * torch.log(p + 1e-7) + (1 - y) * torch.log(1 - p + 1e-7)).mean()


def main():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 4, generator=g)
    y = (x @ torch.tensor([[1.0], [-2.0], [0.5], [0.0]]) > 0).float()
    w = torch.zeros(4, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    lr = 0.1
    for epoch in range(5):
        for i in range(0, 400, 40):
            loss = bce(model(x[i:i + 40], w, b), y[i:i + 40])
            loss.backward()
            w.data -= lr * w.grad.data
            b.data -= lr * b.grad.data
            w.grad.data.zero_()
            b.grad.data.zero_()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
