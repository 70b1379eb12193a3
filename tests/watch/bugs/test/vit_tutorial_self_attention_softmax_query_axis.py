"""A from-scratch Vision Transformer tutorial: a SelfAttention head holding one weight matrix W of shape
(D, 3*D_h) that is split into query, key and value, a MultiHeadSelfAttention that concatenates a list of
such heads and projects them back, pre-norm TransformerEncoder blocks with dropout and residuals, an
MLPHead on the class token, and a VisionTransformer that unfolds the image into patches, embeds them,
prepends a class token and adds position embeddings. It is trained on an image subset through a
DataLoader with Adam and CrossEntropyLoss. Each head normalises its scaled scores of shape
(batch, tokens, tokens) with F.softmax(..., dim=1), the query axis, so every key's column sums to 1
instead of every query's row: a query's weights no longer form a distribution over the patches and the
class token reads a mix whose size depends on how much the other queries want the same patches.

Thread: https://github.com/nerminnuraydogan/vision-transformer/issues/1
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SelfAttention(nn.Module):
    def __init__(self, embedding_dim, key_dim):
        super().__init__()
        self.key_dim = key_dim
        self.W = nn.Parameter(torch.randn(embedding_dim, 3 * key_dim) / np.sqrt(embedding_dim))

    def forward(self, x):
        kd = self.key_dim
        qkv = x @ self.W
        q, k, v = qkv[:, :, :kd], qkv[:, :, kd:2 * kd], qkv[:, :, 2 * kd:]
        scores = q @ k.transpose(-2, -1) / np.sqrt(kd)
        weights = F.softmax(scores, dim=1)  # (batch, queries, keys): normalised over the queries
        return weights @ v


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, embedding_dim, num_heads):
        super().__init__()
        key_dim = embedding_dim // num_heads
        self.heads = nn.ModuleList([SelfAttention(embedding_dim, key_dim) for _ in range(num_heads)])
        self.W = nn.Parameter(torch.randn(num_heads * key_dim, embedding_dim) / np.sqrt(embedding_dim))

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1) @ self.W


class TransformerEncoder(nn.Module):
    def __init__(self, embedding_dim, num_heads, hidden_dim, dropout_prob=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(embedding_dim)
        self.norm2 = nn.LayerNorm(embedding_dim)
        self.msa = MultiHeadSelfAttention(embedding_dim, num_heads)
        self.mlp = nn.Sequential(nn.Linear(embedding_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, embedding_dim))
        self.drop1, self.drop2 = nn.Dropout(dropout_prob), nn.Dropout(dropout_prob)

    def forward(self, x):
        x = x + self.drop1(self.msa(self.norm1(x)))
        return x + self.drop2(self.mlp(self.norm2(x)))


class MLPHead(nn.Module):
    def __init__(self, embedding_dim, num_classes):
        super().__init__()
        self.mlp_head = nn.Sequential(nn.Linear(embedding_dim, 64), nn.Tanh(), nn.Linear(64, num_classes))

    def forward(self, x):
        return self.mlp_head(x)


class VisionTransformer(nn.Module):
    def __init__(self, patch_size=4, image_size=16, channels=1, num_layers=2, embedding_dim=32,
                 num_heads=4, hidden_dim=64, num_classes=4):
        super().__init__()
        self.patch_size, self.channels = patch_size, channels
        num_patches = (image_size // patch_size) ** 2
        self.W = nn.Parameter(torch.randn(patch_size * patch_size * channels, embedding_dim) * 0.1)
        self.class_token = nn.Parameter(torch.randn(1, 1, embedding_dim) * 0.1)
        self.pos_embedding = nn.Parameter(torch.randn(num_patches + 1, embedding_dim) * 0.1)
        self.encoders = nn.Sequential(*[TransformerEncoder(embedding_dim, num_heads, hidden_dim)
                                        for _ in range(num_layers)])
        self.head = MLPHead(embedding_dim, num_classes)

    def forward(self, x):
        p, c = self.patch_size, self.channels
        patches = x.unfold(2, p, p).unfold(3, p, p)  # (B, C, h, w, p, p)
        patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(x.size(0), -1, c * p * p)
        tokens = patches @ self.W
        tokens = torch.cat([self.class_token.expand(x.size(0), -1, -1), tokens], dim=1) + self.pos_embedding
        out = self.encoders(tokens)
        return self.head(out[:, 0])


def make_images(n, seed):
    """Class = which quadrant holds a bright 4x4 square; the rest is noise, so the class token must
    attend to the right patch."""
    g = torch.Generator().manual_seed(seed)
    x = 0.5 * torch.randn(n, 1, 16, 16, generator=g)
    y = torch.randint(0, 4, (n,), generator=g)
    for i in range(n):
        qr, qc = divmod(int(y[i]), 2)
        r = qr * 8 + int(torch.randint(0, 2, (1,), generator=g)) * 4
        col = qc * 8 + int(torch.randint(0, 2, (1,), generator=g)) * 4
        x[i, 0, r:r + 4, col:col + 4] += 2.0
    return x, y


def main():
    torch.manual_seed(0)
    x_tr, y_tr = make_images(1024, seed=0)
    x_te, y_te = make_images(256, seed=1)
    loader = DataLoader(TensorDataset(x_tr, y_tr), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = VisionTransformer()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(3):
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        model.eval()
        with torch.no_grad():
            preds = torch.argmax(F.softmax(model(x_te), dim=1), dim=1)
        print(f"epoch {epoch} test accuracy {(preds == y_te).float().mean().item():.3f}")


if __name__ == "__main__":
    main()
