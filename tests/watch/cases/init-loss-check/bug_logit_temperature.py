"""A train() helper over a DataLoader, the model passed in as a parameter; the classifier divides
its logits by a temperature meant to be 1.0 but set to 0.02, so the untrained model is confidently
wrong and its first loss is many times ln(5)."""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ScaledClassifier(nn.Module):
    def __init__(self, features=16, classes=5, temperature=0.02):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.ReLU())
        self.head = nn.Linear(64, classes)
        self.temperature = temperature

    def forward(self, x):
        return self.head(self.body(x)) / self.temperature


def train(model, optimizer, loader, loss_fn, epochs):
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def main():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 16, generator=g)
    y = torch.randint(0, 5, (512,), generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=g)
    torch.manual_seed(0)
    model = ScaledClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    losses = train(model, optimizer, loader, nn.CrossEntropyLoss(), epochs=4)
    print(f"loss {losses[0]:.2f} -> {losses[-1]:.2f}")


if __name__ == "__main__":
    main()
