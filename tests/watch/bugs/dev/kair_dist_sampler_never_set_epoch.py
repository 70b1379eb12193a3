"""A KAIR-style main_train_psnr.py: an options dict (dist, rank, world_size, datasets, train),
a DatasetSR that returns random L/H patch pairs, a DistributedSampler built with
shuffle=dataloader_shuffle when opt['dist'] is set and a DataLoader with shuffle=False and that
sampler, and a ModelPlain wrapper (feed_data, optimize_parameters with an L1 G_lossfn and Adam,
update_learning_rate with a MultiStepLR, current_log) driven by a loop over epochs and batches
that counts current_step and prints logs on rank 0. The epoch loop never calls
train_sampler.set_epoch(epoch), so the sampler's permutation is seeded identically every epoch:
each rank gets the same shard of images in the same order with the same batch boundaries for the
whole run, and shuffling happens only once. Rank 0 of a two-rank job is simulated.

Thread: https://github.com/cszn/KAIR/pull/106
"""
import random

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class DatasetSR(Dataset):
    def __init__(self, opt):
        self.opt = opt
        self.sf, self.patch = opt["scale"], opt["H_size"]
        g = torch.Generator().manual_seed(opt["seed"])
        n = opt["num_images"]
        # smooth synthetic "high-resolution" images: a few random low-frequency components
        yy, xx = torch.meshgrid(torch.linspace(0, 1, 48), torch.linspace(0, 1, 48), indexing="ij")
        freqs = torch.randint(1, 6, (n, 4, 2), generator=g).float()
        phase = torch.rand(n, 4, generator=g) * 6.28
        amp = torch.rand(n, 4, 3, generator=g)
        waves = torch.sin(freqs[..., 0, None, None] * 3.14 * xx + freqs[..., 1, None, None] * 3.14 * yy
                          + phase[..., None, None])
        self.images = 0.5 + 0.25 * torch.einsum("nkhw,nkc->nchw", waves, amp)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        img_H = self.images[index]
        top = random.randint(0, img_H.shape[1] - self.patch)
        left = random.randint(0, img_H.shape[2] - self.patch)
        img_H = img_H[:, top:top + self.patch, left:left + self.patch]
        img_L = F.avg_pool2d(img_H[None], self.sf)[0]
        return {"L": img_L, "H": img_H, "idx": index}


class SRNet(nn.Module):
    def __init__(self, nc=32, sf=2):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, nc, 3, padding=1), nn.ReLU(), nn.Conv2d(nc, nc, 3, padding=1),
                                  nn.ReLU(), nn.Conv2d(nc, 3 * sf * sf, 3, padding=1), nn.PixelShuffle(sf))
        self.sf = sf

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.sf, mode="nearest") + self.body(x)


class ModelPlain:
    def __init__(self, opt):
        self.opt = opt
        self.netG = SRNet(sf=opt["scale"])
        self.G_lossfn = nn.L1Loss()
        self.G_optimizer = torch.optim.Adam(self.netG.parameters(), lr=opt["train"]["G_optimizer_lr"])
        self.G_scheduler = torch.optim.lr_scheduler.MultiStepLR(
            self.G_optimizer, opt["train"]["G_scheduler_milestones"], opt["train"]["G_scheduler_gamma"])
        self.log_dict = {}

    def feed_data(self, data):
        self.L, self.H = data["L"], data["H"]

    def optimize_parameters(self, current_step):
        self.G_optimizer.zero_grad()
        self.E = self.netG(self.L)
        G_loss = self.G_lossfn(self.E, self.H)
        G_loss.backward()
        self.G_optimizer.step()
        self.log_dict["G_loss"] = G_loss.item()

    def update_learning_rate(self, n):
        self.G_scheduler.step()

    def current_learning_rate(self):
        return self.G_scheduler.get_last_lr()[0]

    def current_log(self):
        return self.log_dict


def main():
    random.seed(0)
    torch.manual_seed(0)
    opt = {
        "dist": True, "rank": 0, "world_size": 2, "scale": 2,
        "datasets": {"train": {"dataloader_shuffle": True, "dataloader_batch_size": 16, "H_size": 16,
                               "num_images": 256, "seed": 1}},
        "train": {"G_optimizer_lr": 2e-3, "G_scheduler_milestones": [80, 110], "G_scheduler_gamma": 0.5,
                  "checkpoint_print": 16, "epochs": 8},
    }
    dataset_opt = dict(opt["datasets"]["train"], scale=opt["scale"])
    train_set = DatasetSR(dataset_opt)
    if opt["dist"]:
        train_sampler = DistributedSampler(train_set, num_replicas=opt["world_size"], rank=opt["rank"],
                                           shuffle=dataset_opt["dataloader_shuffle"], drop_last=True, seed=0)
        train_loader = DataLoader(train_set, batch_size=dataset_opt["dataloader_batch_size"] // opt["world_size"],
                                  shuffle=False, num_workers=0, drop_last=True, sampler=train_sampler)
    else:
        train_loader = DataLoader(train_set, batch_size=dataset_opt["dataloader_batch_size"],
                                  shuffle=dataset_opt["dataloader_shuffle"], drop_last=True)

    model = ModelPlain(opt)
    current_step = 0
    for epoch in range(opt["train"]["epochs"]):
        first_batches = []
        for i, train_data in enumerate(train_loader):
            current_step += 1
            if i < 2:
                first_batches.append(train_data["idx"][:4].tolist())
            model.feed_data(train_data)
            model.optimize_parameters(current_step)
            model.update_learning_rate(current_step)
            if current_step % opt["train"]["checkpoint_print"] == 0 and opt["rank"] == 0:
                logs = model.current_log()
                print(f"<epoch:{epoch:3d}, iter:{current_step:6d}, lr:{model.current_learning_rate():.3e}> "
                      f"G_loss: {logs['G_loss']:.4e}")
        if opt["rank"] == 0:
            print(f"epoch {epoch}: first batches on rank 0 start with {first_batches}")


if __name__ == "__main__":
    main()
