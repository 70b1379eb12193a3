"""A FixMatch semi-supervised training script, one rank of a distributed run: main() builds a
labeled and an unlabeled DataLoader whose sampler is DistributedSampler when local_rank != -1
(RandomSampler otherwise), a small WideResNet-style model, SGD with nesterov and no-decay groups
for biases and BatchNorm, a cosine-with-warmup LambdaLR and an EMA model, then calls
train(args, labeled_trainloader, unlabeled_trainloader, test_loader, model, optimizer, ema_model,
scheduler). train() draws batches with next() and, on StopIteration, builds a fresh iterator over
the same loader; each step computes the supervised loss on labeled data and the pseudo-label loss
on weak/strong views of unlabeled data, steps the optimizer and scheduler, and zeroes the grads.
sampler.set_epoch() is never called, so every fresh iterator replays exactly the same permutation:
the labeled and unlabeled batches repeat in the same order and composition on every pass.

Thread: https://github.com/kekmodel/FixMatch-pytorch/issues/34
"""
import math
from copy import deepcopy
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler, SequentialSampler

PROTOS = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(123))


def weak_aug(x):
    if torch.rand(1) < 0.5:
        x = x.flip(-1)
    dx, dy = torch.randint(-2, 3, (2,)).tolist()
    return torch.roll(x, shifts=(dy, dx), dims=(1, 2))


def strong_aug(x):
    x = weak_aug(x)
    x = x * (0.6 + 0.8 * torch.rand(3, 1, 1)) + 0.5 * torch.randn_like(x)
    i, j = torch.randint(0, 12, (2,)).tolist()
    x = x.clone()
    x[:, i:i + 4, j:j + 4] = 0
    return x


class CifarLike(Dataset):
    def __init__(self, n, seed, mode):
        g = torch.Generator().manual_seed(seed)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        self.data = PROTOS[self.targets] + 0.7 * torch.randn(n, 3, 16, 16, generator=g)
        self.mode = mode

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, idx):
        x, y = self.data[idx], self.targets[idx]
        if self.mode == "labeled":
            return weak_aug(x), y
        if self.mode == "unlabeled":
            return (weak_aug(x), strong_aug(x)), y
        return x, y


class WideBasic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False)

    def forward(self, x):
        o = F.leaky_relu(self.bn1(x), 0.1)
        return self.shortcut(o) + self.conv2(F.leaky_relu(self.bn2(self.conv1(o)), 0.1))


class WideResNet(nn.Module):
    def __init__(self, num_classes=10, width=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.block1 = WideBasic(width, width, 1)
        self.block2 = WideBasic(width, 2 * width, 2)
        self.bn = nn.BatchNorm2d(2 * width)
        self.fc = nn.Linear(2 * width, num_classes)

    def forward(self, x):
        x = self.block2(self.block1(self.conv1(x)))
        x = F.adaptive_avg_pool2d(F.leaky_relu(self.bn(x), 0.1), 1).flatten(1)
        return self.fc(x)


class ModelEMA:
    def __init__(self, model, decay):
        self.ema = deepcopy(model)
        self.ema.eval()
        self.decay = decay
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            msd, esd = model.state_dict(), self.ema.state_dict()
            param_keys = {k for k, _ in model.named_parameters()}
            for k, v in esd.items():
                if k in param_keys:
                    v.mul_(self.decay).add_(msd[k].detach(), alpha=1 - self.decay)
                else:
                    v.copy_(msd[k])


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=7. / 16.):
    def _lr_lambda(step):
        if step < num_warmup_steps:
            return float(step) / float(max(1, num_warmup_steps))
        progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0., math.cos(math.pi * num_cycles * progress))
    return LambdaLR(optimizer, _lr_lambda)


def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def test(test_loader, model):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for inputs, targets in test_loader:
            correct += (model(inputs).argmax(1) == targets).sum().item()
            total += len(targets)
    return correct / total


