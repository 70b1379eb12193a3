"""The discrete VAE of a DALL-E reimplementation: a strided conv encoder ending in a 1x1 conv to
num_tokens channels gives logits of shape (batch, num_tokens, h, w); a gumbel softmax turns them into
soft one-hot codes that are mixed with an nn.Embedding codebook through an einsum
'b n h w, n d -> b d h w' and decoded by transposed convs; forward(img, return_recon_loss=True) returns
the MSE reconstruction loss, and get_codebook_indices() takes the argmax over dim 1 to hand image tokens
to the transformer. The model is trained on image batches from a DataLoader with Adam. The gumbel
softmax is called without dim, so it normalises over the last axis, the width of the token map,
instead of over the num_tokens codebook axis: each code vector is a mix of codebook rows whose weights
sum to 1 along an image row, so training learns codes that the argmax tokens do not reproduce.

Thread: https://github.com/lucidrains/DALLE-pytorch/pull/12
"""
import torch
import torch.nn.functional as F
from torch import einsum, nn
from torch.utils.data import DataLoader, TensorDataset


class DiscreteVAE(nn.Module):
    def __init__(self, image_size=16, num_tokens=32, codebook_dim=32, hidden_dim=32, num_layers=2, channels=1):
        super().__init__()
        self.codebook = nn.Embedding(num_tokens, codebook_dim)
        enc, dec = [], []
        for i in range(num_layers):
            enc += [nn.Conv2d(channels if i == 0 else hidden_dim, hidden_dim, 4, stride=2, padding=1), nn.ReLU()]
            dec += [nn.ConvTranspose2d(codebook_dim if i == 0 else hidden_dim, hidden_dim, 4, stride=2, padding=1),
                    nn.ReLU()]
        enc.append(nn.Conv2d(hidden_dim, num_tokens, 1))
        dec.append(nn.Conv2d(hidden_dim, channels, 1))
        self.encoder = nn.Sequential(*enc)
        self.decoder = nn.Sequential(*dec)

    @torch.no_grad()
    def get_codebook_indices(self, images):
        logits = self.forward(images, return_logits=True)
        return logits.argmax(dim=1).flatten(1)

    def decode(self, img_seq):
        embeds = self.codebook(img_seq)  # (b, h*w, d)
        b, n, d = embeds.shape
        side = int(n ** 0.5)
        embeds = embeds.transpose(1, 2).reshape(b, d, side, side)
        return self.decoder(embeds)

    def forward(self, img, return_recon_loss=False, return_logits=False):
        logits = self.encoder(img)
        if return_logits:
            return logits
        soft_one_hot = F.gumbel_softmax(logits, tau=1.0)  # default dim=-1: the width of the token map
        sampled = einsum('b n h w, n d -> b d h w', soft_one_hot, self.codebook.weight)
        out = self.decoder(sampled)
        if not return_recon_loss:
            return out
        return F.mse_loss(img, out)


def make_images(n, seed):
    """Images made of 4x4 tiles, each tile one of a few fixed patterns: a codebook can name each tile."""
    g = torch.Generator().manual_seed(seed)
    patterns = torch.randn(6, 4, 4, generator=torch.Generator().manual_seed(3))
    ids = torch.randint(0, 6, (n, 4, 4), generator=g)
    tiles = patterns[ids]  # (n, 4, 4, 4, 4)
    img = tiles.permute(0, 1, 3, 2, 4).reshape(n, 1, 16, 16)
    return img + 0.05 * torch.randn(img.shape, generator=g)


def main():
    torch.manual_seed(0)
    images = make_images(1024, seed=0)
    loader = DataLoader(TensorDataset(images), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    vae = DiscreteVAE()
    opt = torch.optim.Adam(vae.parameters(), lr=2e-3)
    step = 0
    for epoch in range(3):
        for (batch,) in loader:
            loss = vae(batch, return_recon_loss=True)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} recon loss {loss.item():.4f}")
    test = make_images(128, seed=1)
    with torch.no_grad():
        tokens = vae.get_codebook_indices(test)
        hard_recon = F.mse_loss(vae.decode(tokens), test).item()
    print(f"tokens used {tokens.unique().numel()}, reconstruction from argmax tokens mse {hard_recon:.4f}")


if __name__ == "__main__":
    main()
