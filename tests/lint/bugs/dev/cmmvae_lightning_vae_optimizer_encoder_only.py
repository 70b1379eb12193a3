"""
Shape: Lightning model (subclass of the project's BaseModel, itself a LightningModule) with automatic_optimization turned off: configure_optimizers builds a nested dict of Adam optimizers (one per species expert, one for the shared VAE, one per adversarial discriminator), flattens it into a list plus an index map through a helper, and get_optimizers(zero_all=True) zeroes them all and rebuilds the dict; training_step runs the CMMVAE module, steps each adversary on its own BCE loss via manual_backward, then backpropagates ELBO plus the weighted fooling loss, clips gradients per optimizer and steps the VAE and expert optimizers.
Bug: The shared VAE optimizer is built from vae.encoder.parameters() only, so the VAE decoder (and anything else in the VAE outside the encoder) gets gradients from manual_backward but is never updated.
Thread: https://github.com/zdebruine/MMVAE/issues/39
"""
from typing import Dict, List, Optional, Tuple

import pandas as pd
import torch
import torch.nn as nn

from cmmvae.constants import REGISTRY_KEYS as RK
from cmmvae.models import BaseModel
from cmmvae.modules import CMMVAE


def flatten_optimizers(tree: Dict, out: Optional[List] = None) -> Dict:
    if out is None:
        out = []
    index = {}
    for name, node in tree.items():
        if isinstance(node, dict):
            index[name] = flatten_optimizers(node, out)
        else:
            out.append(node)
            index[name] = len(out) - 1
    return index


class CrossSpeciesVAEModel(BaseModel):
    def __init__(self, module: CMMVAE, fool_weight: float, *base_args, **base_kwargs):
        super().__init__(*base_args, **base_kwargs)
        self.module = module
        self.automatic_optimization = False
        self.disc_criterion = nn.BCELoss(reduction="sum")
        self.fool_weight = fool_weight
        self.init_weights()

    def training_step(self, batch: Tuple[torch.Tensor, pd.DataFrame, str], batch_idx: int) -> None:
        x, meta, species = batch
        zeros = torch.zeros(self.batch_size, 1, device=self.device)
        ones = torch.ones(self.batch_size, 1, device=self.device)
        true_lbl = zeros if species == "human" else ones
        fool_lbl = ones if species == "human" else zeros

        opts = self.get_optimizers(zero_all=True)
        expert_opt = opts["experts"][species]
        vae_opt = opts["vae"]
        disc_opts = opts["adversarials"]

        qz, pz, z, recons, hiddens = self.module(x, meta, species)
        if x.layout is torch.sparse_csr:
            x = x.to_dense()
        losses = self.module.vae.elbo(qz, pz, x, recons[species], self.kl_annealing_fn.kl_weight)

        for k, (h, disc) in enumerate(zip(hiddens, self.module.adversarials)):
            d_loss = self.disc_criterion(disc(h), true_lbl)
            losses[f"adv_{k}"] = d_loss
            self.manual_backward(d_loss, retain_graph=True)
            disc_opts[k].step()

        fool = None
        for h, disc in zip(hiddens, self.module.adversarials):
            term = self.disc_criterion(disc(h), fool_lbl)
            fool = term if fool is None else fool + term
        losses["adversarial_loss"] = fool
        total = losses[RK.LOSS] + self.fool_weight * fool

        self.manual_backward(total)
        self.clip_gradients(vae_opt, gradient_clip_val=0.5, gradient_clip_algorithm="norm")
        self.clip_gradients(expert_opt, gradient_clip_val=0.5, gradient_clip_algorithm="norm")
        vae_opt.step()
        expert_opt.step()
        anneal = self.kl_annealing_fn
        anneal.step()
        self.auto_log(losses, tags=[self.stage_name, species])

    def validation_step(self, val_batch: Tuple[torch.Tensor, pd.DataFrame, str]) -> None:
        batch = val_batch
        x, meta, species = batch
        qz, pz, z, recons, _ = self.module(x, meta, species)
        if x.layout is torch.sparse_csr:
            x = x.to_dense()
        losses = self.module.vae.elbo(qz, pz, x, recons[species], self.kl_annealing_fn.kl_weight)
        self.auto_log(losses, tags=[self.stage_name, species])

    def get_optimizers(self, zero_all=False):
        opt_list = self.optimizers()
        if zero_all:
            for o in opt_list:
                o.zero_grad()

        def resolve(node):
            if isinstance(node, dict):
                return {k: resolve(v) for k, v in node.items()}
            return opt_list[node]

        return resolve(self.optimizer_map)

    def configure_optimizers(self) -> list:
        tree = {
            "experts": {
                sid: torch.optim.Adam(self.module.experts[sid].parameters(), lr=1e-3, weight_decay=1e-6)
                for sid in self.module.experts
            },
            "vae": torch.optim.Adam(self.module.vae.encoder.parameters(), lr=1e-3, weight_decay=1e-6),
            "adversarials": {
                k: torch.optim.Adam(d.parameters(), lr=1e-3, weight_decay=1e-6)
                for k, d in enumerate(self.module.adversarials)
            },
        }
        flat = []
        self.optimizer_map = flatten_optimizers(tree, flat)
        return flat
