"""A cosine-softmax classifier (normalized features against normalized class centres, times a
scale) trained by a train(model, loader, optimizer) helper. The head's forward normalizes its
centres by assigning self.centres = nn.Parameter(F.normalize(self.centres, dim=1)) before using
them: from the first batch on the module holds a new leaf Parameter at every call, which gets a
gradient and is replaced at the next call, while the optimizer keeps updating the tensor that was
there first and that the model no longer uses. The class centres never learn."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class CosineHead(nn.Module):
    def __init__(self, features, classes, scale=4.0):
        super().__init__()
        self.centres = nn.Parameter(torch.randn(classes, features))
        self.scale = scale

    def forward(self, x):
        self.centres = nn.Parameter(F.normalize(self.centres, dim=1))
        return self.scale * F.normalize(x, dim=1) @ self.centres.t()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 16))
        self.head = CosineHead(16, 5)

    def forward(self, x):
        return self.head(self.body(x))


def train(model, loader, optimizer, epochs):
    criterion = nn.CrossEntropyLoss()
    for _ in range(epochs):
        for x, y in loader:
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


def make_data(n=640, seed=0):
    g = torch.Generator().manual_seed(seed)
    centres = 2 * torch.randn(5, 20, generator=g)
    y = torch.randint(0, 5, (n,), generator=g)
    return TensorDataset(centres[y] + torch.randn(n, 20, generator=g), y)


def main():
    torch.manual_seed(0)
    model = Classifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(make_data(), batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    print(f"loss {train(model, loader, optimizer, epochs=3):.3f}")


if __name__ == "__main__":
    main()
