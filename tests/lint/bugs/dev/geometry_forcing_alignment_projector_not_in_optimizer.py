"""
Shape: a Lightning video-diffusion algorithm (base class) whose `configure_optimizers` builds AdamW
over `self.diffusion_model.parameters()` with a step-wise transformers scheduler; a subclass adds a
representation-alignment loss module (frozen pretrained encoder plus trainable conv projectors in
an nn.ModuleList) in `__init__` and adds its output to the diffusion loss in `training_step`.
Bug: the subclass never overrides `configure_optimizers`, so the trainable projectors inside the
alignment-loss module are not in the optimizer and stay at their random initialisation.
Thread: https://github.com/CIntellifusion/GeometryForcing/issues/13
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange
from omegaconf import OmegaConf
from transformers import get_scheduler
import lightning.pytorch as pl


class ConvProjector(nn.Module):
    def __init__(self, in_channels, out_channels, mid_channels=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, 3, padding=1),
            nn.SiLU(),
            nn.Conv2d(mid_channels, out_channels, 1),
        )

    def forward(self, x):
        return self.net(x)


class FeatureAlignmentLoss(nn.Module):
    def __init__(self, frozen_encoder, latents_info, target_channels=24, mid_channels=128,
                 context_length=16):
        super().__init__()
        self.context_length = context_length
        self.encoder = frozen_encoder
        self.encoder.eval()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        self.projectors = nn.ModuleList(
            [ConvProjector(c, target_channels, mid_channels) for c, _, _ in latents_info]
        )

    def forward(self, latent_list, images):
        with torch.no_grad():
            target = self.encoder(images)
        total = 0.0
        for latent, proj in zip(latent_list, self.projectors):
            latent = latent[:, : self.context_length]
            latent = rearrange(latent, "b t c h w -> (b t) c h w")
            pred = proj(latent)
            tgt = F.interpolate(target, size=pred.shape[-2:], mode="bilinear")
            pred_n = F.normalize(pred.flatten(2), dim=-1)
            tgt_n = F.normalize(tgt.flatten(2), dim=-1)
            total = total + (-(pred_n * tgt_n)).sum(-1).mean()
        return total / len(latent_list)


class VideoDiffusionAlgo(pl.LightningModule):
    def __init__(self, cfg, diffusion_model):
        super().__init__()
        self.cfg = cfg
        self.diffusion_model = diffusion_model

    def configure_optimizers(self):
        trainable = list(self.diffusion_model.parameters())
        optim = torch.optim.AdamW(
            trainable,
            lr=self.cfg.lr,
            betas=self.cfg.optimizer_beta,
            weight_decay=self.cfg.weight_decay,
        )
        sched = {
            "scheduler": get_scheduler(optimizer=optim, **self.cfg.lr_scheduler),
            "interval": "step",  # per optimizer step
            "frequency": 1,
        }
        return {"optimizer": optim, "lr_scheduler": sched}


class GeometryForcingAlgo(VideoDiffusionAlgo):
    def __init__(self, cfg, diffusion_model, frozen_encoder):
        super().__init__(cfg, diffusion_model)
        align_cfg = OmegaConf.to_container(cfg.alignment, resolve=True)
        self.alignment_coeff = align_cfg.pop("alignment_coeff", 0.5)
        self.align_layer = align_cfg.get("layer_index")
        if self.alignment_coeff:
            self.alignment_module = FeatureAlignmentLoss(frozen_encoder, align_cfg["latents_info"])

    def training_step(self, batch, batch_idx):
        xs, conds, masks = batch[0], batch[1], batch[2]
        noise_levels = torch.randint(0, 1000, xs.shape[:2], device=xs.device)
        xs_pred, per_elem, latents = self.diffusion_model.forward_with_latents(
            xs, conds, k=noise_levels
        )
        diff_loss = (per_elem * masks[..., None, None, None]).mean()
        if self.alignment_coeff:
            picked = [latents[self.align_layer]]
            align_loss = self.alignment_module(picked, xs[:, 0])
            loss = diff_loss + self.alignment_coeff * align_loss
            self.log("training/alignment_loss", align_loss, prog_bar=True)
        else:
            loss = diff_loss
        self.log("training/loss", loss, prog_bar=True)
        return {"loss": loss, "xs_pred": xs_pred}
