"""A small vision-transformer classifier whose MLP blocks are Soft Mixture-of-Experts layers: a
SoftMoE module with a learned phi tensor computes token-slot logits of shape (batch, tokens,
experts, slots), builds dispatch weights (a softmax over the tokens for each slot) and combine
weights (a softmax over all expert slots for each token), runs a MultiExpertLayer on the slots and
mixes the outputs back; a train_epoch(model, loader, optimizer) helper trains it with AdamW and cross
entropy. The dispatch softmax is taken over dim=0, the batch dimension, instead of the token
dimension, so each slot's input is a mixture across the samples of the batch.

Thread: https://github.com/fkodom/soft-mixture-of-experts/pull/1
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MultiExpertLayer(nn.Module):
    def __init__(self, in_features, out_features, num_experts):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_experts, in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(num_experts, out_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x):
        # x: (batch, experts, slots, in_features)
        return torch.einsum("besd,edo->beso", x, self.weight) + self.bias[None, :, None, :]


class SoftMoE(nn.Module):
    def __init__(self, in_features, out_features, num_experts, slots_per_expert):
        super().__init__()
        self.phi = nn.Parameter(torch.empty(in_features, num_experts, slots_per_expert))
        nn.init.kaiming_uniform_(self.phi, a=math.sqrt(5))
        self.experts = MultiExpertLayer(in_features, out_features, num_experts)

    def forward(self, x):
        # x: (batch, tokens, dim)
        logits = torch.einsum("bmd,dnp->bmnp", x, self.phi)
        dispatch_weights = logits.softmax(dim=0)
        combine_weights = logits.flatten(start_dim=2).softmax(dim=-1).view_as(logits)
        slots = torch.einsum("bmd,bmnp->bnpd", x, dispatch_weights)
        out = self.experts(slots)
        return torch.einsum("bnpd,bmnp->bmd", out, combine_weights)


class SoftMoEEncoderLayer(nn.Module):
    def __init__(self, dim, heads, num_experts, slots_per_expert):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.moe = SoftMoE(dim, dim, num_experts, slots_per_expert)

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + F.gelu(self.moe(self.norm2(x)))


class SoftMoEViT(nn.Module):
    def __init__(self, patch_dim=16, dim=32, num_patches=16, num_classes=4, depth=2):
        super().__init__()
        self.embed = nn.Linear(patch_dim, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(1, num_patches, dim))
        self.layers = nn.ModuleList(SoftMoEEncoderLayer(dim, 4, num_experts=4, slots_per_expert=2)
                                    for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, patches):
        x = self.embed(patches) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(1))


def patch_images(n, seed, num_classes=4):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(num_classes, 16, 16, generator=torch.Generator().manual_seed(9))
    y = torch.randint(0, num_classes, (n,), generator=g)
    return TensorDataset(protos[y] + 1.5 * torch.randn(n, 16, 16, generator=g), y)


def train_epoch(model, loader, optimizer):
    model.train()
    for step, (patches, labels) in enumerate(loader):
        loss = F.cross_entropy(model(patches), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 16 == 0:
            print(f"  step {step} loss {loss.item():.4f}")


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    hits = sum((model(p).argmax(1) == y).sum().item() for p, y in loader)
    return hits / len(loader.dataset)


def main():
    torch.manual_seed(0)
    model = SoftMoEViT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    train_loader = DataLoader(patch_images(2048, 0), batch_size=64, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(patch_images(512, 1), batch_size=128)
    for epoch in range(3):
        train_epoch(model, train_loader, optimizer)
        print(f"epoch {epoch} val acc {accuracy(model, val_loader):.3f}")


if __name__ == "__main__":
    main()
