"""
Shape: a create_dataloader(path, imgsz, batch_size, stride, single_cls, hyp, augment, cache, pad, rect, rank, workers, image_weights, quad, prefix) factory builds LoadImagesAndLabels, a DistributedSampler only when rank != -1, picks DataLoader or a PersistentLoader DataLoader subclass (with a _LoopForever) and returns (loader, dataset); train(hyp, opt, device) calls it for the train split and runs the AMP epoch loop with gradient accumulation up to a nominal batch size.
Bug: in single-GPU (rank == -1) training the factory passes sampler=None and no shuffle, so the training images are read in the same sorted file order every epoch.
Thread: https://github.com/ultralytics/yolov5/issues/5622
"""
import math
import os

import numpy as np
import torch
from torch.cuda import amp

from utils.datasets import LoadImagesAndLabels
from utils.general import colorstr
from utils.loss import ComputeLoss
from utils.torch_utils import ModelEMA, torch_distributed_zero_first

LOCAL_RANK = int(os.getenv('LOCAL_RANK', -1))
RANK = int(os.getenv('RANK', -1))
WORLD_SIZE = int(os.getenv('WORLD_SIZE', 1))


class _LoopForever:
    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        while True:
            yield from iter(self.inner)


class PersistentLoader(torch.utils.data.dataloader.DataLoader):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, 'batch_sampler', _LoopForever(self.batch_sampler))
        self._it = iter(super().__iter__())

    def __len__(self):
        return self.batch_sampler.inner.__len__()

    def __iter__(self):
        n = len(self)
        while n:
            n -= 1
            yield next(self._it)


def create_dataloader(path, imgsz, batch_size, stride, single_cls=False, hyp=None, augment=False, cache=False,
                      pad=0.0, rect=False, rank=-1, workers=8, image_weights=False, quad=False, prefix=''):
    with torch_distributed_zero_first(rank):
        ds = LoadImagesAndLabels(path, imgsz, batch_size, augment=augment, hyp=hyp, rect=rect, cache_images=cache,
                                 single_cls=single_cls, stride=int(stride), pad=pad,
                                 image_weights=image_weights, prefix=prefix)
    batch_size = min(batch_size, len(ds))
    n_workers = min(os.cpu_count() // WORLD_SIZE, batch_size if batch_size > 1 else 0, workers)
    inner = None
    if rank != -1:
        inner = torch.utils.data.distributed.DistributedSampler(ds)
    loader_cls = PersistentLoader if not image_weights else torch.utils.data.DataLoader
    collate = LoadImagesAndLabels.collate_fn4 if quad else LoadImagesAndLabels.collate_fn
    dl = loader_cls(ds, batch_size=batch_size, num_workers=n_workers, sampler=inner, pin_memory=True,
                    collate_fn=collate)
    return dl, ds


def train(hyp, opt, device, model, optimizer, scheduler, train_path, imgsz, batch_size, workers):
    grid = max(int(model.stride.max()), 32)
    nominal_bs = 64
    accum = max(round(nominal_bs / batch_size), 1)
    tr_dl, ds = create_dataloader(train_path, imgsz, batch_size // WORLD_SIZE, grid, opt.single_cls,
                                  hyp=hyp, augment=True, cache=opt.cache, rect=opt.rect,
                                  rank=LOCAL_RANK, workers=workers, image_weights=opt.image_weights,
                                  quad=opt.quad, prefix=colorstr('train: '))
    n_batches = len(tr_dl)
    ema_model = ModelEMA(model) if RANK in [-1, 0] else None
    amp_scaler = amp.GradScaler(enabled=device.type != 'cpu')
    loss_fn = ComputeLoss(model)
    last_update = -1

    for ep in range(opt.epochs):
        model.train()
        if RANK != -1:
            tr_dl.sampler.set_epoch(ep)
        optimizer.zero_grad()
        for i, (images, boxes, files, _) in enumerate(tr_dl):
            global_i = i + n_batches * ep
            images = images.to(device, non_blocking=True).float() / 255
            with amp.autocast(enabled=device.type != 'cpu'):
                preds = model(images)
                loss, loss_parts = loss_fn(preds, boxes.to(device))
            amp_scaler.scale(loss).backward()
            if global_i - last_update >= accum:
                amp_scaler.step(optimizer)
                amp_scaler.update()
                optimizer.zero_grad()
                if ema_model:
                    ema_model.update(model)
                last_update = global_i
        scheduler.step()
