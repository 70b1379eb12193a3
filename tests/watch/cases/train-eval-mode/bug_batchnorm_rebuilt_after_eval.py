"""An Exporter prepares a trained image classifier for deployment: it calls model.eval(), then a
match_batchnorm_eps(model, eps) helper rebuilds every BatchNorm2d with the eps the serving runtime
uses and copies the trained statistics into it. The new layers are built in training mode and no
eval() call reaches them, so the exported model's check under torch.no_grad() normalizes each
batch with its own statistics and overwrites the copied running mean and variance."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


def match_batchnorm_eps(model, eps):
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.BatchNorm2d):
            parent_name, _, attr = name.rpartition(".")
            replacement = nn.BatchNorm2d(module.num_features, eps=eps)
            replacement.load_state_dict(module.state_dict())
            setattr(model.get_submodule(parent_name), attr, replacement)
    return model


class Exporter:
    def __init__(self, model, eps=1e-3):
        self.model = model
        self.model.eval()
        match_batchnorm_eps(self.model, eps)

    def check(self, loader):
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (self.model(x).argmax(1) == y).sum().item()
        return correct / len(loader.dataset)


def make_images(n, g):
    y = torch.randint(0, 3, (n,), generator=g)
    x = torch.randn(n, 1, 12, 12, generator=g) * 0.5
    x[y == 0, :, :6] += 1.0
    x[y == 1, :, 6:] += 1.0
    return TensorDataset(x, y)


def train(model, loader, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(epochs):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_loader = DataLoader(make_images(384, g), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    test_loader = DataLoader(make_images(128, g), batch_size=32)
    model = SmallConvNet()
    train(model, train_loader, epochs=2)
    print(f"exported accuracy {Exporter(model).check(test_loader):.3f}")


if __name__ == "__main__":
    main()
