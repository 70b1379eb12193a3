"""
Shape: train_epoch(net, optimizer, scheduler, loader, device, pse_loss, epoch, steps_per_epoch, tb, log) helper that calls net.train(), steps the MultiStepLR, reads the lr, then runs the batch loop; main() builds PSENet, PSELoss, Adam and the scheduler (with last_epoch when resuming) and calls train_epoch per epoch, with a run_eval(psenet, ...) helper afterwards.
Bug: scheduler.step() runs at the top of train_epoch, before that epoch's optimizer.step() calls.
Thread: https://github.com/WenmuZhou/PSENet.pytorch/pull/93
"""
import os
import time

import torch
import torch.utils.data as Data
from torch import nn
from torch.utils.tensorboard import SummaryWriter
from torchvision import transforms

import config
from dataset.data_utils import MyDataset
from models import PSENet
from models.loss import PSELoss
from utils.utils import load_checkpoint, save_checkpoint, setup_logger


def init_weights(mod):
    if not isinstance(mod, nn.Conv2d):
        return
    nn.init.kaiming_normal_(mod.weight)
    if mod.bias is not None:
        nn.init.zeros_(mod.bias)


def train_epoch(net, optimizer, scheduler, loader, device, pse_loss, epoch, steps_per_epoch, tb, log):
    net.train()
    epoch_loss = 0.
    tick = time.time()
    scheduler.step()
    cur_lr = scheduler.get_lr()[0]
    for i, (imgs, gt, mask) in enumerate(loader):
        imgs, gt, mask = imgs.to(device), gt.to(device), mask.to(device)
        pred = net(imgs)
        l_text, l_kernel, loss = pse_loss(pred, gt, mask)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        step_id = epoch * steps_per_epoch + i
        tb.add_scalar('Train/loss', loss.item(), step_id)
        tb.add_scalar('Train/lr', cur_lr, step_id)
        if not i % config.display_interval:
            log.info('[{}/{}] [{}/{}] loss {:.4f} lr {} {:.2f}s'.format(
                epoch, config.epochs, i, steps_per_epoch, loss.item(), cur_lr, time.time() - tick))
            tick = time.time()
    return epoch_loss / steps_per_epoch, cur_lr


def run_eval(psenet, save_path, test_path, device):
    psenet.eval()
    raise NotImplementedError


def main():
    log = setup_logger(os.path.join(config.output_dir, 'train.log'))
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    ds = MyDataset(config.trainroot, data_shape=config.data_shape, n=config.n, m=config.m,
                          transform=transforms.Compose([transforms.ToTensor()]))
    loader = Data.DataLoader(dataset=ds, batch_size=config.train_batch_size, shuffle=True,
                                   num_workers=int(config.workers), drop_last=False)
    tb = SummaryWriter(log_dir=config.output_dir)

    psenet = PSENet(backbone=config.backbone, pretrained=config.pretrained, result_num=config.n,
                   scale=config.scale)
    if not (config.pretrained or config.restart_training):
        psenet.apply(init_weights)
    psenet = nn.DataParallel(psenet) if torch.cuda.device_count() > 1 else psenet
    psenet = psenet.to(device)

    pse_loss = PSELoss(Lambda=config.Lambda, reduction='mean', ratio=config.OHEM_ratio)
    optimizer = torch.optim.Adam(params=psenet.parameters(), lr=config.lr)
    resume = config.checkpoint != '' and not config.restart_training
    if resume:
        first_epoch = load_checkpoint(config.checkpoint, psenet, log, device, optimizer) + 1
        scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, config.lr_decay_step,
                                                         gamma=config.lr_gamma, last_epoch=first_epoch)
    else:
        first_epoch = config.start_epoch
        scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, config.lr_decay_step,
                                                         gamma=config.lr_gamma)

    steps_per_epoch = len(loader)
    for epoch in range(first_epoch, config.epochs):
        train_loss, lr = train_epoch(psenet, optimizer, scheduler, loader, device, pse_loss,
                                     epoch, steps_per_epoch, tb, log)
        if train_loss < 0.3:
            recall, precision, f1 = run_eval(psenet, os.path.join(config.output_dir, 'output'),
                                         config.testroot, device)
            save_checkpoint('{}/PSENet_{}.pth'.format(config.output_dir, epoch), psenet, optimizer,
                            epoch, log)
    tb.close()


if __name__ == '__main__':
    main()
