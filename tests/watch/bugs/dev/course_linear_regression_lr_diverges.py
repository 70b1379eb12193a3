"""A video course's first PyTorch notebook: 100 points x ~ 10 * N(0, 1) with y = x + 3 * noise, an
LR module wrapping one nn.Linear(1, 1), MSELoss and plain SGD at lr 0.01, trained full batch for 100
epochs with the loss printed every epoch (forward, loss, zero_grad, backward, step). With inputs of
standard deviation 10 the curvature of the MSE in the weight is 2 * mean(x**2), about 220 on this
draw, so a step of 0.01 overshoots the minimum by more than its own distance and every epoch
multiplies the error: the loss grows instead of shrinking. The fix confirmed in the thread was a much
smaller learning rate.

Thread: https://github.com/rslim087a/PyTorch-for-Deep-Learning-and-Computer-Vision-Course-All-Codes-/issues/1
"""
import torch
from torch import nn


class LR(nn.Module):
    def __init__(self, input_size, output_size):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)

    def forward(self, x):
        return self.linear(x)


def main():
    g = torch.Generator().manual_seed(5)
    X = torch.randn(100, 1, generator=g) * 10
    y = X + 3 * torch.randn(100, 1, generator=g)

    torch.manual_seed(1)
    model = LR(1, 1)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    epochs = 100
    losses = []
    for i in range(epochs):
        y_pred = model.forward(X)
        loss = criterion(y_pred, y)
        print("epoch:", i, "loss:", loss.item())
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    w, b = model.linear.weight.item(), model.linear.bias.item()
    print(f"fitted w {w:.4g}  b {b:.4g}  (data generated with w = 1, b = 0)")


if __name__ == "__main__":
    main()
