"""A wireframe-parsing trainer in the HAWP style: train(cfg) builds the detector, a
make_optimizer(cfg, model) that puts every parameter in its own Adam (amsgrad) group, a
make_lr_scheduler(cfg, optimizer) returning MultiStepLR(milestones=cfg.STEPS, gamma), and a
LossReducer that sums the model's loss dict with per-term weights; the loop runs epochs
1..MAX_EPOCH, logs the loss terms and the current lr, and at the end of each epoch saves a
checkpoint and calls scheduler.step(epoch). Passing the epoch to step() sends MultiStepLR
down its closed-form path, which in the PyTorch release of the time (1.4) ran bisect over the
milestones Counter instead of a sorted list and so always counted one milestone passed: the
10x decay meant for epoch 25 of 30 is applied right after epoch 1, and the whole run trains
at a tenth of its learning rate. The stand-in scheduler below reproduces that release's
behaviour, since current PyTorch fixed the closed form. Nothing fails; the lr column of the
log shows the drop, and the junction and line heads end far from where the intended
schedule takes them.

Thread: https://github.com/cherubicXN/hawp/issues/3
"""
from bisect import bisect_right
from collections import Counter
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiStepLR:
    """Stand-in for torch.optim.lr_scheduler.MultiStepLR as shipped in PyTorch 1.4."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.optimizer = optimizer
        self.milestones = Counter(milestones)
        self.gamma = gamma
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):  # chainable form, used by step()
        if self.last_epoch not in self.milestones:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch] for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):  # used by step(epoch)
        return [base_lr * self.gamma ** bisect_right(self.milestones, self.last_epoch) for base_lr in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr


cfg = SimpleNamespace(
    SOLVER=SimpleNamespace(BASE_LR=4e-3, MAX_EPOCH=30, STEPS=(25,), GAMMA=0.1, WEIGHT_DECAY=1e-4, AMSGRAD=True),
    MODEL=SimpleNamespace(LOSS_WEIGHTS={"loss_jloc": 8.0, "loss_dis": 1.0}),
    IMS_PER_BATCH=16,
)

SIZE = 24


class WireframeDetector(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
        self.jloc_head = nn.Conv2d(32, 1, 1)
        self.dis_head = nn.Conv2d(32, 1, 1)

    def forward(self, images, annotations):
        feats = self.backbone(images)
        jloc = self.jloc_head(feats)
        dis = self.dis_head(feats)
        loss_dict = {
            "loss_jloc": F.binary_cross_entropy_with_logits(jloc, annotations["jmap"]),
            "loss_dis": F.l1_loss(dis, annotations["dis"]),
        }
        return loss_dict, {"jloc": jloc.sigmoid(), "dis": dis}


def make_optimizer(cfg, model):
    params = [{"params": [p], "lr": cfg.SOLVER.BASE_LR, "weight_decay": cfg.SOLVER.WEIGHT_DECAY}
              for _, p in model.named_parameters() if p.requires_grad]
    return torch.optim.Adam(params, cfg.SOLVER.BASE_LR, weight_decay=cfg.SOLVER.WEIGHT_DECAY,
                            amsgrad=cfg.SOLVER.AMSGRAD)


def make_lr_scheduler(cfg, optimizer):
    return MultiStepLR(optimizer, milestones=cfg.SOLVER.STEPS, gamma=cfg.SOLVER.GAMMA)


class LossReducer:
    def __init__(self, cfg):
        self.loss_weights = dict(cfg.MODEL.LOSS_WEIGHTS)

    def __call__(self, loss_dict):
        return sum(self.loss_weights[k] * loss_dict[k] for k in self.loss_weights)


def build_dataset(n, gen):
    """Images with two line segments; targets: junction map and distance-to-line map."""
    yy, xx = torch.meshgrid(torch.arange(SIZE).float(), torch.arange(SIZE).float(), indexing="ij")
    imgs, jmaps, dis = [], [], []
    for _ in range(n):
        img = 0.2 * torch.randn(SIZE, SIZE, generator=gen)
        jm = torch.zeros(SIZE, SIZE)
        dmin = torch.full((SIZE, SIZE), 1e9)
        for _ in range(2):
            p, q = torch.randint(2, SIZE - 2, (2, 2), generator=gen).float()
            d = q - p
            t = (((xx - p[0]) * d[0] + (yy - p[1]) * d[1]) / (d @ d).clamp(min=1)).clamp(0, 1)
            dist = ((xx - p[0] - t * d[0]) ** 2 + (yy - p[1] - t * d[1]) ** 2).sqrt()
            dmin = torch.minimum(dmin, dist)
            img += (dist < 0.8).float()
            for e in (p, q):
                jm[int(e[1]), int(e[0])] = 1.0
        imgs.append(img)
        jmaps.append(jm)
        dis.append(dmin.clamp(max=5.0) / 5.0)
    return torch.stack(imgs)[:, None], torch.stack(jmaps)[:, None], torch.stack(dis)[:, None]


def train(cfg):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = WireframeDetector(cfg)
    images, jmaps, dis = build_dataset(64, gen)
    val_images, val_jmaps, val_dis = build_dataset(32, gen)
    optimizer = make_optimizer(cfg, model)
    scheduler = make_lr_scheduler(cfg, optimizer)
    loss_reducer = LossReducer(cfg)
    bs = cfg.IMS_PER_BATCH
    for epoch in range(1, cfg.SOLVER.MAX_EPOCH + 1):
        model.train()
        perm = torch.randperm(len(images), generator=gen)
        for it in range(0, len(perm), bs):
            idx = perm[it:it + bs]
            loss_dict, _ = model(images[idx], {"jmap": jmaps[idx], "dis": dis[idx]})
            total_loss = loss_reducer(loss_dict)
            optimizer.zero_grad()
            total_loss.backward()
            optimizer.step()
        if epoch % 5 == 0 or epoch <= 2:
            model.eval()
            with torch.no_grad():
                vloss, _ = model(val_images, {"jmap": val_jmaps, "dis": val_dis})
            print(f"epoch {epoch:2d}  train loss {total_loss.item():.4f}  "
                  f"val jloc {vloss['loss_jloc'].item():.4f} dis {vloss['loss_dis'].item():.4f}  "
                  f"lr {optimizer.param_groups[0]['lr']:.6f}")
        # checkpointer.save(...) would go here
        scheduler.step(epoch)


if __name__ == "__main__":
    train(cfg)
