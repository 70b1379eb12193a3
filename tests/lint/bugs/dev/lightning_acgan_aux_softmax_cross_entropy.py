"""
Shape: Lightning ACGAN module: Generator and Discriminator nn.Modules (discriminator has an adv_layer ending in Sigmoid and an aux_layer ending in Softmax), LightningModule with adversarial_loss()/auxiliary_loss() utility methods, training_step(batch, batch_idx, optimizer_idx) branching on generator/discriminator, configure_optimizers returning two Adams, train_dataloader on MNIST; main() builds Trainer and fits.
Bug: the discriminator's aux_layer ends in nn.Softmax(), and auxiliary_loss() feeds those probabilities to F.cross_entropy, which applies log_softmax again.
Thread: https://github.com/nocotan/pytorch-lightning-gans/issues/9
"""
import os
from argparse import ArgumentParser
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.transforms as transforms
from pytorch_lightning.core import LightningModule
from pytorch_lightning.trainer import Trainer
from torch.utils.data import DataLoader
from torchvision.datasets import MNIST


class Generator(nn.Module):
    def __init__(self, latent_dim, img_shape, n_classes):
        super().__init__()
        self.init_size = img_shape[1] // 4
        self.l1 = nn.Sequential(nn.Linear(latent_dim, 128 * self.init_size ** 2))
        self.label_emb = nn.Embedding(n_classes, latent_dim)
        self.conv_blocks = nn.Sequential(
            nn.BatchNorm2d(128),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(128, 128, 3, stride=1, padding=1),
            nn.BatchNorm2d(128, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(128, 64, 3, stride=1, padding=1),
            nn.BatchNorm2d(64, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(64, img_shape[0], 3, stride=1, padding=1),
            nn.Tanh(),
        )

    def forward(self, z, labels):
        h = self.l1(torch.mul(self.label_emb(labels), z))
        return self.conv_blocks(h.view(h.shape[0], 128, self.init_size, self.init_size))


class Discriminator(nn.Module):
    def __init__(self, img_shape, n_classes):
        super(Discriminator, self).__init__()

        def block(c_in, c_out, bn=True):
            layers = [nn.Conv2d(c_in, c_out, 3, 2, 1), nn.LeakyReLU(0.2, inplace=True), nn.Dropout2d(0.25)]
            if bn:
                layers.append(nn.BatchNorm2d(c_out, 0.8))
            return layers

        self.model = nn.Sequential(*block(img_shape[0], 16, bn=False), *block(16, 32), *block(32, 64), *block(64, 128))
        side = img_shape[1] // 2 ** 4
        self.adv_layer = nn.Sequential(nn.Linear(128 * side ** 2, 1), nn.Sigmoid())
        self.aux_layer = nn.Sequential(nn.Linear(128 * side ** 2, n_classes), nn.Softmax())

    def forward(self, img):
        feats = self.model(img).view(img.shape[0], -1)
        return self.adv_layer(feats), self.aux_layer(feats)


class ACGAN(LightningModule):
    def __init__(self, latent_dim=100, n_classes=10, lr=0.0002, b1=0.5, b2=0.999, batch_size=64, **kwargs):
        super().__init__()
        self.save_hyperparameters()
        self.latent_dim = latent_dim
        self.n_classes = n_classes
        self.lr = lr
        self.b1 = b1
        self.b2 = b2
        self.batch_size = batch_size
        img_shape = (1, 32, 32)
        self.generator = Generator(latent_dim=latent_dim, img_shape=img_shape, n_classes=n_classes)
        self.discriminator = Discriminator(img_shape=img_shape, n_classes=n_classes)

    def forward(self, z, labels):
        return self.generator(z, labels)

    def adversarial_loss(self, y_hat, y):
        return F.binary_cross_entropy(y_hat, y)

    def auxiliary_loss(self, y_hat, y):
        return F.cross_entropy(y_hat, y)

    def training_step(self, batch, batch_idx, optimizer_idx):
        imgs, labels = batch
        z = torch.randn(imgs.shape[0], self.latent_dim).type_as(imgs)
        gen_labels = torch.LongTensor(np.random.randint(0, self.n_classes, self.batch_size))

        if optimizer_idx == 0:
            real_target = torch.ones(imgs.size(0), 1).type_as(imgs)
            validity, cls_probs = self.discriminator(self(z, gen_labels))
            g_loss = 0.5 * self.adversarial_loss(validity, real_target) + self.auxiliary_loss(cls_probs, gen_labels)
            return OrderedDict({"loss": g_loss, "log": {"g_loss": g_loss}})

        if optimizer_idx == 1:
            real_target = torch.ones(imgs.size(0), 1).type_as(imgs)
            fakes = self(z, gen_labels)
            validity, cls_probs = self.discriminator(imgs)
            real_loss = 0.5 * self.adversarial_loss(validity, real_target) + self.auxiliary_loss(cls_probs, labels)
            fake_target = torch.zeros(imgs.size(0), 1).type_as(imgs)
            fake_validity, fake_cls = self.discriminator(fakes)
            fake_loss = 0.5 * self.adversarial_loss(fake_validity, fake_target) + self.auxiliary_loss(fake_cls, gen_labels)
            d_loss = (real_loss + fake_loss) / 2
            return OrderedDict({"loss": d_loss, "log": {"d_loss": d_loss}})

    def configure_optimizers(self):
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=self.lr, betas=(self.b1, self.b2))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=self.lr, betas=(self.b1, self.b2))
        return [opt_g, opt_d], []

    def train_dataloader(self):
        tf = transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor(), transforms.Normalize([0.5], [0.5])])
        data = MNIST(os.getcwd(), train=True, download=True, transform=tf)
        return DataLoader(data, batch_size=self.batch_size)


def main(args):
    model = ACGAN(**vars(args))
    trainer = Trainer(gpus=args.gpus)
    trainer.fit(model)


if __name__ == "__main__":
    parser = ArgumentParser()
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--latent_dim", type=int, default=100)
    main(parser.parse_args())
