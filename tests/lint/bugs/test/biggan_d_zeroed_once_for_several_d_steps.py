"""
Shape: Generator and Discriminator nn.Modules each build their own Adam as self.optim in __init__; GAN_training_function(G, D, G_D_pair, z_buf, y_buf, g_ema, state, C) returns a train(x, y) closure that zeroes both optimizers, runs num_D_steps discriminator steps (each with an inner gradient-accumulation loop dividing the loss, then D.optim.step()), then the generator's accumulation loop and G.optim.step(); run() calls train(x, y) every iteration.
Bug: D.optim.zero_grad() is called once at the top of train() but D.optim.step() runs once per D step, so with num_D_steps > 1 each step reuses the previous steps' gradients.
Thread: https://github.com/ajbrock/BigGAN-PyTorch/issues/25
"""
import torch
import torch.nn as nn
import torch.optim as optim

import losses
import utils


class Generator(nn.Module):
    def __init__(self, dim_z=128, n_classes=1000, G_lr=5e-5, G_B1=0.0, G_B2=0.999, adam_eps=1e-8):
        super().__init__()
        self.dim_z = dim_z
        self.shared = nn.Embedding(n_classes, 128)
        self.body = nn.Sequential(nn.Linear(dim_z + 128, 4 * 4 * 256), nn.ReLU())
        self.optim = optim.Adam(params=self.parameters(), lr=G_lr, betas=(G_B1, G_B2), weight_decay=0,
                                eps=adam_eps)

    def forward(self, z, y):
        return self.body(torch.cat([z, self.shared(y)], 1))


class Discriminator(nn.Module):
    def __init__(self, n_classes=1000, D_lr=2e-4, D_B1=0.0, D_B2=0.999, adam_eps=1e-8):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4 * 4 * 256, 256), nn.ReLU(), nn.Linear(256, 1))
        self.embed = nn.Embedding(n_classes, 256)
        self.optim = optim.Adam(params=self.parameters(), lr=D_lr, betas=(D_B1, D_B2), weight_decay=0,
                                eps=adam_eps)

    def forward(self, x, y):
        return self.body(x)


def GAN_training_function(G, D, G_D_pair, z_buf, y_buf, g_ema, state, C):
    def train(x, y):
        G.optim.zero_grad()
        D.optim.zero_grad()
        bs = C['batch_size']
        x, y = torch.split(x, bs), torch.split(y, bs)
        chunk = 0

        if C['toggle_grads']:
            utils.toggle_grad(D, True)
            utils.toggle_grad(G, False)

        for d_step in range(C['num_D_steps']):
            for acc_i in range(C['num_D_accumulations']):
                z_buf.sample_()
                y_buf.sample_()
                d_out_fake, d_out_real = G_D_pair(z_buf[:C['batch_size']], y_buf[:C['batch_size']],
                                    x[chunk], y[chunk], train_G=False, split_D=C['split_D'])
                d_loss_real, d_loss_fake = losses.discriminator_loss(d_out_fake, d_out_real)
                d_loss = (d_loss_real + d_loss_fake) / float(C['num_D_accumulations'])
                d_loss.backward()
                chunk += 1
            if C['D_ortho'] > 0.0:
                utils.ortho(D, C['D_ortho'])
            D.optim.step()

        if C['toggle_grads']:
            utils.toggle_grad(D, False)
            utils.toggle_grad(G, True)

        G.optim.zero_grad()
        for acc_i in range(C['num_G_accumulations']):
            z_buf.sample_()
            y_buf.sample_()
            d_out_fake = G_D_pair(z_buf, y_buf, train_G=True, split_D=C['split_D'])
            g_loss = losses.generator_loss(d_out_fake) / float(C['num_G_accumulations'])
            g_loss.backward()
        if C['G_ortho'] > 0.0:
            utils.ortho(G, C['G_ortho'], blacklist=[p for p in G.shared.parameters()])
        G.optim.step()

        if C['g_ema']:
            g_ema.update(state['itr'])
        return {'g_loss': float(g_loss.item()), 'd_loss_real': float(d_loss_real.item()),
                'd_loss_fake': d_loss_fake.item()}
    return train


def run(C, G, D, G_D_pair, g_ema, loader_list, state, device):
    z_buf, y_buf = utils.prepare_z_y(max(C['G_batch_size'], C['batch_size']), G.dim_z,
                               C['n_classes'], device=device)
    train = GAN_training_function(G, D, G_D_pair, z_buf, y_buf, g_ema, state, C)
    for epoch in range(state['epoch'], C['num_epochs']):
        for i, (x, y) in enumerate(loader_list[0]):
            state['itr'] += 1
            G.train()
            D.train()
            x = x.to(device)
            y = y.to(device)
            stats = train(x, y)
