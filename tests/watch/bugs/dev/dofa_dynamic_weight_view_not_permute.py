"""A wavelength-conditioned ("one model for any sensor") patch embedding for multispectral satellite
images: each band's wavelength gets a sine/cosine embedding, a small residual MLP and a transformer
weight generator turn the band tokens into one k x k x embed_dim kernel slice per band, and the
embedding runs F.conv2d with the generated kernel (stride k) before a pooled linear classifier. A
Lightning-style ClassificationTask trains it with AdamW.

The generator's output is laid out as (bands, k*k*embed_dim), but the code reshapes it with
weight.view(embed_dim, bands, k, k). view only reinterprets the memory, so every output channel
of the kernel mixes numbers that belong to different bands and different channels: the per-band
kernels the generator learns are scrambled before they reach the image, no error is raised, and
the model learns far less from the spectral signature than it should. The fix views it as
(bands, k, k, embed_dim) and permutes to (embed_dim, bands, k, k).

Thread: https://github.com/torchgeo/torchgeo/pull/2256
"""
import torch
import torch.nn.functional as F
from torch import nn

WAVELENGTHS = torch.tensor([0.49, 0.56, 0.665, 0.842, 1.61, 2.19])  # micrometres
NUM_CLASSES, IMG, K = 4, 16, 4


def wave_embedding(dim, wavelengths):
    half = torch.arange(dim // 2, dtype=torch.float32) / (dim / 2)
    freqs = 1.0 / 10000 ** half
    angles = (wavelengths * 1000)[:, None] * freqs[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class ResidualMLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.a, self.b = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        return x + F.relu(self.b(F.relu(self.a(x))))


class KernelGenerator(nn.Module):
    """Band tokens -> one flattened (k, k, embed_dim) kernel slice per band, plus a bias."""

    def __init__(self, token_dim, kernel_numel, embed_dim, n_query=8):
        super().__init__()
        layer = nn.TransformerEncoderLayer(token_dim, nhead=2, dim_feedforward=2 * token_dim,
                                           dropout=0.0, activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.queries = nn.Parameter(0.02 * torch.randn(n_query, token_dim))
        self.bias_query = nn.Parameter(0.02 * torch.randn(1, token_dim))
        self.to_kernel = nn.Linear(token_dim, kernel_numel)
        self.to_bias = nn.Linear(token_dim, embed_dim)
        self.n_query = n_query

    def forward(self, band_tokens):
        seq = torch.cat([self.queries, band_tokens, self.bias_query], dim=0)
        out = self.encoder(seq)
        kernels = self.to_kernel(out[self.n_query:-1] + band_tokens)  # [bands, k*k*embed]
        return kernels, self.to_bias(out[-1])


class SpectralPatchEmbed(nn.Module):
    def __init__(self, token_dim=32, kernel_size=K, embed_dim=32):
        super().__init__()
        self.k, self.embed_dim, self.token_dim = kernel_size, embed_dim, token_dim
        self.mlp = ResidualMLP(token_dim)
        self.generator = KernelGenerator(token_dim, kernel_size * kernel_size * embed_dim, embed_dim)
        self.scale = 0.1

    def forward(self, x, wavelengths):
        bands = wavelengths.numel()
        tokens = self.mlp(wave_embedding(self.token_dim, wavelengths))
        kernels, bias = self.generator(tokens)
        weight = kernels.view(self.embed_dim, bands, self.k, self.k)
        out = F.conv2d(x, weight * self.scale, bias * self.scale, stride=self.k)
        return out.flatten(2).transpose(1, 2)  # [B, patches, embed]


class SpectralClassifier(nn.Module):
    def __init__(self, embed_dim=32):
        super().__init__()
        self.embed = SpectralPatchEmbed(embed_dim=embed_dim)
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, NUM_CLASSES)

    def forward(self, x, wavelengths):
        tokens = self.embed(x, wavelengths)
        return self.head(self.norm(F.gelu(tokens).mean(1)))


class ClassificationTask:
    def __init__(self, model, lr=2e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)

    def training_step(self, batch):
        x, y = batch
        return F.cross_entropy(self.model(x, WAVELENGTHS), y)

    @torch.no_grad()
    def validation_step(self, batch):
        x, y = batch
        return (self.model(x, WAVELENGTHS).argmax(1) == y).float().mean().item()


def scenes(n, seed):
    """Land-cover classes that differ only in their spectra; each pixel gets texture and noise."""
    g = torch.Generator().manual_seed(seed)
    signatures = torch.tensor([[0.05, 0.08, 0.04, 0.45, 0.25, 0.12],   # vegetation
                               [0.10, 0.09, 0.08, 0.05, 0.02, 0.01],   # water
                               [0.18, 0.20, 0.24, 0.28, 0.35, 0.30],   # bare soil
                               [0.14, 0.15, 0.16, 0.20, 0.22, 0.21]])  # built-up
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    texture = 1 + 0.3 * torch.rand(n, 1, IMG, IMG, generator=g)
    x = signatures[y][:, :, None, None] * texture + 0.03 * torch.randn(n, 6, IMG, IMG, generator=g)
    return (x - 0.15) / 0.1, y


def main():
    torch.manual_seed(0)
    x_train, y_train = scenes(640, seed=1)
    x_val, y_val = scenes(256, seed=2)
    task = ClassificationTask(SpectralClassifier())
    g = torch.Generator().manual_seed(0)
    for epoch in range(4):
        task.model.train()
        order = torch.randperm(len(y_train), generator=g)
        for i in range(0, len(order), 32):
            idx = order[i:i + 32]
            loss = task.training_step((x_train[idx], y_train[idx]))
            task.optimizer.zero_grad()
            loss.backward()
            task.optimizer.step()
        task.model.eval()
        acc = task.validation_step((x_val, y_val))
        print(f"epoch {epoch} train_loss {loss.item():.4f} val_acc {acc:.3f}")


if __name__ == "__main__":
    main()
