"""A binary classifier on raw, unnormalised features in the hundreds ends in torch.sigmoid and is
trained with nn.BCELoss: the sigmoid rounds to exactly 0 or 1, where BCELoss has no gradient."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 1)

    def forward(self, x):
        return torch.sigmoid(self.linear(x)).squeeze(-1)


def fit(model, loader, optimizer, criterion, epochs):
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    return loss.item()


def main():
    torch.manual_seed(0)
    x = torch.randn(400, 6) * 100 + 50
    y = (x[:, 0] > 50).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=40, shuffle=True)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    print(f"loss {fit(model, loader, optimizer, nn.BCELoss(), epochs=6):.2f}")


if __name__ == "__main__":
    main()
