"""A linear-evaluation script for a self-supervised (image-text) pretrained CNN: main() takes the
visual CNN out of the pretrained model, puts a fresh nn.Linear in place of its fc, re-initialises
it, freezes every parameter whose name does not contain "fc" with requires_grad=False, and trains
the linear layer for a fixed number of iterations drawn from a cycling iterator, validating every
checkpoint_every iterations with model.eval() and calling model.train() afterwards. The frozen
backbone is never put in eval mode: it trains in train() mode, so its BatchNorm layers normalise
with batch statistics and keep overwriting the pretrained running mean and variance with those of
the downstream batches, although no backbone weight changes.

Thread: https://github.com/kdexd/virtex/issues/16
"""
import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.short(x))


class TinyResNet(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layer1 = BasicBlock(width, width, 1)
        self.layer2 = BasicBlock(width, 2 * width, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Identity()

    def forward(self, x):
        return self.fc(self.pool(self.layer2(self.layer1(self.stem(x)))).flatten(1))


class PretrainedVisualModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = TinyResNet()


class PretrainingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = PretrainedVisualModel()


def load_pretrained(seed=3):
    """Stands in for loading a checkpoint: fixed weights plus running statistics accumulated on the
    pretraining images (no optimizer involved)."""
    torch.manual_seed(seed)
    model = PretrainingModel()
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None
    with torch.no_grad():
        for _ in range(20):
            model.visual.cnn(torch.randn(64, 3, 16, 16, generator=g) * 1.0 + 0.2)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = 0.1
    return model


class DownstreamDataset:
    def __init__(self, n, num_classes, seed):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(num_classes, 3, 16, 16, generator=torch.Generator().manual_seed(11))
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        self.images = protos[self.labels] + 1.2 * torch.randn(n, 3, 16, 16, generator=g) + 0.5

    def batches(self, batch_size, g):
        order = torch.randperm(len(self.labels), generator=g)
        for i in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[i:i + batch_size]
            yield {"image": self.images[idx], "label": self.labels[idx]}


def cycle(dataset, batch_size, g):
    while True:
        for batch in dataset.batches(batch_size, g):
            yield batch


def top1(logits, labels):
    return (logits.argmax(1) == labels).float().mean().item()


def main(num_iterations=150, checkpoint_every=50, batch_size=32, num_classes=10):
    g = torch.Generator().manual_seed(0)
    train_dataset = DownstreamDataset(2048, num_classes, seed=1)
    val_dataset = DownstreamDataset(512, num_classes, seed=2)

    pretrained_model = load_pretrained()
    model = pretrained_model.visual.cnn
    model.fc = nn.Linear(32, num_classes)
    torch.nn.init.normal_(model.fc.weight.data, mean=0.0, std=0.01)
    torch.nn.init.constant_(model.fc.bias.data, 0.0)

    # Freeze all layers except fc.
    for name, param in model.named_parameters():
        if "fc" not in name:
            param.requires_grad = False

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9,
                                weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=num_iterations)
    train_iter = cycle(train_dataset, batch_size, g)

    for iteration in range(1, num_iterations + 1):
        optimizer.zero_grad()
        batch = next(train_iter)
        logits = model(batch["image"])
        loss = criterion(logits, batch["label"])
        loss.backward()
        optimizer.step()
        scheduler.step()

        if iteration % 25 == 0:
            print(f"iter {iteration} loss {loss.item():.3f} lr {optimizer.param_groups[0]['lr']:.4f}")

        if iteration % checkpoint_every == 0:
            model.eval()
            with torch.no_grad():
                accs = [top1(model(b["image"]), b["label"]) for b in val_dataset.batches(128, g)]
            model.train()
            print(f"iter {iteration} val top-1 {sum(accs) / len(accs):.3f}")


if __name__ == "__main__":
    main()
