"""An MNIST-style example with train(model, optimizer, loader) and test(model, loader) functions; the
model's forward ends in F.softmax and train() scores it with F.cross_entropy, which applies
log_softmax again, so the gradients shrink and training crawls.

Thread: https://github.com/danielkelshaw/ConcreteDropout/issues/11
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return F.softmax(self.fc3(x), dim=1)


def train(model, optimizer, loader):
    model.train()
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
    return loss.item()


def test(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            correct += (model(data).argmax(1) == target).sum().item()
    return correct / len(loader.dataset)


def digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 64, generator=torch.Generator().manual_seed(3))
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(protos[y] + 1.2 * torch.randn(n, 64, generator=g), y)


def main():
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_loader = DataLoader(digits(2048, 0), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    test_loader = DataLoader(digits(512, 1), batch_size=256)
    for epoch in range(3):
        loss = train(model, optimizer, train_loader)
        print(f"epoch {epoch} loss {loss:.4f} test acc {test(model, test_loader):.3f}")


if __name__ == "__main__":
    main()
