"""A Lightning-style image-to-reverb GAN: an image encoder, a spectrogram generator and a
conditional discriminator, each with its own Adam optimizer returned by configure_optimizers, and
a training_step(batch, batch_idx, optimizer_idx) that trains the encoder/generator for
optimizer_idx 0 and 1 and the discriminator for optimizer_idx 2 (only while its loss is above a
threshold). In the generator branch the fake spectrogram is passed to the discriminator through
fake_spec.detach(), the same call the discriminator branch uses. The adversarial term G_loss1 is
therefore a constant with respect to the generator and encoder: it is logged and added to G_loss,
but backward sends nothing through it, so the generator is trained by the L1 term alone and never
learns to fool the discriminator, which keeps winning.

Thread: https://github.com/nikhilsinghmus/image2reverb/issues/37
"""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

G_LR = 4e-4
D_LR = 2e-4
ENC_LR = 1e-4
ADAM_BETA = (0.0, 0.99)
LAMBDA = 100


class Encoder(nn.Module):
    """Stand-in for the scene encoder: image -> feature map of shape (B, C, 1, 1)."""

    def __init__(self, ch=16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, ch, 3, 2, 1),
                                 nn.ReLU(), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return self.net(x), x


class Generator(nn.Module):
    def __init__(self, latent=32):
        super().__init__()
        self.net = nn.Sequential(nn.ConvTranspose2d(latent, 32, 4, 1, 0), nn.ReLU(),
                                 nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(),
                                 nn.ConvTranspose2d(16, 1, 4, 2, 1), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 16, 3, 2, 1), nn.LeakyReLU(0.2),
                                  nn.Conv2d(16, 32, 3, 2, 1), nn.LeakyReLU(0.2))
        self.out = nn.Conv2d(32 + ch, 1, 4)

    def forward(self, spec, f):
        h = self.conv(spec)
        return self.out(torch.cat((h, f.expand(-1, -1, h.shape[2], h.shape[3])), 1))


class Image2Reverb(nn.Module):
    def __init__(self, latent_dimension=32, d_threshold=0.2):
        super().__init__()
        self._latent_dimension = latent_dimension
        self._d_threshold = d_threshold
        self.enc = Encoder()
        self.g = Generator(latent_dimension)
        self.d = Discriminator()
        self.logged = {}

    def log(self, name, value):
        self.logged[name] = float(value.detach()) if torch.is_tensor(value) else float(value)

    def _latent(self, f):
        noise = torch.randn(f.shape[0], self._latent_dimension - f.shape[1], f.shape[2], f.shape[3])
        return torch.cat((f, noise), 1)

    def training_step(self, batch, batch_idx, optimizer_idx):
        spec, label = batch
        f = self.enc(label)[0]
        fake_spec = self.g(self._latent(f))
        d_fake = self.d(fake_spec.detach(), f)
        d_real = self.d(spec, f)

        if optimizer_idx == 0 or optimizer_idx == 1:
            d_fake2 = self.d(fake_spec.detach(), f)
            G_loss1 = F.mse_loss(d_fake2, torch.ones(d_fake2.shape))
            G_loss2 = F.l1_loss(fake_spec, spec)
            G_loss = G_loss1 + LAMBDA * G_loss2
            self.log("G_adv", G_loss1)
            self.log("G_l1", G_loss2)
            return G_loss
        l_fakeD = F.mse_loss(d_fake, torch.zeros(d_fake.shape))
        l_realD = F.mse_loss(d_real, torch.ones(d_real.shape))
        D_loss = l_realD + l_fakeD
        self.log("D", D_loss)
        if D_loss <= self._d_threshold:
            return None
        return D_loss

    def configure_optimizers(self):
        g_optim = torch.optim.Adam(self.g.parameters(), lr=G_LR, betas=ADAM_BETA)
        d_optim = torch.optim.Adam(self.d.parameters(), lr=D_LR, betas=ADAM_BETA)
        enc_optim = torch.optim.Adam(self.enc.parameters(), lr=ENC_LR, betas=ADAM_BETA)
        return [enc_optim, g_optim, d_optim]


def fit(module, loader, max_epochs):
    """Minimal stand-in for the Lightning loop with several optimizers."""
    optimizers = module.configure_optimizers()
    step = 0
    for epoch in range(max_epochs):
        for batch_idx, batch in enumerate(loader):
            for optimizer_idx, opt in enumerate(optimizers):
                loss = module.training_step(batch, batch_idx, optimizer_idx)
                if loss is None:
                    continue
                opt.zero_grad()
                loss.backward()
                opt.step()
            step += 1
        lg = module.logged
        print(f"epoch {epoch} step {step}: G_adv {lg['G_adv']:.3f} G_l1 {lg['G_l1']:.4f} "
              f"D {lg['D']:.3f}")


def make_rooms(n, seed=0):
    """Images whose brightness sets the decay time of an impulse-response-like spectrogram."""
    g = torch.Generator().manual_seed(seed)
    size = torch.rand(n, generator=g)
    img = size.view(n, 1, 1, 1) * torch.ones(n, 3, 16, 16) + 0.1 * torch.randn(n, 3, 16, 16, generator=g)
    t = torch.linspace(0, 1, 16).view(1, 1, 16)
    freq = torch.linspace(0, 1, 16).view(1, 16, 1)
    decay = torch.exp(-t * (2 + 8 * (1 - size.view(n, 1, 1))) * (1 + freq))
    texture = 0.4 * torch.randn(n, 16, 16, generator=g) * decay
    spec = (2 * decay - 1 + texture).clamp(-1, 1).unsqueeze(1)
    return TensorDataset(spec, img)


def main():
    torch.manual_seed(0)
    loader = DataLoader(make_rooms(512), batch_size=32, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    model = Image2Reverb()
    fit(model, loader, max_epochs=10)


if __name__ == "__main__":
    main()
