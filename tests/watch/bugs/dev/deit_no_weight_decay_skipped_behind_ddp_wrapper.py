"""A DeiT-style training script: a small VisionTransformer (conv patch embedding, cls_token and
pos_embed parameters, pre-norm blocks) declares no_weight_decay() -> {'pos_embed', 'cls_token'}. The
main() wraps the model in a data-parallel wrapper, keeps model_without_ddp = model.module for
checkpoints, and builds AdamW with a timm-style create_optimizer(args, model), which puts biases,
1-d parameters and the names returned by model.no_weight_decay() in a group without decay. A
train_one_epoch(model, criterion, data_loader, optimizer, epoch) helper trains with label-smoothed
cross entropy; a per-epoch cosine schedule and an evaluate() under eval() follow.

create_optimizer is handed the wrapper, not model_without_ddp. The wrapper has no no_weight_decay
attribute, so the hasattr check fails, the skip set is empty and AdamW's weight decay of 0.05 is
applied to the position embedding and the class token as well. Nothing errors; the fix passes
model_without_ddp to create_optimizer.

Thread: https://github.com/facebookresearch/deit/issues/39
"""
import math
from types import SimpleNamespace

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class DataParallelWrapper(nn.Module):
    """Stands in for DistributedDataParallel on one process: forwards to .module."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *inputs):
        return self.module(*inputs)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, img_size=16, patch_size=4, in_chans=3, num_classes=5, embed_dim=48, depth=3,
                 num_heads=3):
        super().__init__()
        self.patch_embed = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)
        num_patches = (img_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        self.blocks = nn.Sequential(*[Block(embed_dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def no_weight_decay(self):
        return {"pos_embed", "cls_token"}

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


def add_weight_decay(model, weight_decay, skip_list=()):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in skip_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def create_optimizer(args, model):
    skip = set()
    if hasattr(model, "no_weight_decay"):
        skip = model.no_weight_decay()
    parameters = add_weight_decay(model, args.weight_decay, skip)
    return torch.optim.AdamW(parameters, lr=args.lr, weight_decay=0.0)


def striped_images(n, seed, num_classes=5):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = 0.8 * torch.randn(n, 3, 16, 16, generator=g)
    rows = torch.arange(16)
    for i in range(n):
        x[i, int(y[i]) % 3, (rows // 3) == int(y[i])] += 1.2   # a stripe whose row band and colour code the class
    return TensorDataset(x, y)


def train_one_epoch(model, criterion, data_loader, optimizer, epoch):
    model.train()
    for step, (samples, targets) in enumerate(data_loader):
        outputs = model(samples)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"Epoch: [{epoch}] [{step}/{len(data_loader)}] loss {loss.item():.4f} "
                  f"lr {optimizer.param_groups[0]['lr']:.6f}")


@torch.no_grad()
def evaluate(data_loader, model):
    model.eval()
    correct = sum((model(x).argmax(1) == y).sum().item() for x, y in data_loader)
    return correct / len(data_loader.dataset)


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(lr=1e-3, weight_decay=0.05, epochs=3, smoothing=0.1, batch_size=64)
    model = VisionTransformer()
    model = DataParallelWrapper(model)
    model_without_ddp = model.module
    optimizer = create_optimizer(args, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda e: 0.5 * (1 + math.cos(math.pi * e / args.epochs)))
    criterion = nn.CrossEntropyLoss(label_smoothing=args.smoothing)
    train_loader = DataLoader(striped_images(1600, 0), batch_size=args.batch_size, shuffle=True,
                              drop_last=True, generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(striped_images(400, 1), batch_size=200)
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, train_loader, optimizer, epoch)
        scheduler.step()
        acc = evaluate(val_loader, model)
        pos_norm = model_without_ddp.pos_embed.norm().item()
        print(f"Accuracy of the network on the test images: {100 * acc:.1f}% (pos_embed norm {pos_norm:.3f})")


if __name__ == "__main__":
    main()
