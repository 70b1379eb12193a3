"""
Shape: train_model(model, device, n_epochs, ..., amp, max_norm) function: random_split + DataLoaders from a dl_kwargs dict, RMSprop + ReduceLROnPlateau, torch.cuda.amp.GradScaler(enabled=amp), autocast forward with CE/BCE + dice loss, mid-epoch evaluate() from another module.
Bug: clip_grad_norm_ runs on the still-scaled gradients right after grad_scaler.scale(loss).backward(), with no grad_scaler.unscale_(optimizer) first.
Thread: https://github.com/milesial/Pytorch-UNet/pull/470
"""
import os
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, random_split

from evaluate import evaluate
from unet import UNet
from utils.data_loading import BasicDataset, CarvanaDataset
from utils.dice_score import dice_loss

IMG_DIR = Path('./data/imgs/')
MASK_DIR = Path('./data/masks/')


def train_model(model, device, n_epochs=5, bs=1, lr=1e-5, val_frac=0.1,
                scale=0.5, amp=False, weight_decay=1e-8, momentum=0.999, max_norm=1.0):
    try:
        ds = CarvanaDataset(IMG_DIR, MASK_DIR, scale)
    except (AssertionError, RuntimeError, IndexError):
        ds = BasicDataset(IMG_DIR, MASK_DIR, scale)

    num_val = int(len(ds) * val_frac)
    num_train = len(ds) - num_val
    tr_subset, va_subset = random_split(ds, [num_train, num_val], generator=torch.Generator().manual_seed(0))

    dl_kwargs = dict(batch_size=bs, num_workers=os.cpu_count(), pin_memory=True)
    tr_loader = DataLoader(tr_subset, shuffle=True, **dl_kwargs)
    va_loader = DataLoader(va_subset, shuffle=False, drop_last=True, **dl_kwargs)

    optimizer = optim.RMSprop(model.parameters(), lr=lr, weight_decay=weight_decay,
                              momentum=momentum, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, 'max', patience=5)
    grad_scaler = torch.cuda.amp.GradScaler(enabled=amp)
    seg_loss = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    n_steps = 0

    for epoch in range(1, n_epochs + 1):
        model.train()
        for batch in tr_loader:
            imgs, gt = batch['image'], batch['mask']
            imgs = imgs.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
            gt = gt.to(device=device, dtype=torch.long)

            with torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=amp):
                logits = model(imgs)
                if model.n_classes == 1:
                    loss = seg_loss(logits.squeeze(1), gt.float())
                    loss += dice_loss(F.sigmoid(logits.squeeze(1)), gt.float(), multiclass=False)
                else:
                    loss = seg_loss(logits, gt)
                    loss += dice_loss(F.softmax(logits, dim=1).float(),
                                      F.one_hot(gt, model.n_classes).permute(0, 3, 1, 2).float(),
                                      multiclass=True)

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            grad_scaler.step(optimizer)
            grad_scaler.update()
            n_steps += 1

            every = num_train // (5 * bs)
            if every > 0 and n_steps % every == 0:
                dice = evaluate(model, va_loader, device, amp)
                scheduler.step(dice)


if __name__ == '__main__':
    dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    net = UNet(n_channels=3, n_classes=2, bilinear=False)
    net = net.to(memory_format=torch.channels_last)
    net.to(device=dev)
    train_model(net, dev, amp=True)
