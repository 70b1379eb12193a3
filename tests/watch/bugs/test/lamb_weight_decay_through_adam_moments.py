"""An MNIST-style example for a LAMB optimizer package: a Lamb(torch.optim.Optimizer) subclass (Adam
moments with bias correction, then a per-tensor trust ratio ||w|| / ||adam_step|| clipped at 10 that
scales the step) trains a small conv net with log_softmax + nll_loss through train(args, model, device,
train_loader, optimizer, epoch) and test(args, model, device, test_loader, epoch) helpers, with
lr=0.0025, weight_decay=0.01 and betas=(0.9, 0.99) as in the example's defaults. The weight decay is
added to the gradient (grad += wd * w) before the moment estimates, Adam-style L2, instead of to the
Adam step after the division as in the LAMB algorithm: the decay term is divided by sqrt(v) and also
enters the trust-ratio denominator, so it no longer acts as decoupled weight decay.

Thread: https://github.com/cybertronai/pytorch-lamb/issues/3
"""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import Optimizer
from torch.utils.data import DataLoader, TensorDataset


class Lamb(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, adam=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.adam = adam
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                st = self.state[p]
                if not st:
                    st["step"] = 0
                    st["m"] = torch.zeros_like(p)
                    st["v"] = torch.zeros_like(p)
                st["step"] += 1
                if group["weight_decay"] != 0:
                    g.add_(p, alpha=group["weight_decay"])
                st["m"].mul_(beta1).add_(g, alpha=1 - beta1)
                st["v"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                corr1 = 1 - beta1 ** st["step"]
                corr2 = 1 - beta2 ** st["step"]
                step_size = group["lr"] * math.sqrt(corr2) / corr1
                adam_step = st["m"] / (st["v"].sqrt() + group["eps"])
                w_rms = p.pow(2).mean().sqrt()
                s_rms = adam_step.pow(2).mean().sqrt()
                trust = 1.0 if w_rms == 0 or s_rms == 0 else min((w_rms / s_rms).item(), 10.0)
                st["trust_ratio"] = trust
                if self.adam:
                    trust = 1.0
                p.add_(adam_step, alpha=-step_size * trust)
        return loss


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5, 1)
        self.conv2 = nn.Conv2d(10, 20, 3, 1)
        self.fc1 = nn.Linear(20 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return F.log_softmax(self.fc2(x), dim=1)


def digits(n, seed):
    protos = torch.randn(10, 1, 16, 16, generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(protos[y] + torch.randn(n, 1, 16, 16, generator=g), y)


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train epoch {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}] loss {loss.item():.4f}")


def test(args, model, device, test_loader, epoch):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data.to(device))
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += (output.argmax(1) == target).sum().item()
    n = len(test_loader.dataset)
    print(f"Test epoch {epoch}: average loss {test_loss / n:.4f}, accuracy {correct}/{n} ({100.0 * correct / n:.0f}%)")


def main():
    args = SimpleNamespace(batch_size=64, test_batch_size=500, epochs=3, lr=0.0025, wd=0.01, seed=1,
                           log_interval=10)
    torch.manual_seed(args.seed)
    device = torch.device("cpu")
    train_loader = DataLoader(digits(2048, 0), batch_size=args.batch_size, shuffle=True,
                              generator=torch.Generator().manual_seed(args.seed))
    test_loader = DataLoader(digits(1000, 1), batch_size=args.test_batch_size)
    model = Net().to(device)
    optimizer = Lamb(model.parameters(), lr=args.lr, weight_decay=args.wd, betas=(0.9, 0.99))
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(args, model, device, test_loader, epoch)


if __name__ == "__main__":
    main()
