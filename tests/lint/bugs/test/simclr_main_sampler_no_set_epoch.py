"""
Shape: main(local_gpu, cfg) spawned per GPU; DistributedSampler only when cfg.nodes > 1 (else None, shuffle=(sampler is None)); load_optimizer(cfg, model) helper returns (optimizer, scheduler); DDP wrap; epoch loop calls a module-level train(cfg, loader, model, criterion, optimizer).
Bug: the epoch loop never calls sampler.set_epoch(ep), so the distributed shuffle order is identical every epoch.
Thread: https://github.com/Spijkervet/SimCLR/pull/26
"""
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

from model import load_optimizer, save_model
from simclr import SimCLR
from simclr.modules import NT_Xent, get_resnet
from simclr.modules.transformations import TransformsSimCLR


def train(cfg, loader, model, nt_xent, optimizer):
    acc_loss = 0
    for step, ((view_a, view_b), _) in enumerate(loader):
        optimizer.zero_grad()
        view_a = view_a.cuda(non_blocking=True)
        view_b = view_b.cuda(non_blocking=True)
        feat_a, feat_b, proj_a, proj_b = model(view_a, view_b)
        loss = nt_xent(proj_a, proj_b)
        loss.backward()
        optimizer.step()
        if dist.is_available() and dist.is_initialized():
            loss = loss.data.clone()
            dist.all_reduce(loss.div_(dist.get_world_size()))
        acc_loss += loss.item()
    return acc_loss


def main(local_gpu, cfg):
    global_rank = cfg.nr * cfg.gpus + local_gpu
    if cfg.nodes > 1:
        dist.init_process_group("nccl", rank=global_rank, world_size=cfg.world_size)
        torch.cuda.set_device(local_gpu)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)

    ds = torchvision.datasets.CIFAR10(
        cfg.dataset_dir, download=True, transform=TransformsSimCLR(size=cfg.image_size))

    if cfg.nodes > 1:
        sampler = torch.utils.data.distributed.DistributedSampler(
            ds, num_replicas=cfg.world_size, rank=global_rank, shuffle=True)
    else:
        sampler = None

    loader = torch.utils.data.DataLoader(
        ds, batch_size=cfg.batch_size, shuffle=(sampler is None),
        drop_last=True, num_workers=cfg.workers, sampler=sampler)

    backbone = get_resnet(cfg.resnet, pretrained=False)
    model = SimCLR(backbone, cfg.projection_dim, backbone.fc.in_features)
    model = model.to(cfg.device)

    optimizer, scheduler = load_optimizer(cfg, model)
    nt_xent = NT_Xent(cfg.batch_size, cfg.temperature, cfg.world_size)

    if cfg.nodes > 1:
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
        model = DDP(model, device_ids=[local_gpu])
    model = model.to(cfg.device)

    for ep in range(cfg.start_epoch, cfg.epochs):
        ep_loss = train(cfg, loader, model, nt_xent, optimizer)
        if cfg.nr == 0 and scheduler:
            scheduler.step()
        if cfg.nr == 0 and ep % 10 == 0:
            save_model(cfg, model, optimizer)
        if cfg.nr == 0:
            print(ep, ep_loss / len(loader))

    save_model(cfg, model, optimizer)


def launch(cfg):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "8000"
    cfg.device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    cfg.world_size = cfg.gpus * cfg.nodes
    if cfg.nodes > 1:
        mp.spawn(main, args=(cfg,), nprocs=cfg.gpus, join=True)
    else:
        main(0, cfg)
