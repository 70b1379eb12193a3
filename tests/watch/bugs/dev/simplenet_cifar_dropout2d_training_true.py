"""A SimpleNet-style CIFAR classifier and its training script: the model builds a plain stack of
3x3 conv + BatchNorm + ReLU blocks from a config list (max-pooling and nn.Dropout2d modules after
some blocks), global max-pools the last feature map, applies dropout and a linear classifier; the
script has main() with an Adadelta optimizer and a MultiStepLR schedule, a train(train_loader,
model, criterion, optimizer, epoch, log) function in model.train() and a validate(val_loader,
model, criterion, log) function in model.eval() under torch.no_grad(), a recorder that keeps the
best validation accuracy with a best-checkpoint copy, and an --evaluate path that re-runs validate()
on a loaded checkpoint. The bug: forward() applies the dropout after the global pooling as
F.dropout2d(out, 0.1, training=True), a functional call with the flag hard-coded, so model.eval()
cannot switch it off: every validation pass still drops feature channels at random, the recorded
accuracy is that of a randomly damaged network, and re-evaluating the saved best checkpoint on the
same test set gives a different number from the one that selected it.

Thread: https://github.com/Coderx7/SimpleNet/issues/2
"""
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CFG = [32, 32, "M", "D", 48, 48, "M", "D", 64, 64]
NUM_CLASSES = 10


class SimpleNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.features = self._make_layers(CFG)
        self.classifier = nn.Linear(CFG[-1], num_classes)

    def _make_layers(self, cfg):
        layers, in_ch = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            elif v == "D":
                layers.append(nn.Dropout2d(p=0.1))
            else:
                layers += [nn.Conv2d(in_ch, v, kernel_size=3, padding=1),
                           nn.BatchNorm2d(v, eps=1e-5, momentum=0.05),
                           nn.ReLU(inplace=True)]
                in_ch = v
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.features(x)
        out = F.max_pool2d(out, kernel_size=out.size()[2:])  # global max pooling
        out = F.dropout2d(out, 0.1, training=True)
        out = out.view(out.size(0), -1)
        return self.classifier(out)


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


class RecorderMeter:
    def __init__(self):
        self.val_acc = []

    def update(self, epoch, train_loss, train_acc, val_loss, val_acc):
        is_best = not self.val_acc or val_acc > max(self.val_acc)
        self.val_acc.append(val_acc)
        return is_best

    def max_accuracy(self):
        return max(self.val_acc) if self.val_acc else 0.0


def accuracy(output, target):
    return (output.argmax(1) == target).float().mean() * 100.0


def print_log(msg, log):
    print(msg)
    log.append(msg)


def make_images(n, gen):
    """Ten classes: each is a fixed colour blob at a class-specific place, on a noisy background."""
    y = torch.randint(0, NUM_CLASSES, (n,), generator=gen)
    x = torch.randn(n, 3, 16, 16, generator=gen) * 0.8
    colours = torch.randn(NUM_CLASSES, 3, generator=torch.Generator().manual_seed(7))
    for i in range(n):
        c = int(y[i])
        r, col = 2 + (c // 5) * 7, 1 + (c % 5) * 3
        x[i, :, r:r + 5, col:col + 3] += colours[c][:, None, None] * 1.5
    return x, y


def batches(x, y, batch_size, shuffle, gen=None):
    order = torch.randperm(len(y), generator=gen) if shuffle else torch.arange(len(y))
    for s in range(0, len(y), batch_size):
        i = order[s:s + batch_size]
        yield x[i], y[i]


def train(train_loader, model, criterion, optimizer, epoch, log):
    losses, top1 = AverageMeter(), AverageMeter()
    model.train()
    for i, (inp, target) in enumerate(train_loader):
        output = model(inp)
        loss = criterion(output, target)
        losses.update(loss.item(), inp.size(0))
        top1.update(accuracy(output.detach(), target).item(), inp.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print_log(f"  **Train** epoch {epoch} Prec@1 {top1.avg:.3f} loss {losses.avg:.4f}", log)
    return top1.avg, losses.avg


def validate(val_loader, model, criterion, log):
    losses, top1 = AverageMeter(), AverageMeter()
    model.eval()
    with torch.no_grad():
        for inp, target in val_loader:
            output = model(inp)
            loss = criterion(output, target)
            losses.update(loss.item(), inp.size(0))
            top1.update(accuracy(output, target).item(), inp.size(0))
    print_log(f"  **Test** Prec@1 {top1.avg:.3f} Error@1 {100 - top1.avg:.3f} loss {losses.avg:.4f}", log)
    return top1.avg, losses.avg


def main(epochs=6, batch_size=64):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    log = []
    x_train, y_train = make_images(1280, gen)
    x_test, y_test = make_images(400, gen)

    net = SimpleNet(num_classes=NUM_CLASSES)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adadelta(net.parameters(), lr=1.0, rho=0.9, eps=1e-3, weight_decay=0.001)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [4], gamma=0.1)
    recorder = RecorderMeter()
    best_state = None

    start = time.time()
    for epoch in range(epochs):
        lr = scheduler.get_last_lr()[-1]
        print_log(f"==>> [Epoch={epoch:03d}/{epochs:03d}] [learning_rate={lr:.6f}] "
                  f"[Best : Accuracy={recorder.max_accuracy():.2f}]", log)
        train_acc, train_los = train(batches(x_train, y_train, batch_size, True, gen), net, criterion,
                                     optimizer, epoch, log)
        scheduler.step()
        val_acc, val_los = validate(batches(x_test, y_test, 100, False), net, criterion, log)
        is_best = recorder.update(epoch, train_los, train_acc, val_los, val_acc)
        if is_best:  # model_best checkpoint
            best_state = copy.deepcopy(net.state_dict())
    print_log(f"training done in {time.time() - start:.1f}s, best accuracy {recorder.max_accuracy():.2f}", log)

    # --evaluate with --resume model_best: the same checkpoint on the same test set
    net.load_state_dict(best_state)
    for run in range(2):
        acc, _ = validate(batches(x_test, y_test, 100, False), net, criterion, log)
        print_log(f"evaluate run {run}: best checkpoint Prec@1 {acc:.3f} (recorded {recorder.max_accuracy():.3f})",
                  log)


if __name__ == "__main__":
    main()
