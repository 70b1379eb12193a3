"""An unpaired CycleGAN-Turbo-style trainer: one shared encoder / core / decoder generator steered by
a fixed direction embedding (a2b or b2a), two discriminators whose forward takes for_G / for_real
flags and returns a per-sample loss, a fixed feature distance standing in for LPIPS, and an
Accelerate-like wrapper (accumulate, backward, clip_grad_norm_). Each batch runs three generator
objectives (cycle, GAN, identity), each followed by clip, optimizer_gen.step(),
lr_scheduler_gen.step() and optimizer_gen.zero_grad(), then a discriminator update on fake and one
on real images with optimizer_disc. The generator's GAN loss is back-propagated through
net_disc_a / net_disc_b, whose parameters still require grad, and only optimizer_gen is cleared
afterwards: those gradients, which push the discriminators to call the fakes real, stay in .grad
and are applied together with the discriminators' own fake-image loss at the next
optimizer_disc.step().

Thread: https://github.com/GaParmar/img2img-turbo/pull/62
"""
import contextlib

import torch
import torch.nn.functional as F
from torch import nn


class MiniAccelerator:
    sync_gradients = True

    def accumulate(self, *models):
        return contextlib.nullcontext()

    def backward(self, loss, retain_graph=False):
        loss.backward(retain_graph=retain_graph)

    def clip_grad_norm_(self, params, max_norm):
        return torch.nn.utils.clip_grad_norm_(params, max_norm)


class Core(nn.Module):
    def __init__(self, ch=16, emb_dim=8):
        super().__init__()
        self.film = nn.Linear(emb_dim, 2 * ch)
        self.body = nn.Sequential(nn.Conv2d(ch, ch, 3, 1, 1), nn.SiLU(), nn.Conv2d(ch, ch, 3, 1, 1))

    def forward(self, z, emb):
        scale, shift = self.film(emb).chunk(2, dim=1)
        return z + self.body(z * (1 + scale[..., None, None]) + shift[..., None, None])


class Discriminator(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, ch, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(ch, 2 * ch, 4, 2, 1),
                                 nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(2 * ch * 4 * 4, 1))

    def forward(self, x, for_G=False, for_real=False):
        logits = self.net(x)
        target = torch.ones_like(logits) if (for_G or for_real) else torch.zeros_like(logits)
        return F.binary_cross_entropy_with_logits(logits, target, reduction="none")


def forward_with_networks(x, direction, vae_enc, unet, vae_dec, emb):
    return torch.tanh(vae_dec(unet(vae_enc(x), emb)))