def train(args, labeled_trainloader, unlabeled_trainloader, test_loader, model, optimizer, ema_model, scheduler):
    labeled_iter = iter(labeled_trainloader)
    unlabeled_iter = iter(unlabeled_trainloader)
    model.train()
    for epoch in range(args.start_epoch, args.epochs):
        for batch_idx in range(args.eval_step):
            try:
                inputs_x, targets_x = next(labeled_iter)
            except StopIteration:
                labeled_iter = iter(labeled_trainloader)
                inputs_x, targets_x = next(labeled_iter)
            try:
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)
            except StopIteration:
                unlabeled_iter = iter(unlabeled_trainloader)
                (inputs_u_w, inputs_u_s), _ = next(unlabeled_iter)

            batch_size = inputs_x.shape[0]
            inputs = interleave(torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * args.mu + 1)
            logits = de_interleave(model(inputs), 2 * args.mu + 1)
            logits_x = logits[:batch_size]
            logits_u_w, logits_u_s = logits[batch_size:].chunk(2)

            Lx = F.cross_entropy(logits_x, targets_x, reduction='mean')
            pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
            max_probs, targets_u = torch.max(pseudo_label, dim=-1)
            mask = max_probs.ge(args.threshold).float()
            Lu = (F.cross_entropy(logits_u_s, targets_u, reduction='none') * mask).mean()
            loss = Lx + args.lambda_u * Lu

            loss.backward()
            optimizer.step()
            scheduler.step()
            ema_model.update(model)
            model.zero_grad()

            if batch_idx % 10 == 0:
                print(f"epoch {epoch} iter {batch_idx} loss {loss.item():.4f} Lx {Lx.item():.4f} "
                      f"Lu {Lu.item():.4f} mask {mask.mean().item():.2f} lr {scheduler.get_last_lr()[0]:.4f}")
        print(f"epoch {epoch} test acc (ema) {test(test_loader, ema_model.ema):.3f}")


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(local_rank=0, world_size=2, batch_size=8, mu=7, lr=0.03, wdecay=5e-4, nesterov=True,
                           eval_step=25, total_steps=75, warmup=5, T=1.0, threshold=0.95, lambda_u=1.0,
                           ema_decay=0.95, start_epoch=0)
    labeled_dataset = CifarLike(64, seed=0, mode="labeled")
    unlabeled_dataset = CifarLike(448, seed=1, mode="unlabeled")
    test_dataset = CifarLike(200, seed=2, mode="test")

    def train_sampler(dataset):
        if args.local_rank == -1:
            return RandomSampler(dataset)
        return DistributedSampler(dataset, num_replicas=args.world_size, rank=args.local_rank)

    labeled_trainloader = DataLoader(labeled_dataset, sampler=train_sampler(labeled_dataset),
                                     batch_size=args.batch_size, drop_last=True)
    unlabeled_trainloader = DataLoader(unlabeled_dataset, sampler=train_sampler(unlabeled_dataset),
                                       batch_size=args.batch_size * args.mu, drop_last=True)
    test_loader = DataLoader(test_dataset, sampler=SequentialSampler(test_dataset), batch_size=50)

    model = WideResNet()
    no_decay = ['bias', 'bn']
    grouped_parameters = [
        {'params': [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         'weight_decay': args.wdecay},
        {'params': [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         'weight_decay': 0.0},
    ]
    optimizer = torch.optim.SGD(grouped_parameters, lr=args.lr, momentum=0.9, nesterov=args.nesterov)
    args.epochs = math.ceil(args.total_steps / args.eval_step)
    scheduler = get_cosine_schedule_with_warmup(optimizer, args.warmup, args.total_steps)
    ema_model = ModelEMA(model, args.ema_decay)

    model.zero_grad()
    train(args, labeled_trainloader, unlabeled_trainloader, test_loader, model, optimizer, ema_model, scheduler)


if __name__ == "__main__":
    main()
