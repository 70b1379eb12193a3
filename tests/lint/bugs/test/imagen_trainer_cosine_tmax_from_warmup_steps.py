"""
Shape: an ImagenTrainer(nn.Module) wrapping a cascade of unets: __init__ casts lr, eps, warmup_steps and cosine_decay_max_steps to per-unet tuples, then for each unet builds Adam, an EMA copy, a GradScaler, an optional CosineAnnealingLR and an optional linear warmup, storing them with setattr as optim{i}/scaler{i}/scheduler{i}/warmup{i}; forward(*args, unet_number) splits the batch into chunks, runs the imagen under autocast and scaler-scaled backward; update(unet_number) unscales and clips, steps the scaler and optimizer, zeroes grads, updates the EMA, then steps the scheduler inside the warmup dampening context and bumps a step buffer.
Bug: the cosine schedule is built with T_max = unet_warmup_steps instead of unet_cosine_decay_max_steps, and update() steps it on every optimizer update, so the learning rate anneals to zero after only the (short) warmup length and then keeps cycling for the rest of training.
Thread: https://github.com/lucidrains/imagen-pytorch/issues/71
"""
from contextlib import nullcontext
from functools import partial

import pytorch_warmup as warmup
import torch
from torch import nn
from torch.cuda.amp import GradScaler, autocast
from torch.optim import Adam
from torch.optim.lr_scheduler import CosineAnnealingLR

from imagen_pytorch.imagen_pytorch import Imagen
from imagen_pytorch.trainer_utils import EMA, cast_tuple, exists, groupby_prefix_and_trim, split_args_and_kwargs


class ImagenTrainer(nn.Module):
    def __init__(self, imagen, use_ema=True, lr=1e-4, eps=1e-8, beta1=0.9, beta2=0.99, max_grad_norm=None,
                 amp=False, warmup_steps=None, cosine_decay_max_steps=None, **kwargs):
        super().__init__()
        assert isinstance(imagen, Imagen)
        ema_kwargs, kwargs = groupby_prefix_and_trim('ema_', kwargs)
        self.imagen = imagen
        self.num_unets = len(self.imagen.unets)
        self.use_ema = use_ema
        self.ema_unets = nn.ModuleList([])
        self.amp = amp

        lr, eps, warmup_steps, cosine_decay_max_steps = map(
            partial(cast_tuple, length=self.num_unets), (lr, eps, warmup_steps, cosine_decay_max_steps))

        for ind, (unet, unet_lr, unet_eps, unet_warmup_steps, unet_cosine_decay_max_steps) in enumerate(
                zip(self.imagen.unets, lr, eps, warmup_steps, cosine_decay_max_steps)):
            optimizer = Adam(unet.parameters(), lr=unet_lr, eps=unet_eps, betas=(beta1, beta2), **kwargs)
            setattr(self, f'optim{ind}', optimizer)
            if self.use_ema:
                self.ema_unets.append(EMA(unet, **ema_kwargs))
            setattr(self, f'scaler{ind}', GradScaler(enabled=amp))

            scheduler = warmup_scheduler = None
            if exists(unet_cosine_decay_max_steps):
                scheduler = CosineAnnealingLR(optimizer, T_max=unet_warmup_steps)
            if exists(unet_warmup_steps):
                warmup.LinearWarmup(optimizer, warmup_period=unet_warmup_steps)
            setattr(self, f'scheduler{ind}', scheduler)
            setattr(self, f'warmup{ind}', warmup_scheduler)

        self.max_grad_norm = max_grad_norm
        self.register_buffer('step', torch.tensor([0.]))
        self.to(next(imagen.parameters()).device)

    def scale(self, loss, *, unet_number):
        return getattr(self, f'scaler{unet_number - 1}').scale(loss)

    def update(self, unet_number=None):
        if self.num_unets == 1:
            unet_number = unet_number or 1
        index = unet_number - 1
        unet = self.imagen.unets[index]
        optimizer = getattr(self, f'optim{index}')
        scaler = getattr(self, f'scaler{index}')
        scheduler = getattr(self, f'scheduler{index}')
        warmup_scheduler = getattr(self, f'warmup{index}')

        if exists(self.max_grad_norm):
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(unet.parameters(), self.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()

        if self.use_ema:
            self.ema_unets[index].update()

        ctx = nullcontext() if not exists(warmup_scheduler) else warmup_scheduler.dampening()
        with ctx:
            if exists(scheduler):
                scheduler.step()
        self.step += 1

    def forward(self, *args, unet_number=None, max_batch_size=None, **kwargs):
        if self.num_unets == 1:
            unet_number = unet_number or 1
        total_loss = 0.
        for frac, (chunk_args, chunk_kwargs) in split_args_and_kwargs(*args, split_size=max_batch_size, **kwargs):
            with autocast(enabled=self.amp):
                loss = self.imagen(*chunk_args, unet_number=unet_number, **chunk_kwargs) * frac
            total_loss += loss.item()
            if self.training:
                self.scale(loss, unet_number=unet_number).backward()
        return total_loss
