"""
Shape: LightningModule with automatic_optimization = False and self.accum_every; configure_optimizers returns two Adam optimizers (autoencoder parts, discriminator) with SequentialLR warmup+cosine schedulers; training_step fetches them via self.optimizers()/self.lr_schedulers(), calls self.manual_backward() and steps only when (micro_idx + 1) % self.accum_every == 0.
Bug: ae_opt.zero_grad() / disc_opt.zero_grad() run on every micro-batch, so the gradients of earlier micro-batches are wiped between their backward and the boundary step; only the last micro-batch reaches the optimizer.
Thread: https://github.com/gaozhihan/PreDiff/issues/32
"""
import numpy as np
import pytorch_lightning as pl
import torch
from einops import rearrange
from omegaconf import OmegaConf
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, SequentialLR

from prediff.taming import AutoencoderKL, LPIPSWithDiscriminator
from prediff.utils.optim import warmup_lambda


class SevirVAEModule(pl.LightningModule):
    def __init__(self, n_total_steps: int, accum_every: int = 1, oc_file: str = None):
        super(SevirVAEModule, self).__init__()
        conf = OmegaConf.load(open(oc_file, "r"))
        net_cfg = OmegaConf.to_object(conf.model)
        self.vae = AutoencoderKL(**net_cfg["vae"])
        self.loss = LPIPSWithDiscriminator(**net_cfg["loss"])
        self.conf = conf
        self.n_total_steps = n_total_steps
        self.automatic_optimization = False
        self.accum_every = accum_every

    def configure_optimizers(self):
        cfg = self.conf.optim
        opt_ae = torch.optim.Adam(list(self.vae.encoder.parameters())
                                  + list(self.vae.decoder.parameters())
                                  + list(self.vae.quant_conv.parameters())
                                  + list(self.vae.post_quant_conv.parameters()),
                                  lr=cfg.lr, betas=cfg.betas)
        opt_disc = torch.optim.Adam(self.loss.discriminator.parameters(), lr=cfg.lr, betas=cfg.betas)
        warmup = int(np.round(cfg.warmup_percentage * self.n_total_steps))

        ramp_ae = LambdaLR(opt_ae, lr_lambda=warmup_lambda(warmup_steps=warmup, min_lr_ratio=cfg.warmup_min_lr_ratio))
        decay_ae = CosineAnnealingLR(opt_ae, T_max=self.n_total_steps - warmup, eta_min=cfg.min_lr_ratio * cfg.lr)
        sched_ae = SequentialLR(opt_ae, schedulers=[ramp_ae, decay_ae], milestones=[warmup])
        ramp_d = LambdaLR(opt_disc, lr_lambda=warmup_lambda(warmup_steps=warmup, min_lr_ratio=cfg.warmup_min_lr_ratio))
        decay_d = CosineAnnealingLR(opt_disc, T_max=self.n_total_steps - warmup, eta_min=cfg.min_lr_ratio * cfg.lr)
        sched_d = SequentialLR(opt_disc, schedulers=[ramp_d, decay_d], milestones=[warmup])
        return [{"optimizer": opt_ae, "lr_scheduler": {"scheduler": sched_ae, "interval": "step", "frequency": 1}},
                {"optimizer": opt_disc, "lr_scheduler": {"scheduler": sched_d, "interval": "step", "frequency": 1}}]

    def final_conv_weight(self):
        return self.vae.decoder.conv_out.weight

    def forward(self, frames, draw=True):
        return self.vae(sample=frames, sample_posterior=draw, return_posterior=True)

    def training_step(self, batch, micro_idx):
        ae_opt, disc_opt = self.optimizers()
        ae_sched, disc_sched = self.lr_schedulers()

        target = rearrange(batch, "b 1 h w c -> b c h w").contiguous()
        pred, posterior = self(target)

        ae_loss, ae_info = self.loss(target, pred, posterior, optimizer_idx=0, global_step=self.global_step,
                                    mask=None, last_layer=self.final_conv_weight(), split="train")
        self.log("ae_loss", ae_loss, prog_bar=True, on_step=True, on_epoch=True)
        ae_opt.zero_grad()
        self.manual_backward(ae_loss)
        if (micro_idx + 1) % self.accum_every == 0:
            self.clip_gradients(ae_opt, gradient_clip_val=self.conf.optim.gradient_clip_val,
                                gradient_clip_algorithm="norm")
            ae_opt.step()
            ae_sched.step()

        disc_loss, disc_info = self.loss(target, pred, posterior, optimizer_idx=1, global_step=self.global_step,
                                        mask=None, last_layer=self.final_conv_weight(), split="train")
        self.log("disc_loss", disc_loss, prog_bar=True, on_step=True, on_epoch=True)
        disc_opt.zero_grad()
        self.manual_backward(disc_loss)
        if (micro_idx + 1) % self.accum_every == 0:
            self.clip_gradients(disc_opt, gradient_clip_val=self.conf.optim.gradient_clip_val,
                                gradient_clip_algorithm="norm")
            disc_opt.step()
            disc_sched.step()
