"""
Shape: detection-toolbox training API: build_dataloader(dataset, imgs_per_gpu, workers_per_gpu, num_gpus, dist, **kwargs) chooses a (Distributed)GroupSampler in the distributed case and otherwise decides the sampler from a `shuffle` value read out of **kwargs, then builds a DataLoader with a partial collate; _non_dist_train(model, dataset, cfg) builds one loader per dataset without a shuffle value, wraps the detector in MMDataParallel and hands everything to an mmcv Runner with a batch_processor callback.
Bug: in the non-distributed path no shuffle value reaches the builder, so the sampler stays None and the training DataLoader walks the detection dataset in index order every epoch (and passing shuffle=True through kwargs makes DataLoader reject sampler plus shuffle).
Thread: https://github.com/open-mmlab/mmdetection/issues/1649
"""
from functools import partial

import torch
from mmcv.parallel import MMDataParallel, collate
from mmcv.runner import Runner, get_dist_info
from torch.utils.data import DataLoader

from mmdet.core import build_optimizer
from mmdet.datasets.loader.sampler import DistributedGroupSampler, GroupSampler


def build_dataloader(dataset, imgs_per_gpu, workers_per_gpu, num_gpus=1, dist=True, **kwargs):
    if dist:
        rank, world_size = get_dist_info()
        sampler = DistributedGroupSampler(dataset, imgs_per_gpu, world_size, rank)
        batch_size = imgs_per_gpu
        num_workers = workers_per_gpu
    else:
        shuffle = kwargs.get('shuffle', False)
        sampler = GroupSampler(dataset, imgs_per_gpu) if shuffle else None
        batch_size = num_gpus * imgs_per_gpu
        num_workers = num_gpus * workers_per_gpu

    return DataLoader(
        dataset,
        batch_size=batch_size,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=partial(collate, samples_per_gpu=imgs_per_gpu),
        pin_memory=False,
        **kwargs)


def parse_losses(losses):
    total = sum(value.mean() for key, value in losses.items() if 'loss' in key)
    log_vars = {key: value.mean().item() for key, value in losses.items()}
    log_vars['loss'] = total.item()
    return total, log_vars


def batch_processor(model, data, train_mode):
    losses = model(**data)
    loss, log_vars = parse_losses(losses)
    return dict(loss=loss, log_vars=log_vars, num_samples=len(data['img'].data))


def _non_dist_train(model, dataset, cfg, validate=False):
    datasets = dataset if isinstance(dataset, (list, tuple)) else [dataset]
    data_loaders = [
        build_dataloader(
            ds,
            cfg.data.imgs_per_gpu,
            cfg.data.workers_per_gpu,
            cfg.gpus,
            dist=False) for ds in datasets
    ]
    model = MMDataParallel(model, device_ids=range(cfg.gpus)).cuda()
    optimizer = build_optimizer(model, cfg.optimizer)
    runner = Runner(model, batch_processor, optimizer, cfg.work_dir, cfg.log_level)
    runner.register_training_hooks(cfg.lr_config, cfg.optimizer_config,
                                   cfg.checkpoint_config, cfg.log_config)
    if cfg.resume_from:
        runner.resume(cfg.resume_from)
    elif cfg.load_from:
        runner.load_checkpoint(cfg.load_from)
    runner.run(data_loaders, cfg.workflow, cfg.total_epochs)


def train_detector(model, dataset, cfg, distributed=False, validate=False):
    if distributed:
        raise NotImplementedError('distributed path omitted here')
    torch.backends.cudnn.benchmark = True
    _non_dist_train(model, dataset, cfg, validate=validate)
