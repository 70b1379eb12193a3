"""Healthy look-alike of load-state-dict-shape-mismatch: transfer learning that loads an ImageNet-style
backbone checkpoint into a model whose classifier was replaced for 5 classes, dropping the old
classifier's tensors first and loading with strict=False: the report lists the new head's two keys
as missing, on purpose, and everything else loads."""
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(self.backbone(x))


def main():
    torch.manual_seed(1)
    checkpoint = Classifier(classes=1000).state_dict()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Classifier(classes=5)
    state = {k: v for k, v in checkpoint.items() if not k.startswith("fc.")}
    report = model.load_state_dict(state, strict=False)
    print(f"missing {report.missing_keys}")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for step in range(60):
        x = torch.randn(16, 3, 16, 16, generator=g)
        y = torch.randint(0, 5, (16,), generator=g)
        x = x + y.view(-1, 1, 1, 1).float() / 2
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
