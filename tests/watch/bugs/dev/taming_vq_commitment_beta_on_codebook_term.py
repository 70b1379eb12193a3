"""A Lightning-style VQGAN-like first stage: a VQModel module with encoder, quant_conv, a
VectorQuantizer(n_e, e_dim, beta=0.25), post_quant_conv and decoder; forward returns (dec, qloss);
training_step calls a separate reconstruction loss module (L1 + codebook_weight * qloss) and returns
the loss; configure_optimizers returns one Adam over all trainable parts. A small fit() loop of ours
stands in for the Lightning Trainer. The quantizer computes its loss as
mean((z_q.detach() - z)**2) + beta * mean((z_q - z.detach())**2): beta multiplies the codebook
term (the one that moves the embeddings) instead of the commitment term (the one that pulls the
encoder output), so the encoder's commitment is weighted 1 instead of 0.25, four times the intended
pull toward the current codes, while the codebook learns at a quarter of its intended rate.

Thread: https://github.com/CompVis/taming-transformers/pull/58
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class VectorQuantizer(nn.Module):
    def __init__(self, n_e, e_dim, beta):
        super().__init__()
        self.n_e, self.e_dim, self.beta = n_e, e_dim, beta
        self.embedding = nn.Embedding(n_e, e_dim)
        self.embedding.weight.data.uniform_(-1.0 / n_e, 1.0 / n_e)

    def forward(self, z):
        z = z.permute(0, 2, 3, 1).contiguous()
        z_flat = z.view(-1, self.e_dim)
        d = (z_flat ** 2).sum(1, keepdim=True) + (self.embedding.weight ** 2).sum(1) \
            - 2 * z_flat @ self.embedding.weight.t()
        idx = d.argmin(1)
        z_q = self.embedding(idx).view(z.shape)
        loss = torch.mean((z_q.detach() - z) ** 2) + self.beta * torch.mean((z_q - z.detach()) ** 2)
        z_q = z + (z_q - z).detach()
        perplexity_probs = F.one_hot(idx, self.n_e).float().mean(0)
        perplexity = torch.exp(-(perplexity_probs * torch.log(perplexity_probs + 1e-10)).sum())
        return z_q.permute(0, 3, 1, 2).contiguous(), loss, (perplexity, idx)


class ReconstructionLoss(nn.Module):
    def __init__(self, codebook_weight=1.0):
        super().__init__()
        self.codebook_weight = codebook_weight

    def forward(self, codebook_loss, inputs, reconstructions, split="train"):
        rec = torch.abs(inputs - reconstructions).mean()
        loss = rec + self.codebook_weight * codebook_loss.mean()
        return loss, {f"{split}/rec_loss": rec.item(), f"{split}/quant_loss": codebook_loss.item()}


class VQModel(nn.Module):
    def __init__(self, n_embed=64, embed_dim=8, z_channels=16, learning_rate=1e-3):
        super().__init__()
        self.learning_rate = learning_rate
        self.encoder = nn.Sequential(nn.Conv2d(3, 32, 4, 2, 1), nn.ReLU(),
                                     nn.Conv2d(32, z_channels, 4, 2, 1))
        self.quant_conv = nn.Conv2d(z_channels, embed_dim, 1)
        self.quantize = VectorQuantizer(n_embed, embed_dim, beta=0.25)
        self.post_quant_conv = nn.Conv2d(embed_dim, z_channels, 1)
        self.decoder = nn.Sequential(nn.ConvTranspose2d(z_channels, 32, 4, 2, 1), nn.ReLU(),
                                     nn.ConvTranspose2d(32, 3, 4, 2, 1))
        self.loss = ReconstructionLoss()

    def encode(self, x):
        quant, emb_loss, info = self.quantize(self.quant_conv(self.encoder(x)))
        return quant, emb_loss, info

    def decode(self, quant):
        return self.decoder(self.post_quant_conv(quant))

    def forward(self, x):
        quant, diff, _ = self.encode(x)
        return self.decode(quant), diff

    def training_step(self, batch, batch_idx):
        x = batch[0]
        xrec, qloss = self(x)
        aeloss, log = self.loss(qloss, x, xrec, split="train")
        if batch_idx % 10 == 0:
            print({k: round(v, 4) for k, v in log.items()})
        return aeloss

    def validation_step(self, batch, batch_idx):
        x = batch[0]
        xrec, qloss = self(x)
        _, log = self.loss(qloss, x, xrec, split="val")
        return log

    def configure_optimizers(self):
        params = (list(self.encoder.parameters()) + list(self.decoder.parameters())
                  + list(self.quantize.parameters()) + list(self.quant_conv.parameters())
                  + list(self.post_quant_conv.parameters()))
        return torch.optim.Adam(params, lr=self.learning_rate, betas=(0.5, 0.9))


def fit(module, train_loader, val_loader, max_epochs):
    opt = module.configure_optimizers()
    for epoch in range(max_epochs):
        module.train()
        for batch_idx, batch in enumerate(train_loader):
            loss = module.training_step(batch, batch_idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
        module.eval()
        with torch.no_grad():
            logs = [module.validation_step(b, i) for i, b in enumerate(val_loader)]
        print(f"epoch {epoch}: val/rec_loss {sum(l['val/rec_loss'] for l in logs) / len(logs):.4f}")


def make_images(n, seed):
    """Coloured discs and stripes on 3x16x16 images scaled to [-1, 1]."""
    g = torch.Generator().manual_seed(seed)
    c = torch.arange(16).float()
    cy, cx = torch.rand(n, 1, 1, generator=g) * 10 + 3, torch.rand(n, 1, 1, generator=g) * 10 + 3
    disc = (((c.view(1, 16, 1) - cy) ** 2 + (c.view(1, 1, 16) - cx) ** 2) < 12).float().unsqueeze(1)
    stripes = (torch.sin(c.view(1, 1, 1, 16) * torch.rand(n, 1, 1, 1, generator=g) * 2) > 0).float()
    img = disc * torch.rand(n, 3, 1, 1, generator=g) + 0.3 * stripes * torch.rand(n, 3, 1, 1, generator=g)
    return img.clamp(0, 1) * 2 - 1


if __name__ == "__main__":
    torch.manual_seed(0)
    train_loader = DataLoader(TensorDataset(make_images(1024, 0)), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(TensorDataset(make_images(128, 1)), batch_size=64)
    model = VQModel()
    fit(model, train_loader, val_loader, max_epochs=3)
