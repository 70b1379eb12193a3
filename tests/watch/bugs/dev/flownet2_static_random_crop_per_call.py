"""A FlowNet-style optical flow training script: FlyingThings-like Dataset classes that read a frame
pair and its flow map and, when is_cropped is set, build a StaticRandomCrop(crop_size) and map it
over [img1, img2] and then over the flow; a small FlowNetS (frames stacked on channels,
batch-normalised encoder-decoder); a ModelAndLoss wrapper around an L1 loss that also reports EPE;
Adam; and a train(args, epoch, data_loader, model_and_loss, optimizer, is_validate) helper shared
by training and validation. StaticRandomCrop draws its offset inside __call__, so every call crops
a different window: the two frames and the flow are cut at three unrelated positions, the
displacement between the cropped frames no longer matches the flow label, and the network is
trained on mismatched targets (validation uses a centre crop and is consistent).

Thread: https://github.com/NVIDIA/flownet2-pytorch/issues/22
"""
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class StaticRandomCrop(object):
    def __init__(self, size):
        self.th, self.tw = size

    def __call__(self, img):
        h, w, _ = img.shape
        h1 = random.randint(0, h - self.th)
        w1 = random.randint(0, w - self.tw)
        return img[h1:(h1 + self.th), w1:(w1 + self.tw), :]


class StaticCenterCrop(object):
    def __init__(self, size):
        self.th, self.tw = size

    def __call__(self, img):
        h, w, _ = img.shape
        return img[(h - self.th) // 2:(h + self.th) // 2, (w - self.tw) // 2:(w + self.tw) // 2, :]


def render_scene(rng, h, w):
    """A frame pair with a textured background moved by a global integer translation."""
    coarse = rng.rand(h // 2 + 4, w // 2 + 4, 3)
    tex = np.kron(coarse, np.ones((2, 2, 1)))[:h + 8, :w + 8]
    dx, dy = rng.randint(-3, 4), rng.randint(-3, 4)
    img1 = tex[4:4 + h, 4:4 + w]
    img2 = tex[4 - dy:4 - dy + h, 4 - dx:4 - dx + w]
    flow = np.empty((h, w, 2), dtype=np.float32)
    flow[..., 0], flow[..., 1] = dx, dy
    return (255 * img1).astype(np.float32), (255 * img2).astype(np.float32), flow


class FlyingThings(Dataset):
    def __init__(self, args, is_cropped, n, seed):
        self.is_cropped = is_cropped
        self.crop_size = args["crop_size"]
        self.render_size = args["crop_size"]
        rng = np.random.RandomState(seed)
        self.samples = [render_scene(rng, *args["image_size"]) for _ in range(n)]

    def __getitem__(self, index):
        img1, img2, flow = self.samples[index]
        images = [img1, img2]
        if self.is_cropped:
            cropper = StaticRandomCrop(self.crop_size)
        else:
            cropper = StaticCenterCrop(self.render_size)
        images = list(map(cropper, images))
        flow = cropper(flow)
        images = np.array(images).transpose(3, 0, 1, 2)
        flow = flow.transpose(2, 0, 1)
        return [torch.from_numpy(images.copy())], [torch.from_numpy(flow.copy())]

    def __len__(self):
        return len(self.samples)


def conv(in_planes, out_planes, stride=1):
    return nn.Sequential(nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(out_planes), nn.LeakyReLU(0.1))


class FlowNetS(nn.Module):
    def __init__(self, rgb_max=255.0):
        super().__init__()
        self.rgb_max = rgb_max
        self.conv1 = conv(6, 32, stride=2)
        self.conv2 = conv(32, 64, stride=2)
        self.conv3 = conv(64, 64)
        self.deconv2 = nn.Sequential(nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.LeakyReLU(0.1))
        self.predict_flow = nn.Conv2d(32 + 32, 2, 3, padding=1)

    def forward(self, inputs):
        rgb_mean = inputs.contiguous().view(inputs.size()[:2] + (-1,)).mean(dim=-1).view(inputs.size()[:2] + (1, 1, 1))
        x = (inputs - rgb_mean) / self.rgb_max
        x = torch.cat((x[:, :, 0], x[:, :, 1]), dim=1)
        c1 = self.conv1(x)
        c3 = self.conv3(self.conv2(c1))
        flow2 = self.predict_flow(torch.cat([self.deconv2(c3), c1], 1))
        return F.interpolate(flow2, scale_factor=2, mode="bilinear", align_corners=False)


class L1Loss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss_labels = ["L1", "EPE"]

    def forward(self, output, target):
        lossvalue = torch.abs(output - target).mean()
        epevalue = torch.norm(target - output, p=2, dim=1).mean()
        return [lossvalue, epevalue]


class ModelAndLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = FlowNetS()
        self.loss = L1Loss()

    def forward(self, data, target, inference=False):
        output = self.model(data)
        loss_values = self.loss(output, target)
        return (loss_values, output) if inference else loss_values


def train(args, epoch, data_loader, model_and_loss, optimizer, is_validate=False):
    total_loss, total_epe = 0.0, 0.0
    if is_validate:
        model_and_loss.eval()
    else:
        model_and_loss.train()
    for batch_idx, (data, target) in enumerate(data_loader):
        optimizer.zero_grad() if not is_validate else None
        with torch.set_grad_enabled(not is_validate):
            losses = model_and_loss(data[0], target[0])
        loss_val = losses[0]
        if not is_validate:
            loss_val.backward()
            optimizer.step()
        total_loss += loss_val.item()
        total_epe += losses[1].item()
    n = len(data_loader)
    tag = "Validation" if is_validate else "Training"
    print(f"{tag} Epoch {epoch} L1: {total_loss / n:.3f}, EPE: {total_epe / n:.3f}")
    return total_loss / n


def main():
    random.seed(0)
    torch.manual_seed(0)
    args = {"image_size": (24, 32), "crop_size": (16, 24), "batch_size": 8, "total_epochs": 8}
    train_loader = DataLoader(FlyingThings(args, is_cropped=True, n=160, seed=0), batch_size=args["batch_size"],
                              shuffle=True, generator=torch.Generator().manual_seed(0))
    validation_loader = DataLoader(FlyingThings(args, is_cropped=False, n=48, seed=1), batch_size=args["batch_size"])
    model_and_loss = ModelAndLoss()
    optimizer = torch.optim.Adam(model_and_loss.parameters(), lr=2e-3)
    for epoch in range(args["total_epochs"]):
        train(args, epoch, train_loader, model_and_loss, optimizer)
        train(args, epoch, validation_loader, model_and_loss, optimizer, is_validate=True)


if __name__ == "__main__":
    main()
