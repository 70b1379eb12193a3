"""
Shape: train_unet(outdir) function: loaders from a make_loaders() helper, UNetGN + SGD(nesterov) + MultiStepLR, per-epoch loop that re-tiles the dataset, calls unet_model.train(), steps the scheduler under `if scheduler:`, then runs the batch loop; evaluate_net(unet_model, loader) helper afterwards.
Bug: scheduler.step() runs at the top of every epoch, before any optimizer.step() of that epoch.
Thread: https://github.com/Abe404/segmentation_of_roots_in_soil_with_unet/pull/4
"""
import sys
import time

import numpy as np
import torch
from torch.nn.functional import softmax
from torch.optim.lr_scheduler import MultiStepLR
from torch.utils.data import DataLoader

from checkpointer import CheckPointer
from data_utils import get_files_split
from datasets import UNetTrainDataset, UNetValDataset
from loss import combined_loss
from unet import UNetGN


def make_loaders():
    val_ims, train_ims, val_annots, train_annots = get_files_split()
    tr_set = UNetTrainDataset(train_annots, train_ims)
    va_set = UNetValDataset(val_annots, val_ims)
    tr_loader = DataLoader(tr_set, batch_size=4, shuffle=True, num_workers=8,
                           drop_last=False, pin_memory=True)
    va_loader = DataLoader(va_set, batch_size=8, shuffle=False, num_workers=8,
                           drop_last=False, pin_memory=True)
    return tr_loader, va_loader


def init_conv_kaiming(m):
    if isinstance(m, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)):
        torch.nn.init.kaiming_normal_(m.weight.data)


def evaluate_net(unet_model, loader):
    unet_model.eval()
    total_loss = 0.0
    preds_all, true_all = [], []
    with torch.no_grad():
        for xb, yb in loader:
            target = yb.type(torch.LongTensor).cuda()
            out = unet_model(xb.cuda())
            total_loss += combined_loss(out, target).item()
            fg = softmax(out, 1)[:, 1, :]
            preds_all.append((fg > 0.5).view(-1).int().cpu().numpy())
            true_all.append(yb.view(-1).int().numpy())
    return total_loss / len(true_all), np.concatenate(preds_all), np.concatenate(true_all)


def train_unet(outdir):
    tile_loader, holdout_loader = make_loaders()
    n_epochs = 80
    unet_model = UNetGN()
    unet_model.apply(init_conv_kaiming)
    optimizer = torch.optim.SGD(unet_model.parameters(), lr=0.01, momentum=0.99,
                                nesterov=True, weight_decay=1e-5)
    scheduler = MultiStepLR(optimizer, gamma=0.3, milestones=[30, 60, 90])
    n_tiles = len(tile_loader.dataset)
    saver = CheckPointer(outdir, 'f1_score', 'max', tile_loader.batch_size, n_tiles)
    unet_model.cuda()
    global_step = 0

    for epoch in range(1, n_epochs + 1):
        tile_loader.dataset.assign_new_tiles()
        unet_model.train()
        if scheduler:
            scheduler.step()
        t0 = time.time()
        running = 0.0
        n_batches = 0
        for i, (xb, yb) in enumerate(tile_loader):
            xb = xb.cuda()
            yb = yb.cuda()
            optimizer.zero_grad()
            out = unet_model(xb)
            loss = combined_loss(out, yb)
            loss.backward()
            optimizer.step()
            running += loss.cpu().item()
            n_batches += 1
            global_step += 1
            sys.stdout.write(f"{i * tile_loader.batch_size}/{len(tile_loader.dataset)}\r")
        print(f"epoch {epoch} took {time.time() - t0:.1f}s, loss {running / max(n_batches, 1):.4f}")
        holdout_loss, holdout_pred, holdout_true = evaluate_net(unet_model, holdout_loader)
        saver.maybe_save(unet_model, {'loss': holdout_loss}, epoch)


if __name__ == '__main__':
    train_unet('../output/unet/run')
