"""Healthy look-alike of view-instead-of-permute: a small vision transformer and a ShuffleNet-style
stem that reshape a lot and always move axes with permute or transpose before a view. Patches are
cut with view(B, C, h, p, w, p) + permute + reshape; attention splits heads with view and merges
them after transpose(1, 2); the channel shuffle is view(B, g, C/g, H, W) -> transpose(1, 2) ->
view(B, C, H, W); a GRU's final state (layers * directions, B, H) is split with
view(layers, directions, B, H) and joined after a permute. Every view only splits or merges
neighbouring axes."""
import torch
import torch.nn.functional as F
from torch import nn

IMG, PATCH, DIM, HEADS = 16, 4, 48, 4


def channel_shuffle(x, groups):
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


def patchify(x, p):
    b, c, h, w = x.shape
    x = x.view(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // p) * (w // p), c * p * p)


class Attention(nn.Module):
    def __init__(self, dim=DIM, heads=HEADS):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class HybridNet(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 3, padding=1, groups=3)
        self.embed = nn.Linear(12 * PATCH * PATCH, DIM)
        self.pos = nn.Parameter(torch.zeros(1, (IMG // PATCH) ** 2, DIM))
        self.attn = Attention()
        self.norm = nn.LayerNorm(DIM)
        self.gru = nn.GRU(DIM, DIM // 2, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(DIM, classes)

    def forward(self, images):
        x = channel_shuffle(F.relu(self.stem(images)), groups=3)
        tokens = self.embed(patchify(x, PATCH)) + self.pos
        tokens = tokens + self.attn(self.norm(tokens))
        _, h_n = self.gru(tokens)
        last = h_n.view(2, 2, images.shape[0], DIM // 2)[-1]          # (directions, B, H) of the top layer
        return self.head(last.permute(1, 0, 2).reshape(images.shape[0], DIM))


def make_data(n, g):
    labels = torch.randint(0, 4, (n,), generator=g)
    images = 0.3 * torch.randn(n, 3, IMG, IMG, generator=g)
    for i, c in enumerate(labels.tolist()):
        quarter = (slice(0, 8) if c < 2 else slice(8, 16), slice(0, 8) if c % 2 == 0 else slice(8, 16))
        images[i, :, quarter[0], quarter[1]] += 1.0
    return images, labels


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    images, labels = make_data(1024, g)
    model = HybridNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for epoch in range(2):
        perm = torch.randperm(len(images), generator=g)
        for start in range(0, len(images), 32):
            idx = perm[start:start + 32]
            loss = F.cross_entropy(model(images[idx]), labels[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
