"""A task-model trainer for an RT-DETR-style detector on a ViT backbone (LTDETR shape): the backbone
wrapper holds a patch-embedding ViT, treated as pretrained, and a spatial tuning adapter (STA), a
small randomly initialised conv net whose multi-scale detail features are added to the ViT tokens;
a query decoder with class and box heads sits on top, trained with a Hungarian-matched set loss
(sigmoid focal loss on the classes, L1 and GIoU on the boxes). A TrainModel class exposes
training_step(batch, step) and get_optimizer(total_steps, global_batch_size), which builds AdamW
parameter groups with the backbone at lr * backbone_lr_factor (0.01) and a LinearLR warmup; a fit()
loop runs zero_grad / backward / clip / step / scheduler.step. The parameter groups are split by the
"backbone." name prefix, so the freshly initialised STA, which lives inside the backbone wrapper,
is trained with the hundredfold lower backbone learning rate meant for the pretrained ViT.

Thread: https://github.com/lightly-ai/lightly-train/pull/646
"""
import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

NUM_CLASSES, IMG = 3, 16


def to_xyxy(b):
    return torch.cat([b[..., :2] - b[..., 2:] / 2, b[..., :2] + b[..., 2:] / 2], -1)


def giou(a, b):
    a, b = to_xyxy(a), to_xyxy(b)
    inter = (torch.min(a[:, None, 2:], b[None, :, 2:]) - torch.max(a[:, None, :2], b[None, :, :2])).clamp(min=0).prod(-1)
    union = (a[:, 2:] - a[:, :2]).prod(-1)[:, None] + (b[:, 2:] - b[:, :2]).prod(-1)[None] - inter
    hull = (torch.max(a[:, None, 2:], b[None, :, 2:]) - torch.min(a[:, None, :2], b[None, :, :2])).clamp(min=0).prod(-1)
    return inter / union - (hull - union) / hull


def sigmoid_focal_loss(logits, targets, alpha=0.25, gamma=2.0):
    p = logits.sigmoid()
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    return ((alpha * targets + (1 - alpha) * (1 - targets)) * ce * (1 - p_t) ** gamma).sum()


def make_batches(n_batches, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    colors = torch.tensor([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, -1.0, 1.0]])
    batches = []
    for _ in range(n_batches):
        images, boxes, classes = 0.3 * torch.randn(batch_size, 3, IMG, IMG, generator=g), [], []
        for i in range(batch_size):
            k = int(torch.randint(1, 3, (1,), generator=g))
            c = torch.randint(0, NUM_CLASSES, (k,), generator=g)
            s = torch.randint(3, 7, (k,), generator=g)
            bx = []
            for j in range(k):
                x0, y0 = (int(v) for v in torch.randint(0, IMG - int(s[j]) + 1, (2,), generator=g))
                images[i, :, y0:y0 + s[j], x0:x0 + s[j]] += colors[c[j]][:, None, None]
                bx.append([(x0 + s[j] / 2) / IMG, (y0 + s[j] / 2) / IMG, s[j] / IMG, s[j] / IMG])
            boxes.append(torch.tensor(bx, dtype=torch.float32))
            classes.append(c)
        batches.append({"image": images, "bboxes": boxes, "classes": classes})
    return batches


class STA(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.GELU(), nn.Conv2d(32, dim, 3, stride=2, padding=1),
                                   nn.GELU(), nn.Conv2d(dim, dim, 3, stride=2, padding=1))

    def forward(self, x):
        return self.convs(x).flatten(2).transpose(1, 2)


class ViTWithSTA(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, 4, stride=4)
        self.pos = nn.Parameter(0.02 * torch.randn(16, dim))
        self.blocks = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.sta = STA(dim)

    def forward(self, x):
        tokens = self.blocks(self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos)
        return tokens + self.sta(x)


