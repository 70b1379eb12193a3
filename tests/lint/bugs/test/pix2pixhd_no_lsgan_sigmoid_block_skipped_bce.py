"""
Shape: A pix2pixHD-style GAN: a AdvCriterion wrapper picks MSELoss or BCELoss from an option flag; a
multiscale PatchGAN discriminator is assembled from PatchDisc blocks (registered one by one
with setattr when intermediate features are wanted, with an nn.Sigmoid block appended when
use_sigmoid is on); a model class with initialize(opt)/forward() returns the loss terms and a
script-level loop steps the G and D Adam optimizers.
Bug: with --no_lsgan the criterion is BCELoss and use_sigmoid is set, but in the intermediate-feature
path only the first depth+2 blocks are copied and run, so the Sigmoid block is never applied and
raw discriminator logits reach BCELoss (device-side assert); the reporter fixed it by using
BCEWithLogitsLoss.
Thread: https://github.com/NVIDIA/pix2pixHD/issues/9
"""
import numpy as np
import torch
from torch import nn


class AdvCriterion(nn.Module):
    def __init__(self, use_lsgan=True, real_value=1.0, fake_value=0.0, tensor=torch.FloatTensor):
        super().__init__()
        self.real_value = real_value
        self.fake_value = fake_value
        self.tensor_cls = tensor
        if use_lsgan:
            self.crit = nn.MSELoss()
        else:
            self.crit = nn.BCELoss()

    def target_like(self, pred, is_real):
        fill = self.real_value if is_real else self.fake_value
        return self.tensor_cls(pred.size()).fill_(fill)

    def __call__(self, outputs, is_real):
        total = 0
        for per_scale in outputs:
            last = per_scale[-1]
            total += self.crit(last, self.target_like(last, is_real))
        return total


class PatchDisc(nn.Module):
    def __init__(self, in_ch, ndf=64, depth=3, norm_layer=nn.BatchNorm2d,
                 use_sigmoid=False, keep_feats=False):
        super().__init__()
        self.keep_feats = keep_feats
        self.depth = depth
        k, pad = 4, int(np.ceil(3 / 2.0))
        blocks = [[nn.Conv2d(in_ch, ndf, k, stride=2, padding=pad), nn.LeakyReLU(0.2, True)]]
        width = ndf
        for _ in range(1, depth):
            prev, width = width, min(width * 2, 512)
            blocks += [[nn.Conv2d(prev, width, k, stride=2, padding=pad),
                        norm_layer(width), nn.LeakyReLU(0.2, True)]]
        prev, width = width, min(width * 2, 512)
        blocks += [[nn.Conv2d(prev, width, k, stride=1, padding=pad),
                    norm_layer(width), nn.LeakyReLU(0.2, True)]]
        blocks += [[nn.Conv2d(width, 1, k, stride=1, padding=pad)]]
        if use_sigmoid:
            blocks += [[nn.Sigmoid()]]
        if keep_feats:
            for idx, blk in enumerate(blocks):
                setattr(self, 'model' + str(idx), nn.Sequential(*blk))
        else:
            flat = []
            for blk in blocks:
                flat += blk
            self.model = nn.Sequential(*flat)

    def forward(self, inp):
        if not self.keep_feats:
            return self.model(inp)
        outs = [inp]
        for n in range(self.depth + 2):
            outs.append(getattr(self, 'model' + str(n))(outs[-1]))
        return outs[1:]


class MultiScaleDisc(nn.Module):
    def __init__(self, in_ch, ndf=64, depth=3, norm_layer=nn.BatchNorm2d,
                 use_sigmoid=False, n_scales=3, keep_feats=False):
        super().__init__()
        self.n_scales = n_scales
        self.depth = depth
        self.keep_feats = keep_feats
        for i in range(n_scales):
            single = PatchDisc(in_ch, ndf, depth, norm_layer, use_sigmoid, keep_feats)
            if keep_feats:
                for j in range(depth + 2):
                    setattr(self, 'scale%d_layer%d' % (i, j), getattr(single, 'model' + str(j)))
            else:
                setattr(self, 'layer' + str(i), single.model)
        self.down = nn.AvgPool2d(3, stride=2, padding=[1, 1], count_include_pad=False)

    def run_one(self, blocks, x):
        if self.keep_feats:
            feats = [x]
            for blk in blocks:
                feats.append(blk(feats[-1]))
            return feats[1:]
        return [blocks(x)]

    def forward(self, inp):
        x = inp
        results = []
        for i in range(self.n_scales):
            idx = self.n_scales - 1 - i
            if self.keep_feats:
                blocks = [getattr(self, 'scale%d_layer%d' % (idx, j)) for j in range(self.depth + 2)]
            else:
                blocks = getattr(self, 'layer' + str(idx))
            results.append(self.run_one(blocks, x))
            if i != self.n_scales - 1:
                x = self.down(x)
        return results


def define_D(in_ch, ndf, depth, use_sigmoid, n_scales, keep_feats):
    netD = MultiScaleDisc(in_ch, ndf, depth, nn.InstanceNorm2d,
                                   use_sigmoid, n_scales, keep_feats)
    return netD.cuda()


class Pix2PixHDModel(object):
    def initialize(self, opt, netG):
        self.opt = opt
        self.netG = netG
        with_sig = opt.no_lsgan
        self.netD = define_D(opt.label_nc + opt.output_nc, opt.ndf, opt.n_layers_D,
                             with_sig, opt.n_scales, not opt.no_ganFeat_loss)
        self.adv_loss = AdvCriterion(use_lsgan=not opt.no_lsgan, tensor=torch.cuda.FloatTensor)
        self.feat_l1 = nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

    def forward(self, label, real):
        fake = self.netG(label)
        pred_fake_d = self.netD(torch.cat((label, fake.detach()), dim=1))
        loss_D_fake = self.adv_loss(pred_fake_d, False)
        pred_real = self.netD(torch.cat((label, real), dim=1))
        loss_D_real = self.adv_loss(pred_real, True)
        pred_fake = self.netD(torch.cat((label, fake), dim=1))
        loss_G_GAN = self.adv_loss(pred_fake, True)
        loss_G_feat = 0
        use_feat = not self.opt.no_ganFeat_loss
        if use_feat:
            w = 4.0 / (self.opt.n_layers_D + 1) / self.opt.n_scales
            for i in range(self.opt.n_scales):
                for j in range(len(pred_fake[i]) - 1):
                    loss_G_feat += w * self.feat_l1(pred_fake[i][j], pred_real[i][j].detach()) * self.opt.lambda_feat
        return loss_G_GAN, loss_G_feat, loss_D_real, loss_D_fake


def train(opt, model, loader):
    for epoch in range(opt.niter):
        for batch in loader:
            label, real = batch['label'].cuda(), batch['image'].cuda()
            g_gan, g_feat, d_real, d_fake = model.forward(label, real)
            loss_D = (d_fake + d_real) * 0.5
            loss_G = g_gan + g_feat
            model.optimizer_G.zero_grad()
            loss_G.backward()
            model.optimizer_G.step()
            model.optimizer_D.zero_grad()
            loss_D.backward()
            model.optimizer_D.step()
