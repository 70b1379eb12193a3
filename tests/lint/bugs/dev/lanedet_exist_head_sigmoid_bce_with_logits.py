"""
Shape: a registry-based lane-detection toolbox: ExistHead (registered in HEADS) turns the feature map into per-lane existence scores through conv, softmax over channels, pooling and two Linear layers; LaneSeg (also a registered head) builds its decoder and the optional exist head with build_head(cfg) and owns a loss(output, batch) method that adds a weighted NLL segmentation loss and a BCEWithLogitsLoss existence term; a Runner's train_epoch(epoch, loader) calls the network, then net.module.heads.loss(...), and steps the optimizer and a per-iteration scheduler.
Bug: ExistHead.forward ends with torch.sigmoid, and LaneSeg.loss feeds that output to nn.BCEWithLogitsLoss, so the existence scores go through a sigmoid twice.
Thread: https://github.com/Turoad/lanedet/issues/32
"""
import torch
import torch.nn.functional as F
from torch import nn

from lanedet.models.registry import HEADS, build_head
from lanedet.models.registry import build_net
from lanedet.engine.optimizer import build_optimizer
from lanedet.engine.scheduler import build_scheduler


@HEADS.register_module
class ExistHead(nn.Module):
    def __init__(self, cfg=None):
        super().__init__()
        self.cfg = cfg
        self.drop = nn.Dropout2d(0.1)
        self.squeeze = nn.Conv2d(cfg.featuremap_out_channel, cfg.num_classes, 1)
        down = cfg.featuremap_out_stride * 2
        flat = int(cfg.num_classes * cfg.img_width / down * cfg.img_height / down)
        self.hidden = nn.Linear(flat, 128)
        self.score = nn.Linear(128, cfg.num_classes - 1)

    def forward(self, feat):
        h = self.squeeze(self.drop(feat))
        h = F.softmax(h, dim=1)
        h = F.avg_pool2d(h, 2, stride=2, padding=0)
        h = h.flatten(1)
        h = F.relu(self.hidden(h))
        h = torch.sigmoid(self.score(h))
        return {"exist": h}


@HEADS.register_module
class LaneSeg(nn.Module):
    def __init__(self, decoder, exist=None, thr=0.6, sample_y=None, cfg=None):
        super().__init__()
        self.cfg = cfg
        self.thr = thr
        self.sample_y = sample_y
        self.decoder = build_head(decoder, cfg)
        self.exist = build_head(exist, cfg) if exist else None

    def loss(self, output, batch):
        class_w = torch.ones(self.cfg.num_classes)
        class_w[0] = self.cfg.bg_weight
        seg_crit = nn.NLLLoss(ignore_index=self.cfg.ignore_label, weight=class_w.cuda()).cuda()
        exist_crit = nn.BCEWithLogitsLoss().cuda()
        stats = {}
        seg_term = seg_crit(F.log_softmax(output["seg"], dim=1), batch["mask"].long())
        total = seg_term
        stats["seg_loss"] = seg_term
        if "exist" in output:
            exist_term = 0.1 * exist_crit(output["exist"], batch["lane_exist"].float())
            total = total + exist_term
            stats["exist_loss"] = exist_term
        return {"loss": total, "loss_stats": stats}

    def forward(self, feat, **kwargs):
        out = {}
        out.update(self.decoder(feat))
        if self.exist:
            out.update(self.exist(feat))
        return out


class Runner:
    def __init__(self, cfg):
        self.cfg = cfg
        self.net = build_net(cfg)
        self.net = torch.nn.parallel.DataParallel(self.net, device_ids=range(cfg.gpus)).cuda()
        self.optimizer = build_optimizer(cfg, self.net)
        self.scheduler = build_scheduler(cfg, self.optimizer)

    def to_cuda(self, batch):
        return {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}

    def train_epoch(self, epoch, loader):
        self.net.train()
        for i, batch in enumerate(loader):
            batch = self.to_cuda(batch)
            feats = self.net(batch)
            result = self.net.module.heads.loss(feats, batch)
            self.optimizer.zero_grad()
            result["loss"].backward()
            self.optimizer.step()
            self.scheduler.step()

    def train(self, loader):
        for epoch in range(self.cfg.epochs):
            self.train_epoch(epoch, loader)
