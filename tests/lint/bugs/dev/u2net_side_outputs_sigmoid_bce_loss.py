"""
Shape: flat training script; module-level bce = nn.BCELoss(reduction="mean") used by a fused_side_bce(s0..s6, gt) helper; nested-UNet model whose forward returns a 7-tuple of F.sigmoid side outputs; Variable-wrapped inputs, Adam, epoch/batch loops at module level.
Bug: every side output is squashed with F.sigmoid in forward and then scored with nn.BCELoss instead of BCEWithLogitsLoss on the raw maps.
Thread: https://github.com/xuebinqin/U-2-Net/pull/10
"""
import glob
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.autograd as autograd
from torch.utils.data import DataLoader
from torchvision import transforms

from data_loader import RandomCrop, RescaleT, SalObjDataset, ToTensorLab
from model.blocks import RSU4, RSU4F, RSU5, RSU6, RSU7

bce = nn.BCELoss(reduction="mean")


def fused_side_bce(s0, s1, s2, s3, s4, s5, s6, gt_v):
    l0 = bce(s0, gt_v)
    l1 = bce(s1, gt_v)
    l2 = bce(s2, gt_v)
    l3 = bce(s3, gt_v)
    l4 = bce(s4, gt_v)
    l5 = bce(s5, gt_v)
    l6 = bce(s6, gt_v)
    total = l0 + l1 + l2 + l3 + l4 + l5 + l6
    return l0, total


class NestedUNet(nn.Module):
    def __init__(self, c_in=3, c_out=1):
        super(NestedUNet, self).__init__()
        self.stage1 = RSU7(c_in, 32, 64)
        self.stage2 = RSU6(64, 32, 128)
        self.stage3 = RSU5(128, 64, 256)
        self.stage4 = RSU4(256, 128, 512)
        self.stage5, self.stage6 = RSU4F(512, 256, 512), RSU4F(512, 256, 512)
        self.pool = nn.MaxPool2d(2, stride=2, ceil_mode=True)
        self.side = nn.ModuleList([nn.Conv2d(c, c_out, 3, padding=1) for c in (64, 128, 256, 512, 512, 512)])
        self.up = nn.ModuleList([nn.Upsample(scale_factor=2 ** k, mode="bilinear") for k in range(6)])
        self.outconv = nn.Conv2d(6 * c_out, c_out, 1)

    def forward(self, x):
        feats = []
        h = x
        for i, stage in enumerate([self.stage1, self.stage2, self.stage3, self.stage4, self.stage5, self.stage6]):
            h = stage(h)
            feats.append(h)
            if i < 5:
                h = self.pool(h)
        sides = [self.up[i](self.side[i](f)) for i, f in enumerate(feats)]
        s1, s2, s3, s4, s5, s6 = sides
        s0 = self.outconv(torch.cat((s1, s2, s3, s4, s5, s6), 1))
        return F.sigmoid(s0), F.sigmoid(s1), F.sigmoid(s2), F.sigmoid(s3), F.sigmoid(s4), F.sigmoid(s5), F.sigmoid(s6)


root_dir = os.path.join(os.getcwd(), "train_data", "")
image_paths = glob.glob(root_dir + "images" + os.sep + "*.jpg")
mask_paths = [root_dir + "masks" + os.sep + os.path.basename(p).rsplit(".", 1)[0] + ".png" for p in image_paths]

dataset = SalObjDataset(img_name_list=image_paths, lbl_name_list=mask_paths,
                        transform=transforms.Compose([RescaleT(320), RandomCrop(288), ToTensorLab(flag=0)]))
loader = DataLoader(dataset, batch_size=12, shuffle=True, num_workers=1)

salnet = NestedUNet(3, 1)
if torch.cuda.is_available():
    salnet.cuda()

adam = optim.Adam(salnet.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

for epoch in range(0, 100000):
    salnet.train()
    for i, data in enumerate(loader):
        inputs = data["image"].type(torch.FloatTensor)
        labels = data["label"].type(torch.FloatTensor)
        if torch.cuda.is_available():
            img_v, gt_v = autograd.Variable(inputs.cuda(), requires_grad=False), autograd.Variable(labels.cuda(), requires_grad=False)
        else:
            img_v, gt_v = autograd.Variable(inputs, requires_grad=False), autograd.Variable(labels, requires_grad=False)

        adam.zero_grad()
        s0, s1, s2, s3, s4, s5, s6 = salnet(img_v)
        main_term, total_loss = fused_side_bce(s0, s1, s2, s3, s4, s5, s6, gt_v)
        total_loss.backward()
        adam.step()
        del s0, s1, s2, s3, s4, s5, s6, main_term, total_loss
