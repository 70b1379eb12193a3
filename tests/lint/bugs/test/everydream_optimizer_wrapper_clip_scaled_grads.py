"""
Shape: EveryDreamOptimizer wrapper class: __init__ collects text-encoder/unet params, builds one optimizer per model via create_optimizers()/_create_optimizer(), diffusers get_scheduler() schedulers and a GradScaler; its step(loss, local_step, gstep) does grad_scaler.scale(loss).backward(), optional clip_grad_norm_ on both param sets, then (every accum_every steps) grad_scaler.step per optimizer, grad_scaler.update, zero_grad; main() computes an MSE loss under autocast and calls ed_opt.step(...).
Bug: clip_grad_norm_ is applied to the still-scaled gradients; grad_scaler.unscale_(opt) is never called before clipping.
Thread: https://github.com/victorchall/EveryDream2trainer/pull/175
"""
import itertools
import math

import torch
import torch.nn.functional as F
from diffusers.optimization import get_scheduler
from torch.cuda.amp import GradScaler, autocast


class EveryDreamOptimizer():
    def __init__(self, cfg, opt_cfg, text_encoder, unet, steps_per_epoch):
        self.steps_per_epoch = steps_per_epoch
        self.te_config = opt_cfg["text_encoder_overrides"]
        self.base_config = opt_cfg["base"]
        self.accum_every = cfg.accum_every
        self.max_grad_norm = cfg.max_grad_norm

        self.te_param_iter = text_encoder.parameters()
        self.unet_param_iter = unet.parameters()

        self.optimizers = []
        self.te_opt, self.unet_opt = self.create_optimizers(cfg, self.te_param_iter,
                                                                        self.unet_param_iter)
        if self.te_opt is not None:
            self.optimizers.append(self.te_opt)
        if self.unet_opt is not None:
            self.optimizers.append(self.unet_opt)

        self.schedulers = self.create_lr_schedulers(cfg)
        self.grad_scaler = GradScaler(enabled=cfg.amp, init_scale=2 ** 17.5, growth_factor=2,
                                 backoff_factor=1.0 / 2, growth_interval=25)

    def step(self, loss, local_step, gstep):
        self.grad_scaler.scale(loss).backward()

        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(parameters=self.unet_param_iter, max_norm=self.max_grad_norm)
            torch.nn.utils.clip_grad_norm_(parameters=self.te_param_iter, max_norm=self.max_grad_norm)
        if ((gstep + 1) % self.accum_every == 0) or (local_step == self.steps_per_epoch - 1):
            for opt in self.optimizers:
                self.grad_scaler.step(opt)
            self.grad_scaler.update()
            self._clear_grads(to_none=True)

        for sched in self.schedulers:
            sched.step()

    def _clear_grads(self, to_none=False):
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=to_none)

    def get_scale(self):
        return float(self.grad_scaler.get_scale())

    def create_optimizers(self, cfg, te_params, unet_param_iter):
        opt_te = None if cfg.disable_textenc_training else \
            self._create_optimizer(cfg, self.te_config, te_params)
        opt_unet = None if cfg.disable_unet_training else \
            self._create_optimizer(cfg, self.base_config, unet_param_iter)
        return opt_te, opt_unet

    def create_lr_schedulers(self, cfg):
        out = []
        for opt, conf in ((self.te_opt, self.te_config), (self.unet_opt, self.base_config)):
            if opt is not None:
                out.append(get_scheduler(conf["lr_scheduler"], optimizer=opt,
                                         num_warmup_steps=int(conf["lr_warmup_steps"]),
                                         num_training_steps=int(conf["lr_decay_steps"])))
        return out

    def _create_optimizer(self, cfg, conf, parameters):
        lr = cfg.lr if cfg.lr is not None else conf.get("lr", 1e-6)
        betas = conf.get("betas") or [0.9, 0.999]
        if conf.get("optimizer") == "adamw":
            OptCls = torch.optim.AdamW
        else:
            from bitsandbytes.optim import AdamW8bit
            OptCls = AdamW8bit
        return OptCls(itertools.chain(parameters), lr=lr, betas=(betas[0], betas[1]),
                         eps=conf.get("epsilon") or 1e-8, weight_decay=conf.get("weight_decay") or 0.01,
                         amsgrad=False)


def main(cfg, opt_cfg, unet, text_encoder, vae, noise_scheduler, batch_items, loader):
    steps_per_epoch = math.ceil(len(batch_items) / cfg.batch_size)
    ed_opt = EveryDreamOptimizer(cfg, opt_cfg, text_encoder, unet, steps_per_epoch)

    def predict_noise(image, tokens):
        with torch.inference_mode():
            with autocast(enabled=cfg.amp):
                z = vae.encode(image.to(unet.device), return_dict=False)
            z = 0.18215 * z[0].sample()
            eps = torch.randn(z.shape, device=z.device)
            t = torch.randint(0, noise_scheduler.config.num_train_timesteps, (z.shape[0],),
                              device=z.device).long()
            caption = tokens.to(text_encoder.device)
        hidden = text_encoder(caption, output_hidden_states=True).last_hidden_state
        noisy = noise_scheduler.add_noise(z, eps, t)
        with autocast(enabled=cfg.amp):
            pred = unet(noisy, t, hidden).sample
        return pred, eps

    gstep = 0
    for _ep in range(cfg.max_epochs):
        for local_step, batch in enumerate(loader):
            pred, target = predict_noise(batch["image"], batch["tokens"])
            loss = F.mse_loss(pred.float(), target.float(), reduction="mean")
            if batch["runt_size"] > 0:
                loss = loss * (batch["runt_size"] / cfg.batch_size)
            ed_opt.step(loss, local_step, gstep)
            gstep += 1
