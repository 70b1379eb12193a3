"""
Shape: main_worker(gpu, cfg) builds a torchvision net (DataParallel/.cuda), loaders from a DataloaderFactory, CrossEntropyLoss().cuda(gpu), SGD over add_weight_decay() groups, process_model() and get_lr_scheduler(); an `if cfg.admm:` / `else:` split where the else branch calls wrapper.replace_conv_recursively(net, 'Conv2dSQ', ...) and then loops train(...) / lr_sched.step() / validate(...), with train() and validate() imported helpers.
Bug: replace_conv_recursively swaps every Conv2d for a freshly built Conv2dSQ after the SGD optimizer was created from the old convolutions' parameters, so the new layers are never updated.
Thread: https://github.com/hustzxd/EfficientPyTorch/issues/1
"""
import os

import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim
import torchvision.models as models

from examples import (DataloaderFactory, add_weight_decay, get_base_parser, get_lr_scheduler,
                      get_summary_writer, process_model, save_checkpoint, train, validate)
from utils import wrapper

best_top1 = 0


def main_worker(gpu, cfg):
    global best_top1
    cfg.gpu = gpu
    net = models.__dict__[cfg.arch](pretrained=cfg.pretrained)

    if cfg.gpu is not None:
        torch.cuda.set_device(cfg.gpu)
        net.cuda(cfg.gpu)
    else:
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", cfg.gpus)
        if cfg.arch.startswith(('alexnet', 'vgg')):
            net.features = torch.nn.DataParallel(net.features)
            net.cuda()
        else:
            net = torch.nn.DataParallel(net)
            net.cuda()

    tb = get_summary_writer(cfg)
    loaders = DataloaderFactory(cfg)
    tr_loader, va_loader, tr_sampler = loaders.product_train_val_loader(loaders.imagenet2012)
    cfg.batch_num = tr_loader.__len__()

    ce = nn.CrossEntropyLoss().cuda(cfg.gpu)
    param_groups_wd = add_weight_decay(net, weight_decay=cfg.weight_decay, skip_keys=['expand_', 'scale', 'alpha'])
    optimizer = torch.optim.SGD(param_groups_wd, cfg.lr, momentum=cfg.momentum)

    process_model(net, optimizer, cfg)
    cudnn.benchmark = not cfg.evaluate
    lr_sched = get_lr_scheduler(optimizer, cfg)

    if cfg.evaluate:
        validate(va_loader, net, ce, cfg)
        return

    for _ in range(0, cfg.start_epoch):
        lr_sched.step()

    if cfg.admm:
        for ep in range(cfg.start_epoch, cfg.epochs):
            train(tr_loader, net, ce, optimizer, ep, cfg, tb)
            lr_sched.step()
            validate(va_loader, net, ce, cfg)
    else:
        wrapper.replace_conv_recursively(net, 'Conv2dSQ', nbits_a=cfg.qa, nbits_w=cfg.qw,
                                         sparsity=cfg.sparsity,
                                         total_iter=cfg.batch_num * cfg.epochs,
                                         INS=cfg.INS, beta=cfg.beta)
        cfg.arch = cfg.arch + '_sq'
        if not cfg.INS:
            validate(va_loader, net, ce, cfg)
        for ep in range(cfg.start_epoch, cfg.epochs):
            if cfg.distributed:
                tr_sampler.set_epoch(ep)
            train(tr_loader, net, ce, optimizer, ep, cfg, tb)
            lr_sched.step()
            top1, top5 = validate(va_loader, net, ce, cfg)
            tb.add_scalar('val/top1', top1, ep)
            is_best = top1 > best_top1
            best_top1 = max(top1, best_top1)
            save_checkpoint({'ep': ep + 1, 'arch': cfg.arch,
                             'state_dict': net.state_dict(), 'best_top1': best_top1,
                             'optimizer': optimizer.state_dict()},
                            is_best, prefix='{}/{}'.format(cfg.log_name, cfg.arch))
    tb.close()


def main():
    argp = get_base_parser()
    cfg = argp.parse_args()
    cfg.distributed = cfg.multiprocessing_distributed or cfg.world_size > 1
    main_worker(cfg.gpu, cfg)


if __name__ == '__main__':
    main()
