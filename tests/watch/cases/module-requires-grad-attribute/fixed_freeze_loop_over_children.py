"""Transfer learning with a frozen feature extractor: the first children of the model are frozen
with `child.requires_grad_(False)`, and the optimizer gets only the parameters that still
require grad, so only the classifier trains."""
import torch
from torch import nn


def build_model():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(16, 5),
    )


def freeze_features(model, upto=6):
    for i, child in enumerate(model.children()):
        if i < upto:
            child.requires_grad_(False)


def train(model, optimizer, criterion, batches):
    model.train()
    for step, (images, labels) in enumerate(batches):
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(16, 3, 16, 16, generator=g), torch.randint(0, 5, (16,), generator=g)) for _ in range(60)]
    model = build_model()
    freeze_features(model)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05, momentum=0.9)
    train(model, optimizer, nn.CrossEntropyLoss(), batches)


if __name__ == "__main__":
    main()
