"""A hand-written linear regression: w and b are leaf tensors updated by hand through .data after
each backward(), and their .grad is never cleared, so every update applies the sum of all the
gradients computed so far.

Thread: https://github.com/greebear/pytorch-learning/issues/1
"""
import torch


def linreg(X, w, b):
    return torch.mm(X, w) + b


def squared_loss(y_hat, y):
    return (y_hat - y.view(y_hat.size())) ** 2 / 2


def sgd(params, lr, batch_size):
    for param in params:
        param.data -= lr * param.grad / batch_size


def data_iter(batch_size, features, labels, g):
    order = torch.randperm(len(features), generator=g)
    for i in range(0, len(features), batch_size):
        j = order[i:i + batch_size]
        yield features[j], labels[j]


def main():
    g = torch.Generator().manual_seed(0)
    num_inputs, num_examples = 2, 1000
    true_w, true_b = torch.tensor([2.0, -3.4]), 4.2
    features = torch.randn(num_examples, num_inputs, generator=g)
    labels = features @ true_w + true_b + 0.01 * torch.randn(num_examples, generator=g)
    w = torch.normal(0.0, 0.01, (num_inputs, 1), generator=g).requires_grad_(True)
    b = torch.zeros(1, requires_grad=True)
    lr, batch_size = 0.03, 10
    for epoch in range(3):
        for X, y in data_iter(batch_size, features, labels, g):
            loss = squared_loss(linreg(X, w, b), y).sum()
            loss.backward()
            sgd([w, b], lr, batch_size)
        train_l = squared_loss(linreg(features, w, b), labels)
        print(f"epoch {epoch + 1}, loss {train_l.mean().item():f}")


if __name__ == "__main__":
    main()