class LTDETR(nn.Module):
    def __init__(self, dim=32, num_queries=8):
        super().__init__()
        self.backbone = ViTWithSTA(dim)
        self.query = nn.Embedding(num_queries, dim)
        self.decoder = nn.TransformerDecoderLayer(dim, 4, 64, dropout=0.0, batch_first=True)
        self.class_head = nn.Linear(dim, NUM_CLASSES)
        self.box_head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 4))
        nn.init.constant_(self.class_head.bias, -math.log(99.0))

    def forward(self, x):
        hs = self.decoder(self.query.weight[None].expand(x.shape[0], -1, -1), self.backbone(x))
        return {"pred_logits": self.class_head(hs), "pred_boxes": self.box_head(hs).sigmoid()}


class SetCriterion(nn.Module):
    def __init__(self, weight_dict):
        super().__init__()
        self.weight_dict, self._perms = weight_dict, {}

    @torch.no_grad()
    def match(self, logits, boxes, labels, tgt_boxes):
        cost = (-2.0 * logits.sigmoid()[:, labels] + 5.0 * torch.cdist(boxes, tgt_boxes, p=1)
                - 2.0 * giou(boxes, tgt_boxes)).numpy()
        q, g = cost.shape
        perms = self._perms.setdefault((q, g), np.array(list(itertools.permutations(range(q), g))))
        return torch.as_tensor(perms[cost[perms, np.arange(g)].sum(1).argmin()])

    def forward(self, outputs, targets):
        logits, boxes = outputs["pred_logits"], outputs["pred_boxes"]
        num_boxes = sum(len(t["labels"]) for t in targets)
        onehot, src, tgt = torch.zeros_like(logits), [], []
        for b, t in enumerate(targets):
            qi = self.match(logits[b], boxes[b], t["labels"], t["boxes"])
            onehot[b, qi, t["labels"]] = 1.0
            src.append(boxes[b, qi])
            tgt.append(t["boxes"])
        src, tgt = torch.cat(src), torch.cat(tgt)
        losses = {"loss_focal": sigmoid_focal_loss(logits, onehot) / num_boxes,
                  "loss_bbox": F.l1_loss(src, tgt, reduction="sum") / num_boxes,
                  "loss_giou": (1 - torch.diag(giou(src, tgt))).sum() / num_boxes}
        return {k: self.weight_dict[k] * v for k, v in losses.items()}


class LTDETRTrain(nn.Module):
    def __init__(self, lr=1e-3, weight_decay=1e-4, backbone_lr_factor=1e-2, warmup_steps=20, default_batch_size=16):
        super().__init__()
        self.lr, self.weight_decay, self.backbone_lr_factor = lr, weight_decay, backbone_lr_factor
        self.warmup_steps, self.default_batch_size = warmup_steps, default_batch_size
        self.model = LTDETR()
        self.criterion = SetCriterion({"loss_focal": 1.0, "loss_bbox": 5.0, "loss_giou": 2.0})

    def training_step(self, batch, step):
        targets = [{"boxes": b, "labels": c} for b, c in zip(batch["bboxes"], batch["classes"])]
        loss_dict = self.criterion(self.model(batch["image"]), targets)
        return sum(loss_dict.values()), loss_dict

    def get_optimizer(self, total_steps, global_batch_size):
        lr = self.lr * math.sqrt(global_batch_size / self.default_batch_size)
        backbone, detector = [], []
        for name, p in self.model.named_parameters():
            (backbone if name.startswith("backbone.") else detector).append(p)
        optimizer = torch.optim.AdamW([{"params": backbone, "lr": lr * self.backbone_lr_factor},
                                       {"params": detector, "lr": lr}], lr=lr, weight_decay=self.weight_decay)
        scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=self.warmup_steps)
        return optimizer, scheduler


def fit(train_model, batches, epochs, clip=0.1):
    optimizer, scheduler = train_model.get_optimizer(len(batches) * epochs, batches[0]["image"].shape[0])
    train_model.train()
    step = 0
    for epoch in range(epochs):
        for batch in batches:
            loss, loss_dict = train_model.training_step(batch, step)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(train_model.parameters(), clip)
            optimizer.step()
            scheduler.step()
            step += 1
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.3f} "
                      + " ".join(f"{k} {v.item():.3f}" for k, v in loss_dict.items()))


def main():
    torch.manual_seed(0)
    fit(LTDETRTrain(), make_batches(40, 16, seed=0), epochs=3)


if __name__ == "__main__":
    main()
