"""Linear evaluation of a SimCLR encoder in the layout of a small CIFAR-10 SimCLR repo: an
AverageMeter, a LinModel(encoder, feature_dim, n_classes) wrapper holding self.enc and a
linear head self.lin, a run_epoch(model, dataloader, epoch, optimizer=None, scheduler=None)
helper that trains when given an optimizer and tests otherwise, and a finetune() entry point that
loads the pretrained SimCLR model, trains on 10 labelled images per class with Nesterov SGD and a
per-step cosine LambdaLR, and reports the test accuracy at the best train loss. The encoder is
meant to be frozen with `model.enc.requires_grad = False` followed by a filter on
`param.requires_grad`, but setting that attribute on an nn.Module only creates a plain Python
attribute: every encoder parameter still has requires_grad=True, passes the filter and goes into
SGD. The whole network is fine-tuned, so the reported "linear evaluation" accuracy is not a linear
probe of the pretrained features at all.

Thread: https://github.com/p3i0t/SimCLR-CIFAR10/issues/1
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, SubsetRandomSampler, TensorDataset

N_CLASSES, IMG = 10, 12


class AverageMeter(object):
    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def synthetic_cifar(n, seed):
    """Each class is a fixed smooth template; images are shifted, rescaled, noisy copies."""
    gt = torch.Generator().manual_seed(99)
    templates = F.avg_pool2d(torch.randn(N_CLASSES, 3, IMG + 4, IMG + 4, generator=gt), 3, 1)[:, :, :IMG, :IMG]
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    x = torch.stack([torch.roll(templates[c], (int(s[0]), int(s[1])), dims=(1, 2)) for c, s in zip(y, shift)])
    x = x * (0.6 + 0.8 * torch.rand(n, 1, 1, 1, generator=g)) + 0.6 * torch.randn(x.shape, generator=g)
    return TensorDataset(x, y)


class Encoder(nn.Module):
    def __init__(self, feature_dim=64):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 3 * 3, feature_dim)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return F.relu(self.fc(x.flatten(1)))


class SimCLR(nn.Module):
    def __init__(self, projection_dim=32):
        super().__init__()
        self.enc = Encoder()
        self.feature_dim = 64
        self.projector = nn.Sequential(nn.Linear(self.feature_dim, 64), nn.ReLU(), nn.Linear(64, projection_dim))

    def forward(self, x):
        feature = self.enc(x)
        return feature, self.projector(feature)


def load_pretrained_simclr():
    # stand-in for pre_model.load_state_dict(torch.load('simclr_<backbone>_epoch<k>.pt'))
    torch.manual_seed(7)
    return SimCLR()


class LinModel(nn.Module):
    """Linear wrapper of encoder."""

    def __init__(self, encoder: nn.Module, feature_dim: int, n_classes: int):
        super().__init__()
        self.enc = encoder
        self.feature_dim = feature_dim
        self.n_classes = n_classes
        self.lin = nn.Linear(self.feature_dim, self.n_classes)

    def forward(self, x):
        return self.lin(self.enc(x))


def run_epoch(model, dataloader, epoch, optimizer=None, scheduler=None):
    if optimizer:
        model.train()
    else:
        model.eval()
    loss_meter, acc_meter = AverageMeter('loss'), AverageMeter('acc')
    for x, y in dataloader:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        if optimizer:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if scheduler:
                scheduler.step()
        acc = (logits.argmax(dim=1) == y).float().mean()
        loss_meter.update(loss.item(), x.size(0))
        acc_meter.update(acc.item(), x.size(0))
    return loss_meter.avg, acc_meter.avg


def get_lr(step, total_steps, lr_max, lr_min):
    """Compute learning rate according to cosine annealing schedule."""
    return lr_min + (lr_max - lr_min) * 0.5 * (1 + np.cos(step / total_steps * np.pi))


def finetune(batch_size=20, finetune_epochs=40, learning_rate=0.6, momentum=0.9):
    torch.manual_seed(0)
    np.random.seed(0)
    train_set, test_set = synthetic_cifar(5000, seed=1), synthetic_cifar(1000, seed=2)
    indices = np.random.choice(len(train_set), 10 * N_CLASSES, replace=False)
    sampler = SubsetRandomSampler(indices, generator=torch.Generator().manual_seed(0))
    train_loader = DataLoader(train_set, batch_size=batch_size, drop_last=True, sampler=sampler)
    test_loader = DataLoader(test_set, batch_size=500, shuffle=False)

    pre_model = load_pretrained_simclr()
    model = LinModel(pre_model.enc, feature_dim=pre_model.feature_dim, n_classes=N_CLASSES)

    # Fix encoder
    model.enc.requires_grad = False
    parameters = [param for param in model.parameters() if param.requires_grad is True]  # trainable parameters.

    optimizer = torch.optim.SGD(parameters, 0.2, momentum=momentum, weight_decay=0., nesterov=True)
    scheduler = LambdaLR(optimizer, lr_lambda=lambda step: get_lr(
        step, finetune_epochs * len(train_loader), learning_rate, 1e-3))

    optimal_loss, optimal_acc = 1e5, 0.
    for epoch in range(1, finetune_epochs + 1):
        train_loss, train_acc = run_epoch(model, train_loader, epoch, optimizer, scheduler)
        test_loss, test_acc = run_epoch(model, test_loader, epoch)
        if train_loss < optimal_loss:
            optimal_loss, optimal_acc = train_loss, test_acc
        if epoch % 8 == 0:
            print(f"epoch {epoch:3d}  train loss {train_loss:.4f} acc {train_acc:.3f}  "
                  f"test loss {test_loss:.4f} acc {test_acc:.3f}")
    print(f"Best Test Acc: {optimal_acc:.4f}")


def main():
    finetune()


if __name__ == "__main__":
    main()
