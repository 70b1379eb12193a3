"""A forum beginner's curve fit: a Network module with one hidden layer of 50 ReLU units fits
y = x**3 for the integers x = 1 .. 3999, full batch, with Adam (lr 1e-3) and MSELoss, printing the
loss and the largest prediction every epoch. Inputs and targets are fed on their raw scale: the
targets reach about 6.4e10 while a freshly initialized network outputs values of order one, so the
loss starts near 1e21, Adam moves each weight by about the learning rate per step, and after the
whole run the predictions are still orders of magnitude below the targets. The answer in the
thread standardized input and target (and unnormalized the predictions afterwards), after which
the same network learns the curve.

Thread: https://discuss.pytorch.org/t/neural-network-could-not-learn-on-this-type-of-data-why/96648/5
"""
import torch
import torch.nn.functional as F
from torch import nn


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(in_features=1, out_features=50, bias=True)
        self.fc2 = nn.Linear(in_features=50, out_features=1, bias=True)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main():
    torch.manual_seed(0)
    xs = torch.arange(1, 4000, dtype=torch.float32).unsqueeze(1)
    ys = xs ** 3

    model = Network()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.MSELoss()

    n_epochs = 300
    for epoch in range(n_epochs):
        optimizer.zero_grad()
        out = model(xs)
        loss = criterion(out, ys)
        loss.backward()
        optimizer.step()
        if epoch % 30 == 0 or epoch == n_epochs - 1:
            print(f"Epoch {epoch}, loss {loss.item():.4e}, max. pred val {out.max().item():.4e}")

    with torch.no_grad():
        pred = model(xs)
    rel_err = ((pred - ys).abs() / ys).mean().item()
    print(f"target max {ys.max().item():.3e}  prediction max {pred.max().item():.3e}  "
          f"mean relative error {rel_err:.3f}")


if __name__ == "__main__":
    main()
