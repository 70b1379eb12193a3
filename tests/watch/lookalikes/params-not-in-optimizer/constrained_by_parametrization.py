"""Healthy look-alike of params-not-in-optimizer: weight constraints kept the ways that keep the
optimizer's tensors in the model: a layer under
torch.nn.utils.parametrizations.weight_norm (its weight recomputed from original0/original1 at
every call), another whose weight is clipped after each step by assigning to .data, and a
max-norm renorm done in place under no_grad. The weights change every step, the Parameter
objects never do: nothing is replaced."""
import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = weight_norm(nn.Linear(12, 32))
        self.mid = nn.Linear(32, 32)
        self.out = nn.Linear(32, 3)

    def forward(self, x):
        return self.out(torch.relu(self.mid(torch.relu(self.inp(x)))))

    def constrain(self):
        self.mid.weight.data = self.mid.weight.data.clamp(-0.5, 0.5)
        with torch.no_grad():
            self.out.weight.copy_(torch.renorm(self.out.weight, p=2, dim=0, maxnorm=1.0))


def make_data(n=640, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long())


def main():
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = DataLoader(make_data(), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    criterion = nn.CrossEntropyLoss()
    for _ in range(3):
        for x, y in loader:
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            model.constrain()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
