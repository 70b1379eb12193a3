"""
Shape: a U-Net script split into a BatchNorm conv block, a train_net(net, epochs, batch_size, lr, ...) function and an
eval_net(net, dataset, gpu) helper (a separate eval module in the original, inlined here). train_net splits ids into
train/val, rebuilds image/mask generators every epoch, batches them with a batch() helper, applies sigmoid + BCELoss,
steps SGD with momentum and weight decay, then calls eval_net(net, val, gpu) for the dice score and saves a
checkpoint; the model is built and optionally loaded in __main__ and passed in.
Bug: neither train_net nor eval_net ever calls net.eval() (or net.train()), so validation feeds single images through
BatchNorm layers in training mode: the dice score uses per-image batch statistics and the running statistics are
updated by validation data.
Thread: https://github.com/milesial/Pytorch-UNet/issues/31
"""
import os
import sys
from optparse import OptionParser

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

from dice_loss import dice_coeff
from unet import UNet
from utils import batch, get_ids, get_imgs_and_masks, split_ids, split_train_val


class twin_conv(nn.Module):
    """(conv -> BN -> ReLU) twice"""

    def __init__(self, c_in, c_out):
        super(twin_conv, self).__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
            nn.Conv2d(c_out, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True),
        )

    def forward(self, t):
        return self.body(t)


def eval_net(net, dataset, gpu=False):
    """Dice score on the validation generator, one image at a time."""
    score = 0
    for k, pair in enumerate(dataset):
        image = torch.from_numpy(pair[0]).unsqueeze(0)
        target = torch.from_numpy(pair[1]).unsqueeze(0)
        if gpu:
            image, target = image.cuda(), target.cuda()
        pred = net(image)[0]
        pred = (torch.sigmoid(pred) > 0.5).float()
        score += dice_coeff(pred, target).item()
    return score / k


def train_net(net, epochs=5, batch_size=1, lr=0.1, val_percent=0.05, save_cp=True, gpu=False, img_scale=0.5):
    img_dir, mask_dir, ckpt_dir = 'data/train/', 'data/train_masks/', 'checkpoints/'
    all_ids = split_ids(get_ids(img_dir))
    parts = split_train_val(all_ids, val_percent)
    n_train = len(parts['train'])

    opt = optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=0.0005)
    bce = nn.BCELoss()

    for ep in range(epochs):
        print('epoch {}/{}'.format(ep + 1, epochs))
        tr_gen = get_imgs_and_masks(parts['train'], img_dir, mask_dir, img_scale)
        va_gen = get_imgs_and_masks(parts['val'], img_dir, mask_dir, img_scale)
        running = 0

        for j, chunk in enumerate(batch(tr_gen, batch_size)):
            x = torch.from_numpy(np.array([c[0] for c in chunk]).astype(np.float32))
            y = torch.from_numpy(np.array([c[1] for c in chunk]))
            if gpu:
                x, y = x.cuda(), y.cuda()

            probs = torch.sigmoid(net(x)).view(-1)
            loss = bce(probs, y.view(-1))
            running += loss.item()
            print('{0:.4f} --- loss: {1:.6f}'.format(j * batch_size / n_train, loss.item()))

            opt.zero_grad()
            loss.backward()
            opt.step()

        print('epoch done, mean loss {}'.format(running / j))
        dice = eval_net(net, va_gen, gpu)
        print('val dice {}'.format(dice))

        if save_cp:
            torch.save(net.state_dict(), ckpt_dir + 'CP{}.pth'.format(ep + 1))


def get_args():
    p = OptionParser()
    p.add_option('-e', '--epochs', dest='epochs', default=5, type='int')
    p.add_option('-b', '--batch-size', dest='batchsize', default=10, type='int')
    p.add_option('-l', '--learning-rate', dest='lr', default=0.1, type='float')
    p.add_option('-g', '--gpu', action='store_true', dest='gpu', default=False)
    p.add_option('-c', '--load', dest='load', default=False)
    p.add_option('-s', '--scale', dest='scale', type='float', default=0.5)
    opts, _ = p.parse_args()
    return opts


if __name__ == '__main__':
    a = get_args()
    model = UNet(n_channels=3, n_classes=1)
    if a.load:
        model.load_state_dict(torch.load(a.load))
    if a.gpu:
        model.cuda()
    try:
        train_net(net=model, epochs=a.epochs, batch_size=a.batchsize, lr=a.lr, gpu=a.gpu, img_scale=a.scale)
    except KeyboardInterrupt:
        torch.save(model.state_dict(), 'INTERRUPTED.pth')
        try:
            sys.exit(0)
        except SystemExit:
            os._exit(0)
