"""A code-soup-style vanilla GAN: Generator and Discriminator are MLP modules that each build their
own Adam optimizer in __init__ (self.optimizer), and a GAN class holds both plus a BCELoss and
exposes step(data), called once per DataLoader batch, which trains D on a real and a detached fake
batch and then trains G through D with real labels. step() never clears the discriminator's
gradients: there is no self.discriminator.zero_grad() before D's backward calls, so D's .grad keeps
every gradient from every earlier batch, including the generator-loss gradients that reach D's
weights when G back-propagates through it (which push D to call fakes real). Each
discriminator.optimizer.step() therefore applies a running sum over the whole run instead of this
batch's gradient; D stops tracking the generator and G learns against a meaningless critic.

Thread: https://github.com/Adversarial-Deep-Learning/code-soup/issues/69
"""
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Generator(nn.Module):
    def __init__(self, image_size, channels, latent_dims, lr):
        super().__init__()
        self.image_size, self.channels, self.latent_dims = image_size, channels, latent_dims
        self.main = nn.Sequential(
            nn.Linear(latent_dims, 64), nn.LeakyReLU(0.2),
            nn.Linear(64, 128), nn.LeakyReLU(0.2),
            nn.Linear(128, image_size * image_size * channels), nn.Tanh(),
        )
        self.optimizer = optim.Adam(self.parameters(), lr=lr)

    def forward(self, x):
        return self.main(x).view(-1, self.channels, self.image_size, self.image_size)


class Discriminator(nn.Module):
    def __init__(self, image_size, channels, lr):
        super().__init__()
        self.image_size, self.channels = image_size, channels
        self.main = nn.Sequential(
            nn.Linear(image_size * image_size * channels, 128), nn.LeakyReLU(0.2), nn.Dropout(0.3),
            nn.Linear(128, 64), nn.LeakyReLU(0.2), nn.Dropout(0.3),
            nn.Linear(64, 1), nn.Sigmoid(),
        )
        self.optimizer = optim.Adam(self.parameters(), lr=lr)

    def forward(self, x):
        return self.main(x.view(-1, self.image_size * self.image_size * self.channels))


class GAN:
    def __init__(self, image_size, channels, latent_dims, device, lr):
        self.latent_dims = latent_dims
        self.device = device
        self.generator = Generator(image_size, channels, latent_dims, lr).to(device)
        self.discriminator = Discriminator(image_size, channels, lr).to(device)
        self.criterion = nn.BCELoss()
        self.real_label, self.fake_label = 1.0, 0.0

    def step(self, data):
        real_image, _ = data
        real_image = real_image.to(self.device)
        batch_size = real_image.shape[0]
        label = torch.full((batch_size,), self.real_label, dtype=torch.float, device=self.device)
        # D on the real batch
        output = self.discriminator(real_image).view(-1)
        errD_real = self.criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()
        # D on a fake batch
        noise = torch.randn(batch_size, self.latent_dims, device=self.device)
        fake = self.generator(noise)
        label.fill_(self.fake_label)
        output = self.discriminator(fake.detach()).view(-1)
        errD_fake = self.criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        self.discriminator.optimizer.step()

        # G through the updated D
        self.generator.zero_grad()
        label.fill_(self.real_label)
        output = self.discriminator(fake).view(-1)
        errG = self.criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        self.generator.optimizer.step()
        return D_x, D_G_z1, errD, D_G_z2


def make_digits(n, size=8, seed=0):
    """Tiny 'digit' images in [-1, 1]: one bright horizontal or vertical bar on a dark background."""
    g = torch.Generator().manual_seed(seed)
    imgs = -torch.ones(n, 1, size, size)
    pos = torch.randint(1, size - 1, (n,), generator=g)
    vertical = torch.rand(n, generator=g) < 0.5
    for i in range(n):
        if vertical[i]:
            imgs[i, 0, :, pos[i]] = 1.0
        else:
            imgs[i, 0, pos[i], :] = 1.0
    imgs = imgs + 0.05 * torch.randn(imgs.shape, generator=g)
    return imgs.clamp(-1, 1), vertical.long()


@torch.no_grad()
def sample_mean_pixel(generator, latent_dims, n=512):
    g = torch.Generator().manual_seed(99)
    return generator(torch.randn(n, latent_dims, generator=g)).mean().item()


def main():
    torch.manual_seed(0)
    device = torch.device("cpu")
    images, labels = make_digits(2048)
    loader = DataLoader(TensorDataset(images, labels), batch_size=64, shuffle=True,
                        generator=torch.Generator().manual_seed(1))
    model = GAN(image_size=8, channels=1, latent_dims=16, device=device, lr=1e-3)
    epochs = 16
    for epoch in range(epochs):
        for i, data in enumerate(loader):
            D_x, D_G_z1, errD, D_G_z2 = model.step(data)
        mean_pix = sample_mean_pixel(model.generator, model.latent_dims)
        if epoch % 2 == 1 or epoch == 0:
            print(f"[{epoch + 1}/{epochs}] Loss_D {errD.item():.4f}  D(x) {D_x:.3f}  D(G(z)) {D_G_z1:.3f} / {D_G_z2:.3f}  "
                  f"sample mean pixel {mean_pix:+.3f} (real ~-0.75)")


if __name__ == "__main__":
    main()
