"""An image-classification training script in the style of a model-zoo train.py: args come from a
published recipe (RMSprop-TF with eps .001, a step decay of .973 every 2.4 epochs after a linear
warmup from warmup_lr, label smoothing, dropout), create_optimizer(args, model) and
create_scheduler(args, optimizer) build the optimizer and a StepLRScheduler whose step_update() is
called per batch and step() per epoch, and train_one_epoch(epoch, model, loader, optimizer, loss_fn,
args, lr_scheduler) runs zero_grad/backward/step over a MobileNetV3-style network (inverted
residual blocks with BatchNorm and hard-swish).

The recipe's lr, .064, was tuned for a global batch of 2 processes x 512. The run here is a single
process with a quarter of that global batch, and --lr is taken from the recipe unchanged instead
of being scaled down with the batch (linear scaling: lr x 1/4). With the smaller, noisier batches
the full lr is past the stability limit: as the warmup approaches it the loss stops falling and
climbs back up, the weights keep growing and held-out accuracy drops back to chance, while the
scheduler and the log report an ordinary lr and nothing errors.

Thread: https://github.com/huggingface/pytorch-image-models/issues/814
"""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import Optimizer
from torch.utils.data import DataLoader, TensorDataset


class RMSpropTF(Optimizer):
    """RMSprop as TensorFlow implements it: eps inside the sqrt, square_avg initialised to one."""

    def __init__(self, params, lr=1e-2, alpha=0.9, eps=1e-10, weight_decay=0, momentum=0.0):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if not state:
                    state["square_avg"] = torch.ones_like(p)
                    state["momentum_buffer"] = torch.zeros_like(p)
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                square_avg = state["square_avg"]
                square_avg.mul_(group["alpha"]).addcmul_(grad, grad, value=1 - group["alpha"])
                avg = square_avg.add(group["eps"]).sqrt_()
                buf = state["momentum_buffer"]
                buf.mul_(group["momentum"]).addcdiv_(grad, avg, value=group["lr"])
                p.add_(-buf)


