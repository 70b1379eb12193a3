"""Healthy look-alike of train-eval-mode: fine-tuning with the backbone's BatchNorm statistics
frozen on purpose. The trainer puts the model in training mode, then the backbone's BatchNorm
layers back in eval mode (as detection and segmentation fine-tuning does with small batches)."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(8, 4))

    def forward(self, x):
        return self.head(self.backbone(x))


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def set_train_mode(self):
        self.model.train()
        for m in self.model.backbone.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()

    def fit(self, x, y, steps):
        self.set_train_mode()
        for step in range(steps):
            i = (step * 8) % len(x)
            self.optimizer.zero_grad()
            loss = nn.functional.cross_entropy(self.model(x[i:i + 8]), y[i:i + 8])
            loss.backward()
            self.optimizer.step()
        return loss.item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 3, 8, 8, generator=g)
    y = torch.randint(0, 4, (256,), generator=g)
    print(f"loss {Trainer(Net()).fit(x, y, steps=60):.3f}")


if __name__ == "__main__":
    main()
