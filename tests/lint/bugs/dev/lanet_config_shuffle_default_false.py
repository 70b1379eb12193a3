"""
Shape: self-supervised keypoint training split across config, data loader, trainer and main modules, flattened here. An argparse group defines the training-data options (batch size, workers, pin_memory, a str2bool --shuffle flag, image shape); get_data_loader(config) builds an image-list Dataset with an augmentation transform and passes shuffle=config.shuffle (plus an optional sampler) to DataLoader; a Trainer class builds the keypoint network, its loss module, Adam and a MultiStepLR, and runs train()/train_one_epoch() with zero_grad/backward/step per batch; main() wires get_config -> get_data_loader -> Trainer.
Bug: the --shuffle option that feeds the training DataLoader defaults to False, so unless the user overrides it the training images are served in the order of the list file every epoch.
Thread: https://github.com/wangch-g/lanet/issues/5
"""
import argparse
import os

import torch
import torch.optim as optim
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from augmentations import ha_augment_sample, resize_sample, spatial_augment_sample
from loss_function import KeypointLoss
from network_v0.model import PointModel
from utils import to_tensor_sample


def str2bool(v):
    return v.lower() in ("true", "1")


parser = argparse.ArgumentParser(description="keypoint training")
data_group = parser.add_argument_group("Training data params")
data_group.add_argument("--train_txt", type=str, default="./datasets/train.txt")
data_group.add_argument("--train_root", type=str, default="./datasets/coco/")
data_group.add_argument("--batch_size", type=int, default=8)
data_group.add_argument("--num_workers", type=int, default=4)
data_group.add_argument("--pin_memory", type=str2bool, default=True)
data_group.add_argument("--shuffle", type=str2bool, default=False,
                        help="shuffle the training indices")
data_group.add_argument("--image_shape", type=tuple, default=(240, 320))
data_group.add_argument("--jittering", type=tuple, default=(0.5, 0.5, 0.2, 0.05))
train_group = parser.add_argument_group("Training params")
train_group.add_argument("--max_epoch", type=int, default=12)
train_group.add_argument("--init_lr", type=float, default=3e-4)
train_group.add_argument("--lr_factor", type=float, default=0.5)
train_group.add_argument("--display", type=int, default=50)
train_group.add_argument("--ckpt_dir", type=str, default="./checkpoints")
train_group.add_argument("--use_gpu", type=str2bool, default=True)


def make_transforms(shape, jitter):
    def _train(sample):
        sample = resize_sample(sample, image_shape=shape)
        sample = spatial_augment_sample(sample)
        sample = to_tensor_sample(sample)
        return ha_augment_sample(sample, jitter_paramters=jitter)
    return {"train": _train}


class ImageList(Dataset):
    def __init__(self, cfg, transform=None):
        with open(cfg.train_txt) as fh:
            self.items = [ln.split()[0] for ln in fh.read().splitlines() if ln.strip()]
        self.root = cfg.train_root
        self.transform = transform

    def __getitem__(self, idx):
        img = Image.open(self.root + self.items[idx])
        if img.mode == "L":
            rgb = Image.new("RGB", img.size)
            rgb.paste(img)
            img = rgb
        sample = {"image": img, "idx": idx}
        return self.transform(sample) if self.transform else sample

    def __len__(self):
        return len(self.items)


def get_data_loader(cfg, sampler=None, drop_last=True):
    tfs = make_transforms(cfg.image_shape, cfg.jittering)
    ds = ImageList(cfg, transform=tfs["train"])
    return DataLoader(ds, batch_size=cfg.batch_size, shuffle=cfg.shuffle, sampler=sampler,
                      num_workers=cfg.num_workers, pin_memory=cfg.pin_memory, drop_last=drop_last)


class Trainer(object):
    def __init__(self, cfg, train_loader):
        self.cfg = cfg
        self.loader = train_loader
        self.net = PointModel(is_test=False)
        if cfg.use_gpu:
            self.net.cuda()
        self.criterion = KeypointLoss(cfg)
        self.opt = optim.Adam(self.net.parameters(), lr=cfg.init_lr)
        self.sched = optim.lr_scheduler.MultiStepLR(self.opt, milestones=[4, 8], gamma=cfg.lr_factor)

    def train(self):
        for epoch in range(self.cfg.max_epoch):
            self.train_one_epoch(epoch)
            self.sched.step()
            torch.save({"epoch": epoch + 1, "model_state": self.net.state_dict()},
                       os.path.join(self.cfg.ckpt_dir, f"point_{epoch + 1}.pth"))

    def train_one_epoch(self, epoch):
        self.net.train()
        for i, batch in enumerate(tqdm(self.loader)):
            src = batch["image_aug"].cuda()
            tgt = batch["image"].cuda()
            homog = batch["homography"].cuda()
            out = self.net(src, tgt, homog)
            loss, loc, desc, score, corres = self.criterion(out)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if i % self.cfg.display == 0:
                print(f"epoch {epoch + 1} it {i} loss {loss.item():.4f} loc {loc.item():.4f}")


def main():
    cfg, _ = parser.parse_known_args()
    torch.manual_seed(0)
    loader = get_data_loader(cfg)
    Trainer(cfg, loader).train()


if __name__ == "__main__":
    main()
