"""
Shape: HigherHRNet-style pose training: a `build_train_loader(cfg, is_train, distributed)` helper
builds the DataLoader with a DistributedSampler when distributed (shuffle turned off), and
`main_worker` creates the DDP model, loss factory, optimizer and MultiStepLR, then loops over
epochs calling `train_one_epoch(cfg, model, loader, loss_factory, optimizer, epoch, ...)`.
Bug: the epoch loop never calls `loader.sampler.set_epoch(epoch)`, so under multi-GPU training
the DistributedSampler yields the same permutation every epoch.
Thread: https://github.com/HRNet/DEKR/issues/13
"""
import os

import torch
import torch.distributed as dist
import torch.nn.parallel
import torch.utils.data
import torch.utils.data.distributed

import models
from core.loss import MultiLossFactory
from dataset import build_dataset
from utils.utils import AverageMeter, get_optimizer, save_checkpoint


def build_train_loader(cfg, is_train=True, distributed=False):
    if is_train:
        per_gpu = cfg.TRAIN.IMAGES_PER_GPU
        do_shuffle = True
    else:
        per_gpu = cfg.TEST.IMAGES_PER_GPU
        do_shuffle = False
    batch = per_gpu * len(cfg.GPUS)

    ds = build_dataset(cfg, is_train)

    if distributed and is_train:
        sampler = torch.utils.data.distributed.DistributedSampler(ds)
        do_shuffle = False
    else:
        sampler = None

    return torch.utils.data.DataLoader(
        ds, batch_size=batch, shuffle=do_shuffle, num_workers=cfg.WORKERS,
        pin_memory=cfg.PIN_MEMORY, sampler=sampler,
    )


def train_one_epoch(cfg, model, loader, loss_factory, optimizer, epoch, out_dir, writers):
    hm_meter = AverageMeter()
    off_meter = AverageMeter()
    model.train()
    for it, (img, hm, hm_mask, off, off_w) in enumerate(loader):
        pred_hm, pred_off = model(img)
        hm = hm.cuda(non_blocking=True)
        hm_mask = hm_mask.cuda(non_blocking=True)
        off = off.cuda(non_blocking=True)
        off_w = off_w.cuda(non_blocking=True)

        hm_loss, off_loss = loss_factory(pred_hm, pred_off, hm, hm_mask, off, off_w)
        total = 0
        if hm_loss is not None:
            hm_meter.update(hm_loss.item(), img.size(0))
            total = total + hm_loss
        if off_loss is not None:
            off_meter.update(off_loss.item(), img.size(0))
            total = total + off_loss

        optimizer.zero_grad()
        total.backward()
        optimizer.step()

        if it % cfg.PRINT_FREQ == 0 and cfg.RANK == 0:
            writers["writer"].add_scalar("train_heatmap_loss", hm_meter.val, writers["train_global_steps"])
            writers["train_global_steps"] += 1


def main_worker(gpu, ngpus_per_node, args, cfg, out_dir, writers):
    args.gpu = int(gpu)
    if args.distributed:
        if cfg.MULTIPROCESSING_DISTRIBUTED:
            args.rank = gpu + ngpus_per_node * args.rank
        dist.init_process_group(backend=cfg.DIST_BACKEND, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank)

    model = getattr(models, cfg.MODEL.NAME).get_pose_net(cfg, is_train=True)

    if args.distributed:
        torch.cuda.set_device(gpu)
        model.cuda(gpu)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
    else:
        model = torch.nn.DataParallel(model.cuda())

    criteria = MultiLossFactory(cfg).cuda()
    loader = build_train_loader(cfg, is_train=True, distributed=args.distributed)

    optimizer = get_optimizer(cfg, model=model)
    start_epoch = cfg.TRAIN.BEGIN_EPOCH
    prev_epoch = -1
    ckpt_path = os.path.join(out_dir, "checkpoint.pth.tar")
    if cfg.AUTO_RESUME and os.path.exists(ckpt_path):
        state = torch.load(ckpt_path, map_location="cpu")
        start_epoch = state["epoch"]
        prev_epoch = state["epoch"]
        model.load_state_dict(state["state_dict"])
        optimizer.load_state_dict(state["optimizer"])

    sched = torch.optim.lr_scheduler.MultiStepLR(optimizer, cfg.TRAIN.LR_STEP, cfg.TRAIN.LR_FACTOR,
                                                 last_epoch=prev_epoch)

    for epoch in range(start_epoch, cfg.TRAIN.END_EPOCH):
        train_one_epoch(cfg, model, loader, criteria, optimizer, epoch, out_dir, writers)
        sched.step()

        if not cfg.MULTIPROCESSING_DISTRIBUTED or args.rank == 0:
            snapshot = dict(epoch=epoch + 1, state_dict=model.state_dict(), optimizer=optimizer.state_dict())
            save_checkpoint(snapshot, False, out_dir)
