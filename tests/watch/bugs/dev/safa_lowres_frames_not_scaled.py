"""A space-time video super-resolution trainer (SAFA-style): the dataset yields three
high-resolution frames, the matching low-resolution frames (both as 0-255 pixel values) and a
timestep; train(model, local_rank) runs a DistributedSampler-driven loop with a warmup-then-cosine
get_learning_rate(step), and Model.update(imgs, lowres, learning_rate, timestep, training) sets the
rate, predicts the three HR frames from the two outer LR frames (a blend of the upsampled input
frames plus a predicted residual, clamped to [0, 1]), takes an L1 loss, clips the gradient norm and
steps AdamW. evaluate() divides both the HR and the LR frames by 255, but the training loop
divides only the HR frames: the LR frames go into the network as raw 0-255 values while the
targets are in [0, 1], so the clamped prediction sits at 1 almost everywhere and the training
PSNR stays very low (the thread saw about 10 dB).

Thread: https://github.com/hzwer/WACV2024-SAFA/issues/8
"""
import math
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

args = SimpleNamespace(epoch=3, batch_size=4, world_size=1, warmup=10, step_per_epoch=None)


class FrameTripletDataset(Dataset):
    def __init__(self, split, n=96, size=16, scale=2):
        g = torch.Generator().manual_seed(0 if split == "train" else 1)
        yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
        freq = 2 + 5 * torch.rand(n, 3, 1, 1, generator=g)
        speed = 0.3 * torch.rand(n, 1, 1, 1, generator=g)
        frames = [(0.5 + 0.6 * torch.sin(freq * (xx - speed * k)) * torch.cos(freq * yy)).clamp(0, 1) for k in range(3)]
        self.hr = torch.round(255 * torch.cat(frames, 1))
        self.lr = torch.round(F.avg_pool2d(self.hr, scale))

    def __len__(self):
        return len(self.hr)

    def __getitem__(self, idx):
        return self.hr[idx], self.lr[idx], torch.full((1, 1, 1), 0.5)


class SpaceTimeNet(nn.Module):
    def __init__(self, ch=32, scale=2):
        super().__init__()
        self.scale = scale
        self.body = nn.Sequential(nn.Conv2d(7, ch, 3, 1, 1), nn.PReLU(ch), nn.Conv2d(ch, ch, 3, 1, 1), nn.PReLU(ch),
                                  nn.Conv2d(ch, 9 * scale * scale, 3, 1, 1), nn.PixelShuffle(scale))

    def forward(self, lowres, timestep):
        l0, l2 = lowres[:, :3], lowres[:, 3:6]
        t = timestep.expand(-1, 1, *l0.shape[-2:])
        res = self.body(torch.cat([l0, l2, t], 1))
        up0, up2 = (F.interpolate(x, scale_factor=self.scale, mode="bilinear", align_corners=False) for x in (l0, l2))
        bases = [up0, up0 * (1 - timestep) + up2 * timestep, up2]
        return [torch.clamp(bases[k] + res[:, 3 * k:3 * k + 3], 0, 1) for k in range(3)]


class Model:
    def __init__(self):
        self.net = SpaceTimeNet()
        self.optimG = torch.optim.AdamW(self.net.parameters(), lr=1e-6, weight_decay=1e-4)

    def update(self, imgs, lowres, learning_rate=0, timestep=0.5, training=True):
        for param_group in self.optimG.param_groups:
            param_group["lr"] = learning_rate
        if isinstance(timestep, float):
            timestep = torch.full((imgs.shape[0], 1, 1, 1), timestep)
        self.net.train(training)
        pred = self.net(lowres, timestep)
        loss_l1 = sum(F.l1_loss(pred[k], imgs[:, 3 * k:3 * k + 3]) for k in range(3)) / 3
        if training:
            self.optimG.zero_grad()
            loss_l1.backward()
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
            self.optimG.step()
        return pred, {"loss_l1": loss_l1.detach()}


def get_learning_rate(step):
    if step < args.warmup:
        return 2e-4 * step / args.warmup
    mul = np.cos((step - args.warmup) / (args.epoch * args.step_per_epoch - args.warmup) * math.pi) * 0.5 + 0.5
    return (2e-4 - 2e-6) * mul + 2e-6


def evaluate(model, val_data):
    psnr_list = []
    for imgs, lowres, timestep in val_data:
        imgs, lowres = imgs / 255., lowres / 255.
        with torch.no_grad():
            res, info = model.update(imgs, torch.cat((lowres[:, :3], lowres[:, 6:9]), 1), training=False)
        for j in range(imgs.shape[0]):
            mse = torch.mean((res[1][j] - imgs[j, 3:6]) ** 2).item()
            psnr_list.append(-10 * math.log10(mse + 1e-10))
    return float(np.mean(psnr_list))


def train(model, local_rank):
    step = 0
    dataset = FrameTripletDataset("train")
    sampler = DistributedSampler(dataset, num_replicas=args.world_size, rank=local_rank, seed=0)
    train_data = DataLoader(dataset, batch_size=args.batch_size, drop_last=True, sampler=sampler)
    args.step_per_epoch = len(train_data)
    val_data = DataLoader(FrameTripletDataset("test", n=32), batch_size=16)
    psnr_list = []
    for epoch in range(args.epoch):
        sampler.set_epoch(epoch)
        for i, (data_gpu, lowres, timestep) in enumerate(train_data):
            data_gpu = data_gpu / 255.
            imgs = data_gpu
            lowres = torch.cat((lowres[:, :3], lowres[:, 6:9]), 1)
            gt = data_gpu[:, 3:6]
            learning_rate = get_learning_rate(step) * args.world_size / 4
            pred, info = model.update(imgs, lowres, learning_rate, timestep, training=True)
            pred = pred[1]
            for j in range(gt.shape[0]):
                psnr_list.append(-10 * math.log10(1e-6 + torch.mean((gt[j] - pred[j]) ** 2).item()))
            psnr_list = psnr_list[-50:]
            if step % 8 == 0:
                print(f"epoch:{epoch} {i}/{args.step_per_epoch} lr:{learning_rate:.2e} "
                      f"loss_l1:{info['loss_l1'].item():.4e} train psnr:{np.mean(psnr_list):.2f}")
            step += 1
        print(f"epoch {epoch} test psnr {evaluate(model, val_data):.2f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    train(Model(), local_rank=0)
