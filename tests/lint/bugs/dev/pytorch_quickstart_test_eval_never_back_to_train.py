"""
Shape: tutorial-style script: a `FashionNet(nn.Module)` (Flatten + Linear/ReLU stack) built with
`.to(device)`, module-level CrossEntropyLoss and SGD, and two helpers `fit_epoch(loader, model,
loss_fn, optimizer)` and `evaluate(loader, model, loss_fn)` called alternately in an epoch loop;
`evaluate` switches the model to eval mode.
Bug: `fit_epoch` never calls `model.train()`, so after the first `evaluate` every later epoch
trains in eval mode (dropout/batchnorm, if the model had them, would be frozen); the merged fix
added `model.train()` at the start of the training helper.
Thread: https://github.com/pytorch/tutorials/pull/1602
"""
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import ToTensor

train_ds = datasets.FashionMNIST(root="data", train=True, download=True, transform=ToTensor())
test_ds = datasets.FashionMNIST(root="data", train=False, download=True, transform=ToTensor())

BATCH = 64
train_loader = DataLoader(train_ds, batch_size=BATCH)
test_loader = DataLoader(test_ds, batch_size=BATCH)

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class FashionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.flat = nn.Flatten()
        self.mlp = nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(),
            nn.Linear(512, 512), nn.ReLU(),
            nn.Linear(512, 10), nn.ReLU(),
        )

    def forward(self, x):
        return self.mlp(self.flat(x))


net = FashionNet().to(device)
criterion = nn.CrossEntropyLoss()
sgd = torch.optim.SGD(net.parameters(), lr=1e-3)


def fit_epoch(loader, model, loss_fn, optimizer):
    n = len(loader.dataset)
    for i, (xb, yb) in enumerate(loader):
        xb, yb = xb.to(device), yb.to(device)
        loss = loss_fn(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 100 == 0:
            print(f"loss {loss.item():.6f} [{i * len(xb)}/{n}]")


def evaluate(loader, model, loss_fn):
    n = len(loader.dataset)
    model.eval()
    total_loss, n_correct = 0.0, 0.0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            out = model(xb)
            total_loss += loss_fn(out, yb).item()
            n_correct += (out.argmax(1) == yb).float().sum().item()
    print(f"acc {100 * n_correct / n:.1f}% avg loss {total_loss / len(loader):.6f}")


for ep in range(5):
    print(f"epoch {ep + 1}")
    fit_epoch(train_loader, net, criterion, sgd)
    evaluate(test_loader, net, criterion)

torch.save(net.state_dict(), "fashion_net.pth")