def unpaired_batches(n_batches, bsz=4, size=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.arange(size).float()
    out = []
    for _ in range(n_batches):
        fa = 0.4 + 0.6 * torch.rand(bsz, 3, 1, 1, generator=g)
        fb = 0.4 + 0.6 * torch.rand(bsz, 3, 1, 1, generator=g)
        img_a = torch.sin(fa * idx.view(1, 1, size, 1)).expand(bsz, 3, size, size)  # horizontal stripes
        img_b = torch.sin(fb * idx.view(1, 1, 1, size)).expand(bsz, 3, size, size)  # vertical stripes
        out.append({"pixel_values_src": img_a.contiguous(), "pixel_values_tgt": img_b.contiguous()})
    return out


def main(args):
    torch.manual_seed(0)
    accelerator = MiniAccelerator()
    vae_enc, unet, vae_dec = nn.Conv2d(3, 16, 3, 1, 1), Core(), nn.Conv2d(16, 3, 3, 1, 1)
    net_disc_a, net_disc_b = Discriminator(), Discriminator()
    torch.manual_seed(42)
    net_lpips = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 2, 1)).requires_grad_(False)
    crit_cycle, crit_idt = nn.L1Loss(), nn.L1Loss()
    fixed_a2b_emb_base, fixed_b2a_emb_base = torch.randn(1, 8), torch.randn(1, 8)
    train_dataloader = unpaired_batches(32)

    params_gen = list(vae_enc.parameters()) + list(unet.parameters()) + list(vae_dec.parameters())
    optimizer_gen = torch.optim.AdamW(params_gen, lr=args["learning_rate"], betas=(0.9, 0.999), weight_decay=1e-2)
    params_disc = list(net_disc_a.parameters()) + list(net_disc_b.parameters())
    optimizer_disc = torch.optim.AdamW(params_disc, lr=args["learning_rate"], betas=(0.9, 0.999), weight_decay=1e-2)
    lr_scheduler_gen = torch.optim.lr_scheduler.LambdaLR(optimizer_gen, lambda s: 1.0)
    lr_scheduler_disc = torch.optim.lr_scheduler.LambdaLR(optimizer_disc, lambda s: 1.0)

    global_step = 0
    for epoch in range(args["max_train_epochs"]):
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(unet, net_disc_a, net_disc_b, vae_enc, vae_dec):
                img_a, img_b = batch["pixel_values_src"], batch["pixel_values_tgt"]
                bsz = img_a.shape[0]
                a2b_emb, b2a_emb = fixed_a2b_emb_base.repeat(bsz, 1), fixed_b2a_emb_base.repeat(bsz, 1)

                # cycle objective
                cyc_fake_b = forward_with_networks(img_a, "a2b", vae_enc, unet, vae_dec, a2b_emb)
                cyc_rec_a = forward_with_networks(cyc_fake_b, "b2a", vae_enc, unet, vae_dec, b2a_emb)
                loss_cycle_a = crit_cycle(cyc_rec_a, img_a) * args["lambda_cycle"] \
                    + F.l1_loss(net_lpips(cyc_rec_a), net_lpips(img_a)) * args["lambda_cycle_lpips"]
                cyc_fake_a = forward_with_networks(img_b, "b2a", vae_enc, unet, vae_dec, b2a_emb)
                cyc_rec_b = forward_with_networks(cyc_fake_a, "a2b", vae_enc, unet, vae_dec, a2b_emb)
                loss_cycle_b = crit_cycle(cyc_rec_b, img_b) * args["lambda_cycle"] \
                    + F.l1_loss(net_lpips(cyc_rec_b), net_lpips(img_b)) * args["lambda_cycle_lpips"]
                accelerator.backward(loss_cycle_a + loss_cycle_b)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_gen, args["max_grad_norm"])
                optimizer_gen.step()
                lr_scheduler_gen.step()
                optimizer_gen.zero_grad()

                # generator GAN objective
                fake_a = forward_with_networks(img_b, "b2a", vae_enc, unet, vae_dec, b2a_emb)
                fake_b = forward_with_networks(img_a, "a2b", vae_enc, unet, vae_dec, a2b_emb)
                loss_gan_a = net_disc_a(fake_b, for_G=True).mean() * args["lambda_gan"]
                loss_gan_b = net_disc_b(fake_a, for_G=True).mean() * args["lambda_gan"]
                accelerator.backward(loss_gan_a + loss_gan_b)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_gen, args["max_grad_norm"])
                optimizer_gen.step()
                lr_scheduler_gen.step()
                optimizer_gen.zero_grad()

                # identity objective
                idt_a = forward_with_networks(img_b, "a2b", vae_enc, unet, vae_dec, a2b_emb)
                idt_b = forward_with_networks(img_a, "b2a", vae_enc, unet, vae_dec, b2a_emb)
                loss_g_idt = (crit_idt(idt_a, img_b) + crit_idt(idt_b, img_a)) * args["lambda_idt"]
                accelerator.backward(loss_g_idt)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_gen, args["max_grad_norm"])
                optimizer_gen.step()
                lr_scheduler_gen.step()
                optimizer_gen.zero_grad()

                # discriminators on fakes
                loss_D_fake = (net_disc_a(fake_b.detach(), for_real=False).mean()
                               + net_disc_b(fake_a.detach(), for_real=False).mean()) * args["lambda_gan"] * 0.5
                accelerator.backward(loss_D_fake)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_disc, args["max_grad_norm"])
                optimizer_disc.step()
                lr_scheduler_disc.step()
                optimizer_disc.zero_grad()

                # discriminators on reals
                loss_D_real = (net_disc_a(img_b, for_real=True).mean()
                               + net_disc_b(img_a, for_real=True).mean()) * args["lambda_gan"] * 0.5
                accelerator.backward(loss_D_real)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_disc, args["max_grad_norm"])
                optimizer_disc.step()
                lr_scheduler_disc.step()
                optimizer_disc.zero_grad()

            global_step += 1
            if global_step % 8 == 0:
                print(f"epoch {epoch} step {global_step} cycle_a {loss_cycle_a.item():.4f} cycle_b {loss_cycle_b.item():.4f} "
                      f"gan_a {loss_gan_a.item():.4f} gan_b {loss_gan_b.item():.4f} idt {loss_g_idt.item():.4f} "
                      f"disc_fake {loss_D_fake.item():.4f} disc_real {loss_D_real.item():.4f}")


if __name__ == "__main__":
    main({"learning_rate": 2e-4, "max_train_epochs": 2, "lambda_cycle": 1.0, "lambda_cycle_lpips": 10.0,
          "lambda_gan": 0.5, "lambda_idt": 1.0, "max_grad_norm": 10.0})
