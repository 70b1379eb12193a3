"""
Shape: Trainer(BaseTrainer) class; train_one_epoch(self, epoch, cfg, train_loader, optimizer, loss_fn, amp_scaler, scheduler, metrics) receives optimizer and GradScaler as arguments, reads hyperparameters from a cfg dict, draws batches with next() on a cycle() iterator, autocast forward through self.model, amp_scaler.scale(loss / accum).backward().
Bug: torch.nn.utils.clip_grad_norm_ is applied to self.model's gradients while they are still multiplied by the loss scale (no amp_scaler.unscale_(optimizer) before it).
Thread: https://github.com/NCAR/miles-credit/pull/141
"""
import logging
from collections import defaultdict

import numpy as np
import optuna
import torch
import torch.distributed as dist
import tqdm
from torch.cuda.amp import autocast
from torch.utils.data import IterableDataset

from credit.data import concat_and_reshape, reshape_only
from credit.scheduler import update_on_batch
from credit.trainers.base_trainer import BaseTrainer
from credit.trainers.utils import accum_log, cycle

logger = logging.getLogger(__name__)


class Trainer(BaseTrainer):
    def __init__(self, model: torch.nn.Module, rank: int, module: bool = False):
        super().__init__(model, rank, module)

    def train_one_epoch(self, epoch, cfg, train_loader, optimizer, loss_fn, amp_scaler, scheduler, metrics):
        n_batches = cfg["trainer"]["n_batches"]
        accum = cfg["trainer"]["accum"]
        clip_max = cfg["trainer"]["clip_max"]
        use_amp = cfg["trainer"]["use_amp"]
        is_dist = cfg["trainer"]["mode"] in ["fsdp", "ddp"]

        if cfg["trainer"]["use_scheduler"] and cfg["trainer"]["scheduler"]["scheduler_type"] == "lambda":
            scheduler.step()

        if not isinstance(train_loader.dataset, IterableDataset):
            n_batches = (n_batches if 0 < n_batches < len(train_loader)
                                 else len(train_loader))

        stats = defaultdict(list)
        batch_stream = cycle(train_loader)
        for i in tqdm.tqdm(range(n_batches), disable=self.rank > 0):
            batch = next(batch_stream)
            step_log = {}
            with autocast(enabled=use_amp):
                if "x_surf" in batch:
                    x = concat_and_reshape(batch["x"], batch["x_surf"]).to(self.device)
                else:
                    x = reshape_only(batch["x"]).to(self.device)
                if "x_forcing_static" in batch:
                    static_forcing = batch["x_forcing_static"].to(self.device).permute(0, 2, 1, 3, 4)
                    x = torch.cat((x, static_forcing), dim=1)
                if "y_surf" in batch:
                    y = concat_and_reshape(batch["y"], batch["y_surf"]).to(self.device)
                else:
                    y = reshape_only(batch["y"]).to(self.device)

                pred = self.model(x)
                y = y.to(device=self.device, dtype=pred.dtype)
                loss = loss_fn(y, pred)

                for name, value in metrics(pred, y).items():
                    stats[f"train_{name}"].append(float(value))

                loss = loss.mean()
                amp_scaler.scale(loss / accum).backward()

            accum_log(step_log, {"loss": loss.item() / accum})

            if is_dist:
                torch.distributed.barrier()

            torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=clip_max)
            amp_scaler.step(optimizer)
            amp_scaler.update()
            optimizer.zero_grad()

            step_loss = torch.Tensor([step_log["loss"]]).cuda(self.device)
            if is_dist:
                dist.all_reduce(step_loss, dist.ReduceOp.AVG, async_op=False)
            stats["train_loss"].append(step_loss[0].item())
            if not np.isfinite(np.mean(stats["train_loss"])):
                print("non-finite loss", np.mean(stats["train_loss"]))
                raise optuna.TrialPruned()

            if cfg["trainer"]["use_scheduler"] and cfg["trainer"]["scheduler"]["scheduler_type"] in update_on_batch:
                scheduler.step()

            if i >= n_batches and i > 0:
                break

        torch.cuda.empty_cache()
        return stats
