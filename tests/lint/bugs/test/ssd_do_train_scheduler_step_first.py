"""
Shape: an SSD detection package: train(cfg, args) builds the detector with build_ssd_model(cfg), moves it to the device, wraps it in DistributedDataParallel when distributed, builds SGD and a WarmupMultiStepLR iteration scheduler, the MultiBoxLoss criterion and an iteration-based data loader, then calls a do_train(cfg, model, data_loader, optimizer, scheduler, criterion, device, args) engine helper that loops once over the loader with a reduce_loss_dict helper for logging, periodic checkpoints and evaluation.
Bug: do_train ticks scheduler.step() as the first statement of every iteration, before that iteration's optimizer.step(), so each update runs with the next warmup value and the first value of the schedule is skipped.
Thread: https://github.com/lufficc/SSD/pull/98
"""
import datetime
import logging
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ssd.config import cfg as default_cfg
from ssd.data.build import make_data_loader
from ssd.engine.inference import do_evaluation
from ssd.modeling.multibox_loss import MultiBoxLoss
from ssd.modeling.vgg_ssd import build_ssd_model
from ssd.solver.lr_scheduler import WarmupMultiStepLR
from ssd.utils import distributed_util


def reduce_loss_dict(losses):
    n_proc = distributed_util.get_world_size()
    if n_proc < 2:
        return losses
    with torch.no_grad():
        keys = list(losses.keys())
        stacked = torch.stack([losses[k] for k in keys], dim=0)
        dist.reduce(stacked, dst=0)
        if dist.get_rank() == 0:
            stacked /= n_proc
        return dict(zip(keys, stacked))


def do_train(cfg, model, data_loader, optimizer, scheduler, criterion, device, args):
    log = logging.getLogger("SSD.trainer")
    model.train()
    is_main = distributed_util.get_rank() == 0
    total_iters = len(data_loader)
    t_start = time.time()
    busy = 0.0
    last = time.time()
    for it, (imgs, gt_boxes, gt_labels) in enumerate(data_loader, start=1):
        scheduler.step()
        imgs = imgs.to(device)
        gt_boxes = gt_boxes.to(device)
        gt_labels = gt_labels.to(device)

        optimizer.zero_grad()
        scores, offsets = model(imgs)
        reg_loss, cls_loss = criterion(scores, offsets, gt_labels, gt_boxes)
        logged = reduce_loss_dict({"reg": reg_loss, "cls": cls_loss})
        total = reg_loss + cls_loss
        total.backward()
        optimizer.step()

        busy += time.time() - last
        last = time.time()
        if it % args.log_step == 0:
            eta = int(busy / it * (total_iters - it))
            log.info("iter %06d lr %.5f loss %.3f eta %s", it, optimizer.param_groups[0]["lr"],
                     sum(v for v in logged.values()).item(), datetime.timedelta(seconds=eta))
        if is_main and it % args.save_step == 0:
            net = model.module if isinstance(model, DistributedDataParallel) else model
            net.save(os.path.join(cfg.OUTPUT_DIR, "ssd_iter_{:06d}.pth".format(it)))
        if args.eval_step > 0 and it % args.eval_step == 0 and it != total_iters:
            do_evaluation(cfg, model, cfg.OUTPUT_DIR, distributed=args.distributed)
            model.train()
    log.info("training took %s", datetime.timedelta(seconds=int(time.time() - t_start)))
    return model


def train(cfg, args):
    device = torch.device(cfg.MODEL.DEVICE)
    model = build_ssd_model(cfg)
    model.to(device)
    if args.distributed:
        model = DistributedDataParallel(model, device_ids=[args.local_rank], output_device=args.local_rank)

    base_lr = cfg.SOLVER.LR * args.num_gpus
    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=cfg.SOLVER.MOMENTUM,
                                weight_decay=cfg.SOLVER.WEIGHT_DECAY)
    milestones = [step // args.num_gpus for step in cfg.SOLVER.LR_STEPS]
    scheduler = WarmupMultiStepLR(optimizer=optimizer, milestones=milestones, gamma=cfg.SOLVER.GAMMA,
                                  warmup_factor=cfg.SOLVER.WARMUP_FACTOR,
                                  warmup_iters=cfg.SOLVER.WARMUP_ITERS)
    criterion = MultiBoxLoss(neg_pos_ratio=cfg.MODEL.NEG_POS_RATIO)

    max_iter = cfg.SOLVER.MAX_ITER // args.num_gpus
    loader = make_data_loader(cfg, is_train=True, distributed=args.distributed, max_iter=max_iter)
    return do_train(cfg, model, loader, optimizer, scheduler, criterion, device, args)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--config-file", default="")
    parser.add_argument("--local_rank", type=int, default=0)
    parser.add_argument("--log_step", type=int, default=50)
    parser.add_argument("--save_step", type=int, default=5000)
    parser.add_argument("--eval_step", type=int, default=0)
    parsed = parser.parse_args()
    parsed.num_gpus = int(os.environ.get("WORLD_SIZE", 1))
    parsed.distributed = parsed.num_gpus > 1
    default_cfg.merge_from_file(parsed.config_file)
    train(default_cfg, parsed)
