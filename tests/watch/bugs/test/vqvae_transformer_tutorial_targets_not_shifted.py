"""Stage two of a VQ-VAE + transformer tutorial (likelihood-based anomaly detection): a frozen
VQ-VAE whose index_quantize() turns each image into a grid of codebook indices, a raster-scan
Ordering, a DecoderOnlyTransformer (token and position embeddings, causally masked self-attention
blocks, num_tokens = num_embeddings + 1 for the BOS token), and a VQVAETransformerInferer whose
__call__ quantizes, orders, prepends the BOS token, runs the transformer and, with
return_latent=True, also returns that same sequence. The notebook loop does zero_grad,
logits, quantizations_target, _ = inferer(...), CrossEntropyLoss, backward, step, with a
validation pass every val_interval epochs.
The loss is ce_loss(logits.transpose(1, 2), quantizations_target): the logits at position n are
scored against token n, which is the token the model was just given, instead of token n + 1, so
the transformer learns to copy its current input and the loss falls to near zero.

Thread: https://github.com/Project-MONAI/GenerativeModels/issues/314
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import CrossEntropyLoss

NUM_EMBEDDINGS, PATCH, GRID = 8, 4, 4


class VQVAE(nn.Module):
    """Stands in for the stage-one model trained earlier in the tutorial: a patch encoder and a
    codebook; only index_quantize() is used in stage two."""
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.num_embeddings = NUM_EMBEDDINGS
        self.codebook = nn.Parameter(torch.randn(NUM_EMBEDDINGS, PATCH * PATCH, generator=g), requires_grad=False)

    def decode_indices(self, idx):
        patches = self.codebook[idx]                                    # (B, h, w, P*P)
        B = idx.shape[0]
        img = patches.view(B, GRID, GRID, PATCH, PATCH).permute(0, 1, 3, 2, 4)
        return img.reshape(B, 1, GRID * PATCH, GRID * PATCH)

    def index_quantize(self, images):
        B = images.shape[0]
        patches = F.unfold(images, PATCH, stride=PATCH).transpose(1, 2)  # (B, h*w, P*P)
        dist = torch.cdist(patches, self.codebook.expand(B, -1, -1))
        return dist.argmin(-1).view(B, GRID, GRID)


class Ordering:
    def __init__(self, dimensions):
        self.sequence = torch.arange(math.prod(dimensions))  # raster scan

    def get_sequence_ordering(self):
        return self.sequence


class DecoderOnlyTransformer(nn.Module):
    def __init__(self, num_tokens, max_seq_len, attn_layers_dim, attn_layers_depth, attn_layers_heads):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.token_embeddings = nn.Embedding(num_tokens, attn_layers_dim)
        self.position_embeddings = nn.Embedding(max_seq_len, attn_layers_dim)
        layer = nn.TransformerEncoderLayer(attn_layers_dim, attn_layers_heads, 4 * attn_layers_dim,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, attn_layers_depth, enable_nested_tensor=False)
        self.to_logits = nn.Linear(attn_layers_dim, num_tokens)

    def forward(self, x, context=None):
        L = x.shape[1]
        h = self.token_embeddings(x) + self.position_embeddings(torch.arange(L, device=x.device))
        mask = nn.Transformer.generate_square_subsequent_mask(L)
        return self.to_logits(self.blocks(h, mask=mask, is_causal=True))


class VQVAETransformerInferer:
    def __call__(self, inputs, vqvae_model, transformer_model, ordering, condition=None, return_latent=False):
        with torch.no_grad():
            latent = vqvae_model.index_quantize(inputs)
        latent_spatial_dim = tuple(latent.shape[1:])
        latent = latent.reshape(latent.shape[0], -1)[:, ordering.get_sequence_ordering()]
        # the BOS token is num_embeddings, so the transformer has num_embeddings + 1 tokens
        latent = F.pad(latent, (1, 0), "constant", vqvae_model.num_embeddings).long()
        seq_len, max_seq_len = latent.shape[1], transformer_model.max_seq_len
        start = int(torch.randint(0, seq_len + 1 - max_seq_len, (1,))) if max_seq_len < seq_len else 0
        prediction = transformer_model(x=latent[:, start:start + max_seq_len], context=condition)
        if return_latent:
            return prediction, latent[:, start:start + max_seq_len], latent_spatial_dim
        return prediction


def make_images(n, vqvae, seed):
    """Token grids from a row-wise Markov chain (each token repeats its left neighbour with
    probability 0.6), rendered through the codebook plus a little noise."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(NUM_EMBEDDINGS, (n, GRID, GRID), generator=g)
    for j in range(1, GRID):
        keep = torch.rand(n, GRID, generator=g) < 0.6
        idx[:, :, j] = torch.where(keep, idx[:, :, j - 1], idx[:, :, j])
    with torch.no_grad():
        return vqvae.decode_indices(idx) + 0.05 * torch.randn(n, 1, GRID * PATCH, GRID * PATCH, generator=g)


torch.manual_seed(0)
vqvae_model = VQVAE()
train_images = make_images(960, vqvae_model, seed=1)
val_images = make_images(192, vqvae_model, seed=2)
train_loader = torch.utils.data.DataLoader(train_images, batch_size=16, shuffle=True)
val_loader = torch.utils.data.DataLoader(val_images, batch_size=32)

ordering = Ordering(dimensions=(1, GRID, GRID))
transformer_model = DecoderOnlyTransformer(num_tokens=NUM_EMBEDDINGS + 1, max_seq_len=GRID * GRID + 1,
                                           attn_layers_dim=32, attn_layers_depth=2, attn_layers_heads=4)
inferer = VQVAETransformerInferer()
optimizer = torch.optim.Adam(params=transformer_model.parameters(), lr=1e-3)
ce_loss = CrossEntropyLoss()

n_epochs, val_interval = 2, 1
vqvae_model.eval()
for epoch in range(n_epochs):
    transformer_model.train()
    epoch_loss = 0.0
    for step, images in enumerate(train_loader):
        optimizer.zero_grad(set_to_none=True)
        logits, quantizations_target, _ = inferer(images, vqvae_model, transformer_model, ordering, return_latent=True)
        logits = logits.transpose(1, 2)
        loss = ce_loss(logits, quantizations_target)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        if step % 20 == 0:
            print(f"epoch {epoch} step {step} ce_loss {epoch_loss / (step + 1):.4f}")
    if (epoch + 1) % val_interval == 0:
        transformer_model.eval()
        val_loss = 0.0
        with torch.no_grad():
            for val_step, images in enumerate(val_loader, start=1):
                logits, quantizations_target, _ = inferer(images, vqvae_model, transformer_model, ordering,
                                                          return_latent=True)
                val_loss += ce_loss(logits.transpose(1, 2), quantizations_target).item()
        print(f"epoch {epoch} val ce_loss {val_loss / val_step:.4f}")

# Next-token negative log-likelihood of the validation latents (what the likelihood-based anomaly
# score relies on); the row-wise chain allows about 1.5 nats per token.
with torch.no_grad():
    nll = 0.0
    for n_batches, images in enumerate(val_loader, start=1):
        logits, seq, _ = inferer(images, vqvae_model, transformer_model, ordering, return_latent=True)
        nll += F.cross_entropy(logits[:, :-1].transpose(1, 2), seq[:, 1:]).item()
print(f"validation next-token NLL: {nll / n_batches:.3f}")
