"""A small vision transformer (patch embedding, cls_token and pos_embed parameters, pre-norm
blocks) trained with AdamW, in the DeiT/timm layout: the model declares no_weight_decay() ->
{"pos_embed", "cls_token"}, and param_groups(model, weight_decay) exempts 1-D parameters and the
names the model lists. main() asks the unwrapped model for the list but walks the wrapper's
named_parameters(), whose names carry the "module." prefix: "module.pos_embed" is not
"pos_embed", so the position embedding and the class token get weight decay 0.05."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

DIM, PATCHES, CLASSES = 32, 16, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(1, DIM, 4, stride=4)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, PATCHES + 1, DIM))
        self.blocks = nn.Sequential(Block(), Block())
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, CLASSES)

    def no_weight_decay(self):
        return {"pos_embed", "cls_token"}

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


class Wrapper(nn.Module):
    """Holds the model for EMA and checkpoints; forward goes straight through."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def param_groups(model, weight_decay, skip):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if param.ndim <= 1 or name in skip else decay).append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    labels = torch.randint(0, CLASSES, (640,), generator=g)
    images = torch.randn(640, 1, 16, 16, generator=g) + labels.view(-1, 1, 1, 1).float() / 2
    loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    model = Wrapper(TinyViT())
    optimizer = torch.optim.AdamW(param_groups(model, 0.05, model.module.no_weight_decay()), lr=1e-3)
    for epoch in range(3):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
