"""
Shape: module-level C/log/tb; main() builds AugmentCNN from a genotype in DataParallel (optionally .half()), SGD, then picks a Torch DataLoader or DALI iterator by C.data_loader_type, CosineAnnealingLR, and per epoch calls train(tr_iter, cnn, sgd, xent, ep) and validate(...); train() wraps each update in a nested one_step(xb, yb) closure with aux-loss, clip and sgd.step().
Bug: the Torch training DataLoader is built with shuffle=False, so every epoch sees the CIFAR batches in the same fixed order.
Thread: https://github.com/MAC-AutoML/rethinking_performance_estimation_in_NAS/issues/17
"""
import os

import numpy as np
import torch
import torch.nn as nn
from tensorboardX import SummaryWriter

import utils
from C import AugmentConfig
from models.augment_cnn import AugmentCNN
from models.genotypes import *

C = AugmentConfig()
gpu_dev = torch.device("cuda")
tb = SummaryWriter(log_dir=os.path.join(C.path, "tensorboard"))
log = utils.get_logger(os.path.join(C.path, C.name + ".log"))


def main():
    torch.cuda.set_device(int(C.gpus[0]))
    torch.manual_seed(C.seed)
    np.random.seed(C.seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False

    in_hw, in_ch, n_cls, tr_ds, va_ds = utils.get_data(
        C.dataset, C.data_path, C.image_size, C.cutout_length, validation=True)
    xent = nn.CrossEntropyLoss()
    xent = xent.to(gpu_dev)
    aux_on = C.aux_weight > 0
    cnn = AugmentCNN(C.image_size, in_ch, C.init_channels, n_cls, C.layers,
                       aux_on, eval(C.genotype))
    cnn = nn.DataParallel(cnn, device_ids=C.gpus).to(gpu_dev)
    if C.fp16:
        cnn = cnn.half()

    sgd = torch.optim.SGD(cnn.parameters(), C.lr, momentum=C.momentum,
                                weight_decay=C.weight_decay)

    if C.data_loader_type == 'Torch':
        tr_iter = torch.utils.data.DataLoader(tr_ds, batch_size=C.batch_size, shuffle=False,
                                                   num_workers=C.workers, pin_memory=True)
        va_iter = torch.utils.data.DataLoader(va_ds, batch_size=C.batch_size, shuffle=False,
                                                   num_workers=C.workers, pin_memory=True)
    elif C.data_loader_type == 'DALI':
        from DataLoaders_DALI import cifar10
        tr_iter = cifar10.get_cifar_iter_dali(type='train', image_dir=C.data_path,
                                                   batch_size=C.batch_size, num_threads=C.workers)
        va_iter = cifar10.get_cifar_iter_dali(type='val', image_dir=C.data_path,
                                                   batch_size=C.batch_size, num_threads=C.workers)
    else:
        raise NotImplementedError(C.data_loader_type)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(sgd, T_max=C.epochs)

    best_acc = 0.
    for ep in range(C.epochs):
        cosine.step()
        cnn.module.drop_path_prob(C.drop_path_prob * ep / C.epochs, 16 if C.fp16 else 32)
        train(tr_iter, cnn, sgd, xent, ep)
        meter = validate(va_iter, cnn, xent, ep)
        is_best = meter > best_acc
        best_acc = max(best_acc, meter)
        utils.save_checkpoint(cnn, C.path, is_best=is_best)


def train(tr_iter, cnn, sgd, xent, ep):
    meter = utils.AverageMeter()

    aux_w = C.aux_weight

    def one_step(xb, yb):
        sgd.zero_grad()
        out, aux_out = cnn(xb)
        loss = xent(out, yb)
        if aux_w > 0:
            loss = loss + aux_w * xent(aux_out, yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(cnn.parameters(), max_norm=C.grad_clip)
        sgd.step()
        p1, _ = utils.accuracy(out, yb, topk=(1, 5))
        meter.update(p1.item(), xb.size(0))

    cnn.train()
    if C.data_loader_type == 'DALI':
        for k, dali_batch in enumerate(tr_iter):
            xb = dali_batch[0]["dali_batch"].cuda(non_blocking=True)
            yb = dali_batch[0]["label"].squeeze().long().cuda(non_blocking=True)
            one_step(xb, yb)
        tr_iter.reset()
    else:
        for k, (xb, yb) in enumerate(tr_iter):
            xb, yb = xb.to(gpu_dev, non_blocking=True), yb.to(gpu_dev, non_blocking=True)
            if C.fp16:
                xb = xb.half()
            one_step(xb, yb)
    log.info("Train [{}] Prec@1 {:.4%}".format(ep + 1, meter.avg))


def validate(va_iter, cnn, xent, ep):
    meter = utils.AverageMeter()
    cnn.eval()
    with torch.no_grad():
        for k, (xb, yb) in enumerate(va_iter):
            xb, yb = xb.to(gpu_dev, non_blocking=True), yb.to(gpu_dev, non_blocking=True)
            out, _ = cnn(xb)
            p1, _ = utils.accuracy(out, yb, topk=(1, 5))
            meter.update(p1.item(), xb.size(0))
    return meter.avg


if __name__ == "__main__":
    main()
