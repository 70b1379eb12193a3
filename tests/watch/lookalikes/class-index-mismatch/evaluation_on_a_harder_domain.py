"""Healthy look-alike of class-index-mismatch: a classifier trained on clean sensor readings is
evaluated on a second site whose readings carry a calibration offset and about four times the noise.
Both splits use the same class ids; held-out accuracy drops well below training accuracy, but the
errors spread over the classes instead of mapping each class onto one other index."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CENTRES = 1.2 * torch.randn(6, 12, generator=torch.Generator().manual_seed(4))


def readings(n, seed, noise, offset):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 6, (n,), generator=g)
    return CENTRES[y] + offset + noise * torch.randn(n, 12, generator=g), y


def run(model, loader, optimizer=None):
    training = optimizer is not None
    model.train(training)
    correct = seen = 0
    with torch.set_grad_enabled(training):
        for x, y in loader:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            if training:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            correct += int((logits.argmax(1) == y).sum())
            seen += len(y)
    return correct / seen


def main():
    torch.manual_seed(0)
    offset = 1.5 * torch.randn(12, generator=torch.Generator().manual_seed(9))
    train_set = TensorDataset(*readings(960, 1, noise=0.7, offset=0.0))
    site_b = TensorDataset(*readings(300, 2, noise=3.0, offset=offset))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
    site_loader = DataLoader(site_b, batch_size=100)
    model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 6))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(3):
        train_acc = run(model, train_loader, optimizer)
        print(f"epoch {epoch} train acc {train_acc:.3f} site B acc {run(model, site_loader):.3f}")


if __name__ == "__main__":
    main()
