"""A from-scratch Vision Transformer for image classification: the forward pass cuts the (N, C, H, W)
batch into patches with two unfold calls, flattens them with view(N, -1, patch_dim * patch_dim * C),
projects them with a linear encoding, prepends a class token, adds a learned positional encoding,
runs a pre-norm transformer encoder and an MLP head ending in log_softmax. A train(model, loader,
optimizer, criterion, epoch, args) helper sets the learning rate per batch (linear warmup, then
cosine) and trains with SGD and momentum; val() reports loss and accuracy under eval().

After the two unfolds the tensor is laid out (N, C, H/P, W/P, P, P), so the view that follows groups
the P*P pixels of C consecutive patches of the SAME channel into one token, instead of the C*P*P
values of one patch: each "word" mixes different spatial blocks and never sees all colours of its own
patch. Nothing errors; the fix views to (N, C, L, P*P) and permutes the channel axis behind the patch
axis before flattening.

Thread: https://github.com/gupta-abhay/pytorch-vit/issues/7
"""
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LearnedPositionalEncoding(nn.Module):
    def __init__(self, seq_length, embedding_dim):
        super().__init__()
        self.pe = nn.Parameter(0.02 * torch.randn(1, seq_length, embedding_dim))

    def forward(self, x):
        return x + self.pe


class EncoderLayer(nn.Module):
    def __init__(self, dim, heads, hidden_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ff(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, img_dim, patch_dim, out_dim, num_channels, embedding_dim, num_heads, num_layers,
                 hidden_dim):
        super().__init__()
        self.patch_dim = patch_dim
        self.num_patches = (img_dim // patch_dim) ** 2
        self.flatten_dim = patch_dim * patch_dim * num_channels
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embedding_dim))
        self.linear_encoding = nn.Linear(self.flatten_dim, embedding_dim)
        self.position_encoding = LearnedPositionalEncoding(self.num_patches + 1, embedding_dim)
        self.transformer = nn.Sequential(*[EncoderLayer(embedding_dim, num_heads, hidden_dim)
                                           for _ in range(num_layers)])
        self.pre_head_ln = nn.LayerNorm(embedding_dim)
        self.mlp_head = nn.Sequential(nn.Linear(embedding_dim, hidden_dim), nn.GELU(),
                                      nn.Linear(hidden_dim, out_dim))

    def forward(self, x):
        p = self.patch_dim
        x = x.unfold(2, p, p).unfold(3, p, p).contiguous()      # (N, C, H/P, W/P, P, P)
        x = x.view(x.size(0), -1, self.flatten_dim)              # groups values of one channel across patches
        x = self.linear_encoding(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = self.transformer(self.position_encoding(x))
        return F.log_softmax(self.mlp_head(self.pre_head_ln(x[:, 0])), dim=-1)


def coloured_blobs(n, seed, size=16, num_classes=4):
    # class = which colour sits in which quadrant; a 4x4 patch only sees it with all three channels
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    img = 0.4 * torch.randn(n, 3, size, size, generator=g)
    palette = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    quad = torch.randint(0, 4, (n,), generator=g)
    for i in range(n):
        r, c = divmod(int(quad[i]), 2)
        img[i, :, r * 8 + 2:r * 8 + 6, c * 8 + 2:c * 8 + 6] += 1.5 * palette[y[i]][:, None, None]
    return TensorDataset(img, y)


def adjust_learning_rate(args, optimizer, epoch, batch_idx, n_batches):
    step = epoch * n_batches + batch_idx
    total, warmup = args.epochs * n_batches, args.warmup_steps
    if step < warmup:
        lr = args.lr * (step + 1) / warmup
    else:
        lr = 0.5 * args.lr * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def train(model, train_loader, optimizer, criterion, epoch, args):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        lr = adjust_learning_rate(args, optimizer, epoch, batch_idx, len(train_loader))
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        if (batch_idx + 1) % 10 == 0:
            acc = (output.argmax(1) == target).float().mean().item()
            print(f"Epoch {epoch + 1} [{batch_idx + 1}/{len(train_loader)}] lr {lr:.4f} "
                  f"loss {loss.item():.3f} acc {acc:.3f}")


def val(model, val_loader, criterion, epoch):
    model.eval()
    loss = correct = 0.0
    with torch.no_grad():
        for data, target in val_loader:
            output = model(data)
            loss += criterion(output, target).item() * len(target)
            correct += (output.argmax(1) == target).sum().item()
    n = len(val_loader.dataset)
    print(f"Validate epoch {epoch + 1}: loss {loss / n:.4f} accuracy {100.0 * correct / n:.2f}")


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(epochs=3, lr=0.05, momentum=0.9, weight_decay=1e-4, warmup_steps=10)
    model = VisionTransformer(img_dim=16, patch_dim=4, out_dim=4, num_channels=3, embedding_dim=64,
                              num_heads=4, num_layers=2, hidden_dim=128)
    train_loader = DataLoader(coloured_blobs(2048, 0), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(coloured_blobs(512, 1), batch_size=256)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    criterion = nn.NLLLoss()
    for epoch in range(args.epochs):
        train(model, train_loader, optimizer, criterion, epoch, args)
        val(model, val_loader, criterion, epoch)


if __name__ == "__main__":
    main()
