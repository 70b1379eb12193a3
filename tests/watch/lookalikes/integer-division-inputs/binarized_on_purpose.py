"""Healthy: a classifier trained on binarised digits, `(images > 127).float()` from uint8 images
through a DataLoader: a threshold chosen on purpose keeps the strokes (over half the stroke
pixels are above it), not only the saturated ones."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 10, (2048,), generator=g)
    images = torch.zeros(2048, 1, 28, 28)
    for i, y in enumerate(labels.tolist()):
        images[i, 0, 4 + 2 * y: 8 + 2 * y, 6:22] = 1.0
    images = (images * torch.rand(2048, 1, 28, 28, generator=g) * 300).clamp(0, 255).to(torch.uint8)
    loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model((x > 127).float()), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
