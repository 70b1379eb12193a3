"""
Shape: main(option_file) reading an option dict cfg; loaders built in a `for split_name, ds_cfg in cfg['datasets'].items()` loop, with a DistributedSampler (shuffle=False on the DataLoader) only when cfg['dist']; the model wrapper from define_Model(cfg) owns its optimizer and the loop calls model.update_learning_rate / feed_data / optimize_parameters.
Bug: in distributed mode dist_sampler.set_epoch(epoch) is never called in the endless epoch loop, so every epoch sees the same order.
Thread: https://github.com/cszn/KAIR/pull/106
"""
import argparse
import math
import os
import random

import numpy as np
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from data.select_dataset import define_Dataset
from models.select_model import define_Model
from utils import utils_image as util
from utils import utils_option as option
from utils.utils_dist import get_dist_info, init_dist


def main(option_file='options/train_msrresnet_psnr.json'):
    ap = argparse.ArgumentParser()
    ap.add_argument('--cfg', type=str, default=option_file)
    ap.add_argument('--dist', default=False)
    cli = ap.parse_args()
    cfg = option.parse(cli.cfg, is_train=True)
    cfg['dist'] = cli.dist

    if cfg['dist']:
        init_dist('pytorch')
    cfg['rank'], cfg['world_size'] = get_dist_info()

    step_count = 0
    cfg = option.dict_to_nonedict(cfg)

    rng_seed = cfg['train']['manual_seed']
    if rng_seed is None:
        rng_seed = random.randint(1, 10000)
    random.seed(rng_seed)
    np.random.seed(rng_seed)
    torch.manual_seed(rng_seed)
    torch.cuda.manual_seed_all(rng_seed)

    for split_name, ds_cfg in cfg['datasets'].items():
        if split_name == 'train':
            tr_set = define_Dataset(ds_cfg)
            n_iters = int(math.ceil(len(tr_set) / ds_cfg['dataloader_batch_size']))
            if cfg['dist']:
                dist_sampler = DistributedSampler(tr_set, shuffle=ds_cfg['dataloader_shuffle'],
                                                   drop_last=True, seed=rng_seed)
                tr_loader = DataLoader(tr_set,
                                          batch_size=ds_cfg['dataloader_batch_size'] // cfg['num_gpu'],
                                          shuffle=False,
                                          num_workers=ds_cfg['dataloader_num_workers'] // cfg['num_gpu'],
                                          drop_last=True, pin_memory=True, sampler=dist_sampler)
            else:
                tr_loader = DataLoader(tr_set,
                                          batch_size=ds_cfg['dataloader_batch_size'],
                                          shuffle=ds_cfg['dataloader_shuffle'],
                                          num_workers=ds_cfg['dataloader_num_workers'],
                                          drop_last=True, pin_memory=True)
        elif split_name == 'test':
            te_set = define_Dataset(ds_cfg)
            te_loader = DataLoader(te_set, batch_size=1, shuffle=False, num_workers=1,
                                     drop_last=False, pin_memory=True)
        else:
            raise NotImplementedError(split_name)

    model = define_Model(cfg)
    model.init_train()

    for epoch in range(1000000):
        for i, pair in enumerate(tr_loader):
            step_count += 1
            model.update_learning_rate(step_count)
            model.feed_data(pair)
            model.optimize_parameters(step_count)

            if step_count % cfg['train']['checkpoint_save'] == 0 and cfg['rank'] == 0:
                model.save(step_count)

            if step_count % cfg['train']['checkpoint_test'] == 0 and cfg['rank'] == 0:
                total = 0.0
                for n, te_pair in enumerate(te_loader, 1):
                    model.feed_data(te_pair)
                    model.test()
                    vis = model.current_visuals()
                    total += util.calculate_psnr(util.tensor2uint(vis['E']), util.tensor2uint(vis['H']),
                                                 border=cfg['scale'])
                print(epoch, step_count, total / n)


if __name__ == '__main__':
    main()
