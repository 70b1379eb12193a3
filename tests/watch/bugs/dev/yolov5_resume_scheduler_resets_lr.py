"""A YOLO-style detector training script with resume support, shaped like the
``train(hyp, opt, ...)`` function of a single-stage detection repo: the model's parameters
are split into three SGD groups (BatchNorm weights, conv weights with weight decay, biases),
the first epochs use an iteration-based warmup, a cosine ``LambdaLR`` steps once per epoch,
and a checkpoint dict with the model, the optimizer state and the epoch is kept after every
epoch. On ``--resume`` the script rebuilds the optimizer, calls
``optimizer.load_state_dict(ckpt['optimizer'])`` (which restores the decayed learning
rate), and only afterwards constructs the ``LambdaLR`` and sets
``scheduler.last_epoch = start_epoch - 1``. The bug is that order: constructing LambdaLR
immediately performs a step at epoch 0 and overwrites every group's lr with
``initial_lr * lf(0)``, the peak learning rate. Setting ``last_epoch`` afterwards does not
undo it, so the whole first resumed epoch, late in the cosine schedule, runs at the full
initial learning rate before the schedule snaps back. Nothing errors; the logged lr jumps
and the box/objectness losses and validation IoU of the nearly converged detector get
worse after the resume and do not recover in the remaining epochs.

Thread: https://github.com/ultralytics/yolov5/issues/292
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler

IMG, STRIDE = 32, 4
GRID = IMG // STRIDE


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    imgs = 0.3 * torch.randn(n, 3, IMG, IMG, generator=g)
    targets = []  # (image index, x center, y center, w, h) in pixels
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            w, h = torch.randint(4, 12, (2,), generator=g).tolist()
            x0 = int(torch.randint(0, IMG - w, (1,), generator=g))
            y0 = int(torch.randint(0, IMG - h, (1,), generator=g))
            imgs[i, :, y0:y0 + h, x0:x0 + w] += torch.tensor([1.0, 0.5, -0.5]).view(3, 1, 1)
            targets.append([i, x0 + w / 2, y0 + h / 2, w, h])
    return imgs, torch.tensor(targets)


def conv(cin, cout, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(conv(3, 16), conv(16, 32, 2), conv(32, 32), conv(32, 48, 2), conv(48, 48))
        self.detect = nn.Conv2d(48, 5, 1)  # obj, tx, ty, tw, th per grid cell

    def forward(self, x):
        return self.detect(self.backbone(x)).permute(0, 2, 3, 1)


def build_targets(targets, idx):
    sel = targets[torch.isin(targets[:, 0].long(), idx)]
    remap = {int(v): k for k, v in enumerate(idx.tolist())}
    b = torch.tensor([remap[int(v)] for v in sel[:, 0]], dtype=torch.long)
    gx, gy = (sel[:, 1] / STRIDE).clamp(max=GRID - 1e-3), (sel[:, 2] / STRIDE).clamp(max=GRID - 1e-3)
    gi, gj = gx.long(), gy.long()
    tbox = torch.stack([gx - gi, gy - gj, torch.log(sel[:, 3] / STRIDE), torch.log(sel[:, 4] / STRIDE)], 1)
    return b, gj, gi, tbox


def compute_loss(p, targets, idx):
    b, gj, gi, tbox = build_targets(targets, idx)
    tobj = torch.zeros(p.shape[:3])
    tobj[b, gj, gi] = 1.0
    ps = p[b, gj, gi]
    pbox = torch.cat([ps[:, 1:3].sigmoid(), ps[:, 3:5]], 1)
    lbox = F.mse_loss(pbox, tbox)
    lobj = F.binary_cross_entropy_with_logits(p[..., 0], tobj)
    return lbox + 2.0 * lobj, lbox.detach(), lobj.detach()


def box_iou_at_targets(p, targets, idx):
    b, gj, gi, tbox = build_targets(targets, idx)
    ps = p[b, gj, gi]
    pxy, pwh = ps[:, 1:3].sigmoid(), ps[:, 3:5].exp()
    txy, twh = tbox[:, :2], tbox[:, 2:].exp()
    lt = torch.max(pxy - pwh / 2, txy - twh / 2)
    rb = torch.min(pxy + pwh / 2, txy + twh / 2)
    inter = (rb - lt).clamp(min=0).prod(1)
    union = pwh.prod(1) + twh.prod(1) - inter
    hit = ps[:, 0].sigmoid() > 0.5
    return ((inter / union) * hit).mean().item()


def validate(model, val):
    imgs, targets = val
    model.eval()
    with torch.no_grad():
        p = model(imgs)
        idx = torch.arange(len(imgs))
        loss, _, _ = compute_loss(p, targets, idx)
        miou = box_iou_at_targets(p, targets, idx)
    model.train()
    return loss.item(), miou


def train(hyp, opt, data, ckpt=None):
    (train_imgs, train_targets), val = data
    torch.manual_seed(opt["seed"] + (0 if ckpt is None else ckpt["epoch"] + 1))
    model = Model()
    norm_w, conv_w, biases = [], [], []
    for name, prm in model.named_parameters():
        if name.endswith("bias"):
            biases.append(prm)
        elif prm.ndim == 1:
            norm_w.append(prm)
        else:
            conv_w.append(prm)
    optimizer = torch.optim.SGD(norm_w, lr=hyp["lr0"], momentum=hyp["momentum"], nesterov=True)
    optimizer.add_param_group({"params": conv_w, "weight_decay": hyp["weight_decay"]})
    optimizer.add_param_group({"params": biases})

    start_epoch, epochs = 0, opt["epochs"]
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        if ckpt["optimizer"] is not None:
            optimizer.load_state_dict(ckpt["optimizer"])
        start_epoch = ckpt["epoch"] + 1
        print(f"resuming from epoch {start_epoch}, restored lr {optimizer.param_groups[0]['lr']:.5f}")

    # BUG: created after loading the optimizer; LambdaLR's constructor resets lr to lr0 * lf(0)
    def lf(e):  # cosine from 1.0 down to 0.1
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * e / epochs))

    scheduler = lr_scheduler.LambdaLR(optimizer, lr_lambda=lf)
    scheduler.last_epoch = start_epoch - 1  # continue the schedule where it stopped

    n = len(train_imgs)
    nb = n // opt["batch_size"]
    nw = 2 * nb  # warmup iterations
    last = None
    for epoch in range(start_epoch, epochs):
        model.train()
        perm = torch.randperm(n)
        mloss = torch.zeros(2)
        for i in range(nb):
            ni = i + nb * epoch
            if ni <= nw:  # linear warmup of lr (biases start high) and momentum
                frac = ni / nw
                for j, group in enumerate(optimizer.param_groups):
                    start = 0.1 if j == 2 else 0.0
                    group["lr"] = start + frac * (group["initial_lr"] * lf(epoch) - start)
                    group["momentum"] = 0.9 + frac * (hyp["momentum"] - 0.9)
            idx = perm[i * opt["batch_size"]:(i + 1) * opt["batch_size"]]
            p = model(train_imgs[idx])
            loss, lbox, lobj = compute_loss(p, train_targets, idx)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            mloss = (mloss * i + torch.stack([lbox, lobj])) / (i + 1)
        lr = optimizer.param_groups[1]["lr"]
        scheduler.step()
        vloss, viou = validate(model, val)
        print(f"epoch {epoch + 1:2d}/{epochs}  lr {lr:.5f}  box {mloss[0]:.4f}  obj {mloss[1]:.4f}"
              f"  val loss {vloss:.4f}  val IoU {viou:.3f}")
        last = {"epoch": epoch, "model": copy.deepcopy(model.state_dict()),
                "optimizer": copy.deepcopy(optimizer.state_dict())}
        if opt.get("stop_after") is not None and epoch + 1 == opt["stop_after"]:
            print("-- training interrupted, last checkpoint kept --")
            break
    return last


def main():
    torch.manual_seed(0)
    hyp = {"lr0": 0.04, "momentum": 0.937, "weight_decay": 5e-4}
    data = (make_data(256, 1), make_data(128, 2))
    opt = {"epochs": 12, "batch_size": 16, "seed": 0, "stop_after": 10}
    ckpt = train(hyp, opt, data)
    train(hyp, dict(opt, stop_after=None), data, ckpt=ckpt)  # python train.py --resume


if __name__ == "__main__":
    main()
