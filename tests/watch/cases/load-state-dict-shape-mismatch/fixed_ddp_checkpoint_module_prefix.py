"""Fixed twin of bug_ddp_checkpoint_module_prefix: the "module." prefix is stripped and the old
classifier dropped before load_state_dict(strict=False), so the features load and only the new head
stays missing."""
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.classifier = nn.Linear(64, classes)

    def forward(self, x):
        return self.classifier(self.features(x))


def pretrained_checkpoint():
    """What torch.save(ddp_model.state_dict()) held: the wrapped model's keys, each under module."""
    torch.manual_seed(1)
    return {"module." + k: v for k, v in Net(classes=10).state_dict().items()}


def main():
    checkpoint = pretrained_checkpoint()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = Net(classes=4)
    checkpoint = {k.removeprefix("module."): v for k, v in checkpoint.items()}
    checkpoint = {k: v for k, v in checkpoint.items() if not k.startswith("classifier.")}  # a new head
    report = model.load_state_dict(checkpoint, strict=False)
    print(f"missing {len(report.missing_keys)}, unexpected {len(report.unexpected_keys)}")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    w = torch.randn(20, 4, generator=g)
    for step in range(60):
        x = torch.randn(32, 20, generator=g)
        loss = F.cross_entropy(model(x), (x @ w).argmax(1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
