"""The same digit classifier whose loop converts the uint8 images to float before scaling them:
`images.float() / 255` keeps every intensity as a value in [0, 1]."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_images(n, g):
    labels = torch.randint(0, 10, (n,), generator=g)
    images = torch.zeros(n, 1, 28, 28)
    for i, y in enumerate(labels.tolist()):
        images[i, 0, 4 + 2 * y: 8 + 2 * y, 6:22] = 1.0  # a stroke whose place is the class
    images = images * torch.rand(n, 1, 28, 28, generator=g) * 300 + torch.rand(n, 1, 28, 28, generator=g) * 40
    return images.clamp(0, 255).to(torch.uint8), labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(TensorDataset(*make_images(2048, g)), batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(2):
        for images, labels in loader:
            x = images.float() / 255
            loss = nn.functional.cross_entropy(model(x), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print(f"loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
