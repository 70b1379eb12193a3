"""A progressive-GAN-style WGAN-GP trained at a fixed 8 x 8 resolution: the Discriminator ends with a
Minibatch_std layer that appends the mean of torch.std(x, dim=0) (the per-feature std over the batch)
as an extra channel, and a script-level loop over epochs and DataLoader batches updates D (Wasserstein
loss plus gradient penalty) and then G, both with Adam(betas=(0.0, 0.99)). The dataset holds 241 images
and the batch size is 16 without drop_last, so the last batch of every epoch holds one image; the std
over a batch of one is NaN, D's loss and gradients are NaN, and from the end of the first epoch on every
weight of D and G is NaN while the loop keeps running.

Thread: https://github.com/ziwei-jiang/PGGAN-PyTorch/issues/1
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class EqualizedLR_Conv2d(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size, padding=0):
        super().__init__()
        self.padding = padding
        self.scale = np.sqrt(2 / (in_ch * kernel_size * kernel_size))
        self.weight = nn.Parameter(torch.randn(out_ch, in_ch, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_ch))

    def forward(self, x):
        return F.conv2d(x, self.weight * self.scale, self.bias, padding=self.padding)


class PixelNorm(nn.Module):
    def forward(self, a):
        return a / torch.sqrt((a ** 2).mean(dim=1, keepdim=True) + 1e-8)


class Minibatch_std(nn.Module):
    def forward(self, x):
        size = list(x.size())
        size[1] = 1
        std = torch.std(x, dim=0)
        return torch.cat((x, std.mean().repeat(size)), dim=1)


class Generator(nn.Module):
    def __init__(self, latent_size=64, ch=32):
        super().__init__()
        self.net = nn.Sequential(
            EqualizedLR_Conv2d(latent_size, ch, 4, padding=3), nn.LeakyReLU(0.2), PixelNorm(),
            nn.Upsample(scale_factor=2), EqualizedLR_Conv2d(ch, ch, 3, padding=1), nn.LeakyReLU(0.2), PixelNorm(),
            EqualizedLR_Conv2d(ch, 3, 1),
        )

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.from_rgb = EqualizedLR_Conv2d(3, ch, 1)
        self.block = nn.Sequential(EqualizedLR_Conv2d(ch, ch, 3, padding=1), nn.LeakyReLU(0.2), nn.AvgPool2d(2))
        self.final = nn.Sequential(
            Minibatch_std(), EqualizedLR_Conv2d(ch + 1, ch, 3, padding=1), nn.LeakyReLU(0.2),
            EqualizedLR_Conv2d(ch, ch, 4), nn.LeakyReLU(0.2), EqualizedLR_Conv2d(ch, 1, 1),
        )

    def forward(self, x):
        x = F.leaky_relu(self.from_rgb(x), 0.2)
        return self.final(self.block(x)).view(-1)


def blob_images(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    centers = torch.rand(n, 2, generator=g) * 4 + 2
    colors = torch.rand(n, 3, generator=g) * 2 - 1
    d2 = (yy - centers[:, 0, None, None]) ** 2 + (xx - centers[:, 1, None, None]) ** 2
    return colors[:, :, None, None] * torch.exp(-d2 / 3.0)[:, None]


def main():
    torch.manual_seed(0)
    latent_size, batch_size, lr, lambd, epochs = 64, 16, 1e-4, 10, 5
    dataset = TensorDataset(blob_images(241))
    data_loader = DataLoader(dataset, batch_size=batch_size, shuffle=True,
                             generator=torch.Generator().manual_seed(0))
    D_net, G_net = Discriminator(), Generator(latent_size)
    D_optimizer = torch.optim.Adam(D_net.parameters(), lr=lr, betas=(0.0, 0.99))
    G_optimizer = torch.optim.Adam(G_net.parameters(), lr=lr, betas=(0.0, 0.99))

    for epoch in range(1, epochs + 1):
        G_net.train()
        D_epoch_loss = G_epoch_loss = 0.0
        for i, samples in enumerate(data_loader):
            samples = samples[0]
            D_net.zero_grad()
            noise = torch.randn(samples.size(0), latent_size, 1, 1)
            fake = G_net(noise)
            fake_out = D_net(fake.detach())
            real_out = D_net(samples)

            eps = torch.rand(samples.size(0), 1, 1, 1).expand_as(samples)
            x_hat = (eps * samples + (1 - eps) * fake.detach()).requires_grad_(True)
            grad = torch.autograd.grad(outputs=D_net(x_hat).sum(), inputs=x_hat, create_graph=True)[0]
            grad_norm = grad.view(samples.size(0), -1).norm(2, dim=1)
            gradient_penalty = lambd * ((grad_norm - 1) ** 2).mean()
            D_loss = fake_out.mean() - real_out.mean() + gradient_penalty
            D_loss.backward()
            D_optimizer.step()

            G_net.zero_grad()
            G_loss = -D_net(fake).mean()
            G_loss.backward()
            G_optimizer.step()

            D_epoch_loss += D_loss.item()
            G_epoch_loss += G_loss.item()
            if i % 5 == 0:
                print(f"epoch {epoch} iteration {i} D_loss {D_loss.item():.3f} G_loss {G_loss.item():.3f} "
                      f"gp {gradient_penalty.item():.2f}")
        print(f"epoch {epoch}/{epochs} mean D_loss {D_epoch_loss / len(data_loader):.3f} "
              f"mean G_loss {G_epoch_loss / len(data_loader):.3f}")


if __name__ == "__main__":
    main()
