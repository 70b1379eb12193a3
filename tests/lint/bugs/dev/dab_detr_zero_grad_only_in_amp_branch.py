"""
Shape: DETR-style engine module; train_one_epoch(detr, set_criterion, loader, opt, device, epoch, clip_max, args) with a GradScaler and an `if args.amp:` / `else:` split around backward and step; weighted sum of a loss dict.
Bug: opt.zero_grad() is called only in the AMP branch; the default fp32 branch does backward(), clipping and opt.step() every batch without ever zeroing gradients.
Thread: https://github.com/IDEA-Research/DAB-DETR/issues/58
"""
import math
import sys
from typing import Iterable

import torch

import util.misc as utils


def train_one_epoch(detr: torch.nn.Module, set_criterion: torch.nn.Module,
                    loader: Iterable, opt: torch.optim.Optimizer,
                    device: torch.device, epoch: int, clip_max: float = 0,
                    lr_scheduler=None, args=None, logger=None):
    amp_scaler = torch.cuda.amp.GradScaler(args.amp)

    try:
        feed_tgts = args.use_dn
    except AttributeError:
        feed_tgts = False

    detr.train()
    set_criterion.train()
    tracker = utils.MetricLogger(delimiter="  ")
    header = f"Epoch {epoch}"

    for imgs, tgts in tracker.log_every(loader, 10, header, logger=logger):
        imgs = imgs.to(device)
        tgts = [{key: val.to(device) for key, val in tgt.items()} for tgt in tgts]

        with torch.cuda.amp.autocast(args.amp):
            if feed_tgts:
                preds = detr(imgs, tgts)
            else:
                preds = detr(imgs)
            terms = set_criterion(preds, tgts)
            coef = set_criterion.weight_dict
            total = sum(terms[k] * coef[k] for k in terms.keys() if k in coef)

        reduced = utils.reduce_dict(terms)
        reduced_scaled = {k: v * coef[k] for k, v in reduced.items() if k in coef}
        loss_value = sum(reduced_scaled.values()).item()

        if math.isinf(loss_value) or math.isnan(loss_value):
            print("non-finite loss {}, stopping".format(loss_value))
            sys.exit(1)

        if args.amp:
            opt.zero_grad()
            amp_scaler.scale(total).backward()
            if clip_max > 0:
                amp_scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(detr.parameters(), clip_max)
            amp_scaler.step(opt)
            amp_scaler.update()
        else:
            total.backward()
            if clip_max > 0:
                torch.nn.utils.clip_grad_norm_(detr.parameters(), clip_max)
            opt.step()

        tracker.update(loss=loss_value, **reduced_scaled)
        tracker.update(lr=opt.param_groups[0]["lr"])

    tracker.synchronize_between_processes()
    return {k: m.global_avg for k, m in tracker.meters.items() if m.count > 0}
