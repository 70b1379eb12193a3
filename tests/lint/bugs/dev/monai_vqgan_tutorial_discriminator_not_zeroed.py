"""
Shape: tutorial script (cells flattened); VQVAE generator and PatchDiscriminator moved to device, Adam opt_gen / opt_disc, L1 + perceptual + patch adversarial losses, generator step then discriminator step per batch, periodic no_grad validation.
Bug: opt_gen.zero_grad() runs at the top of each batch but opt_disc is never zeroed before disc_total.backward()/opt_disc.step().
Thread: https://github.com/Project-MONAI/GenerativeModels/issues/102
"""
import torch
from torch.nn import L1Loss
from tqdm import tqdm

from generative.networks.nets import VQVAE as VectorQuantAE
from generative.networks.nets.patchgan_discriminator import PatchDiscriminator as PatchCritic
from generative.losses.perceptual import PerceptualLoss as PercepLoss
from generative.losses.adversarial_loss import PatchAdversarialLoss as PatchAdvLoss

from data_setup import train_loader, val_loader

device = torch.device("cuda")

vqvae = VectorQuantAE(
    spatial_dims=2, in_channels=1, out_channels=1, num_res_layers=2, num_levels=2,
    upsample_parameters=((2, 4, 1, 1, 0),) * 2,
    downsample_parameters=((2, 4, 1, 1),) * 2,
    num_channels=256, num_embeddings=256, embedding_dim=32,
)
vqvae.to(device)

critic = PatchCritic(
    spatial_dims=2, num_layers_d=3, num_channels=64, in_channels=1, out_channels=1,
    kernel_size=4, activation="LEAKYRELU", norm="BATCH", bias=False, padding=1,
)
critic.to(device)

percep_crit = PercepLoss(spatial_dims=2, network_type="alex")
percep_crit.to(device)

opt_gen = torch.optim.Adam(params=vqvae.parameters(), lr=1e-4)
opt_disc = torch.optim.Adam(params=critic.parameters(), lr=5e-4)

l1_crit = L1Loss()
patch_adv = PatchAdvLoss(criterion="least_squares")
adv_weight = 0.01
perceptual_weight = 0.001

n_epochs = 100
val_interval = 10
for epoch in range(n_epochs):
    vqvae.train()
    critic.train()
    recon_total = 0.0
    bar = tqdm(enumerate(train_loader), total=len(train_loader))
    for step, sample in bar:
        imgs = sample["image"].to(device)
        opt_gen.zero_grad(set_to_none=True)

        recon, q_loss = vqvae(images=imgs)
        fake_logits = critic(recon.contiguous().float())[-1]
        l1_term = l1_crit(recon.float(), imgs.float())
        percep_term = percep_crit(recon.float(), imgs.float())
        g_adv = patch_adv(fake_logits, target_is_real=True, for_discriminator=False)
        gen_total = l1_term + q_loss + perceptual_weight * percep_term + adv_weight * g_adv
        gen_total.backward()
        opt_gen.step()

        fake_logits = critic(recon.contiguous().detach())[-1]
        d_fake = patch_adv(fake_logits, target_is_real=False, for_discriminator=True)
        real_logits = critic(imgs.contiguous().detach())[-1]
        d_real = patch_adv(real_logits, target_is_real=True, for_discriminator=True)
        disc_total = adv_weight * (d_fake + d_real) * 0.5
        disc_total.backward()
        opt_disc.step()

        recon_total += l1_term.item()
        bar.set_postfix({"l1_term": recon_total / (step + 1)})

    if (epoch + 1) % val_interval == 0:
        vqvae.eval()
        val_total = 0.0
        with torch.no_grad():
            for vstep, sample in enumerate(val_loader, start=1):
                imgs = sample["image"].to(device)
                recon, _ = vqvae(images=imgs)
                val_total += l1_crit(recon.float(), imgs.float()).item()