class StepLRScheduler:
    def __init__(self, optimizer, decay_t, decay_rate, warmup_t, warmup_lr_init, t_in_epochs=True,
                 updates_per_epoch=1):
        self.optimizer = optimizer
        self.base_values = [g["lr"] for g in optimizer.param_groups]
        self.decay_t, self.decay_rate = decay_t, decay_rate
        self.warmup_t, self.warmup_lr_init = warmup_t, warmup_lr_init
        self.t_in_epochs, self.updates_per_epoch = t_in_epochs, updates_per_epoch
        self.warmup_steps = [(v - warmup_lr_init) / warmup_t for v in self.base_values]
        self._set([warmup_lr_init] * len(self.base_values))

    def _get_lr(self, t):
        if t < self.warmup_t:
            return [self.warmup_lr_init + t * s for s in self.warmup_steps]
        return [v * (self.decay_rate ** ((t - self.warmup_t) // self.decay_t)) for v in self.base_values]

    def _set(self, values):
        for group, value in zip(self.optimizer.param_groups, values):
            group["lr"] = value

    def step(self, epoch):
        if self.t_in_epochs:
            self._set(self._get_lr(epoch))

    def step_update(self, num_updates):
        if not self.t_in_epochs:
            self._set(self._get_lr(num_updates / self.updates_per_epoch))


def create_optimizer(args, model):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    groups = [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": args.weight_decay}]
    if args.opt == "rmsproptf":
        return RMSpropTF(groups, lr=args.lr, alpha=0.9, eps=args.opt_eps, momentum=args.momentum)
    raise ValueError(args.opt)


def create_scheduler(args, optimizer, updates_per_epoch):
    return StepLRScheduler(optimizer, decay_t=args.decay_epochs, decay_rate=args.decay_rate,
                           warmup_t=args.warmup_epochs, warmup_lr_init=args.warmup_lr,
                           updates_per_epoch=updates_per_epoch)


def conv_bn(cin, cout, k=3, s=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
                         nn.Hardswish())


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, expand, stride):
        super().__init__()
        mid = cin * expand
        self.block = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, stride, groups=mid),
                                   nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.has_residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.has_residual else y


class MobileNetV3(nn.Module):
    def __init__(self, num_classes=10, drop_rate=0.2):
        super().__init__()
        self.conv_stem = conv_bn(3, 16, 3, 2)
        self.blocks = nn.Sequential(InvertedResidual(16, 16, 1, 1), InvertedResidual(16, 24, 4, 2),
                                    InvertedResidual(24, 24, 3, 1), InvertedResidual(24, 40, 3, 2))
        self.conv_head = nn.Sequential(nn.Conv2d(40, 128, 1), nn.Hardswish())
        self.drop_rate = drop_rate
        self.classifier = nn.Linear(128, num_classes)

    def forward(self, x):
        x = self.conv_head(self.blocks(self.conv_stem(x))).mean((2, 3))
        return self.classifier(F.dropout(x, self.drop_rate, self.training))


def synthetic_imagenet(n, seed, num_classes=10):
    g = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, 3, 16, 16, generator=torch.Generator().manual_seed(99))
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = 0.6 * templates[y] + torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(x, y)


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, lr_scheduler=None):
    model.train()
    num_updates = epoch * len(loader)
    losses = []
    for batch_idx, (input, target) in enumerate(loader):
        output = model(input)
        loss = loss_fn(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        num_updates += 1
        losses.append(loss.item())
        if lr_scheduler is not None:
            lr_scheduler.step_update(num_updates=num_updates)
        if batch_idx % args.log_interval == 0:
            lr = optimizer.param_groups[0]["lr"]
            print(f"Train: {epoch} [{batch_idx:3d}/{len(loader)}]  Loss: {loss.item():9.4f}  LR: {lr:.3e}")
    return sum(losses) / len(losses)


def validate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    return correct / total


def main():
    # recipe: --lr .064 for a global batch of 2 processes x -b 512; this run: 1 process and a
    # global batch a quarter of the recipe's (scaled down here with everything else), same --lr
    args = SimpleNamespace(opt="rmsproptf", opt_eps=1e-3, momentum=0.9, weight_decay=1e-5, lr=0.064,
                           batch_size=32, epochs=8, warmup_epochs=3, warmup_lr=1e-6, decay_epochs=2.4,
                           decay_rate=0.973, smoothing=0.1, drop=0.2, log_interval=8, seed=42)
    torch.manual_seed(args.seed)
    model = MobileNetV3(num_classes=10, drop_rate=args.drop)
    loader_train = DataLoader(synthetic_imagenet(512, seed=0), batch_size=args.batch_size, shuffle=True,
                              drop_last=True, generator=torch.Generator().manual_seed(args.seed))
    loader_eval = DataLoader(synthetic_imagenet(512, seed=1), batch_size=128)
    optimizer = create_optimizer(args, model)
    lr_scheduler = create_scheduler(args, optimizer, updates_per_epoch=len(loader_train))
    train_loss_fn = nn.CrossEntropyLoss(label_smoothing=args.smoothing)
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(epoch, model, loader_train, optimizer, train_loss_fn, args,
                                     lr_scheduler=lr_scheduler)
        lr_scheduler.step(epoch + 1)
        top1 = validate(model, loader_eval)
        weights_finite = all(torch.isfinite(p).all() for p in model.parameters())
        print(f"epoch {epoch}  train_loss {train_loss:.4f}  eval top1 {top1:.3f}  weights finite {weights_finite}"
              f"  (|w| max {max(p.abs().max().item() for p in model.parameters()):.3g})")
        if not math.isfinite(train_loss):
            print("train loss is not finite")


if __name__ == "__main__":
    main()
