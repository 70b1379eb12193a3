"""A Hugging Face-style two-stage detection transformer (LW-DETR shape): a conv backbone, a
transformer encoder whose output memory goes through enc_output/LayerNorm into an encoder class
head and an encoder box head (box deltas added to per-token anchors), top-k encoder proposals used
as detached reference boxes for a query decoder, and a set-prediction loss with Hungarian matching
(sigmoid BCE on the classes, L1 and GIoU on the boxes) computed for the decoder outputs and for the
encoder outputs. The model returns an output object with .loss when called with labels, and a small
Trainer class drives it with AdamW and gradient clipping. The encoder output box coordinates are
detached when the model builds them, and that detached tensor is also the one handed to the
encoder-output loss, so the encoder box loss sends no gradient to the encoder box head, which stays
at its initial weights.

Thread: https://github.com/huggingface/transformers/pull/44441
"""
import itertools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

NUM_LABELS, IMG, GRID = 3, 16, 4


def cxcywh_to_xyxy(b):
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1)


def pairwise_giou(a, b):
    a, b = cxcywh_to_xyxy(a), cxcywh_to_xyxy(b)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt, rb = torch.max(a[:, None, :2], b[None, :, :2]), torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = area_a[:, None] + area_b[None] - inter
    iou = inter / union
    lt_c, rb_c = torch.min(a[:, None, :2], b[None, :, :2]), torch.max(a[:, None, 2:], b[None, :, 2:])
    hull = (rb_c - lt_c).clamp(min=0).prod(-1)
    return iou - (hull - union) / hull


class SquaresDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        colors = torch.tensor([[1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]])
        self.items = []
        for _ in range(n):
            img = 0.3 * torch.randn(3, IMG, IMG, generator=g)
            k = int(torch.randint(1, 3, (1,), generator=g))
            labels, boxes = [], []
            for _ in range(k):
                c = int(torch.randint(0, NUM_LABELS, (1,), generator=g))
                s = int(torch.randint(4, 7, (1,), generator=g))
                x0, y0 = (int(v) for v in torch.randint(0, IMG - s + 1, (2,), generator=g))
                img[:, y0:y0 + s, x0:x0 + s] += colors[c][:, None, None]
                labels.append(c)
                boxes.append([(x0 + s / 2) / IMG, (y0 + s / 2) / IMG, s / IMG, s / IMG])
            self.items.append((img, {"class_labels": torch.tensor(labels), "boxes": torch.tensor(boxes)}))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate_fn(batch):
    return {"pixel_values": torch.stack([b[0] for b in batch]), "labels": [b[1] for b in batch]}


class MLP(nn.Module):
    def __init__(self, d_in, d_hidden, d_out, n):
        super().__init__()
        dims = [d_in] + [d_hidden] * (n - 1) + [d_out]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) if i == len(self.layers) - 1 else F.relu(layer(x))
        return x


class HungarianMatcher:
    """Exact assignment by enumeration (few targets per image), on class, L1 and GIoU costs."""

    def __init__(self, class_cost=2.0, bbox_cost=5.0, giou_cost=2.0):
        self.class_cost, self.bbox_cost, self.giou_cost = class_cost, bbox_cost, giou_cost
        self._perms = {}

    @torch.no_grad()
    def __call__(self, logits, boxes, targets):
        out = []
        for lg, bx, t in zip(logits, boxes, targets):
            cost = (-self.class_cost * lg.sigmoid()[:, t["class_labels"]]
                    + self.bbox_cost * torch.cdist(bx, t["boxes"], p=1)
                    - self.giou_cost * pairwise_giou(bx, t["boxes"])).numpy()
            q, g = cost.shape
            if (q, g) not in self._perms:
                self._perms[q, g] = np.array(list(itertools.permutations(range(q), g)))
            perms = self._perms[q, g]
            best = perms[cost[perms, np.arange(g)].sum(1).argmin()]
            out.append((torch.as_tensor(best), torch.arange(g)))
        return out


class SetCriterion(nn.Module):
    def __init__(self, matcher, weight_dict):
        super().__init__()
        self.matcher, self.weight_dict = matcher, weight_dict

    def single(self, logits, boxes, targets):
        indices = self.matcher(logits, boxes, targets)
        num_boxes = max(sum(len(t["class_labels"]) for t in targets), 1)
        onehot = torch.zeros_like(logits)
        src, tgt = [], []
        for b, ((qi, ti), t) in enumerate(zip(indices, targets)):
            onehot[b, qi, t["class_labels"][ti]] = 1.0
            src.append(boxes[b, qi])
            tgt.append(t["boxes"][ti])
        src, tgt = torch.cat(src), torch.cat(tgt)
        return {"loss_ce": F.binary_cross_entropy_with_logits(logits, onehot, reduction="sum") / num_boxes,
                "loss_bbox": F.l1_loss(src, tgt, reduction="sum") / num_boxes,
                "loss_giou": (1 - torch.diag(pairwise_giou(src, tgt))).sum() / num_boxes}

    def forward(self, outputs, targets):
        losses = self.single(outputs["logits"], outputs["pred_boxes"], targets)
        enc = self.single(outputs["enc_outputs"]["logits"], outputs["enc_outputs"]["pred_boxes"], targets)
        losses.update({k + "_enc": v for k, v in enc.items()})
        total = sum(self.weight_dict[k.replace("_enc", "")] * v for k, v in losses.items())
        return total, losses


class DetectionOutput(dict):
    __getattr__ = dict.get


class TinyLwDetrForObjectDetection(nn.Module):
    def __init__(self, d_model=32, num_queries=8):
        super().__init__()
        self.num_queries = num_queries
        self.backbone = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.input_proj = nn.Conv2d(64, d_model, 1)
        self.pos_embed = nn.Parameter(0.02 * torch.randn(GRID * GRID, d_model))
        self.encoder = nn.TransformerEncoderLayer(d_model, 4, 64, dropout=0.0, batch_first=True)
        self.enc_output = nn.Linear(d_model, d_model)
        self.enc_output_norm = nn.LayerNorm(d_model)
        self.enc_out_class_embed = nn.Linear(d_model, NUM_LABELS)
        self.enc_out_bbox_embed = MLP(d_model, d_model, 4, 3)
        self.query_feat = nn.Embedding(num_queries, d_model)
        self.decoder = nn.TransformerDecoderLayer(d_model, 4, 64, dropout=0.0, batch_first=True)
        self.class_embed = nn.Linear(d_model, NUM_LABELS)
        self.bbox_embed = MLP(d_model, d_model, 4, 3)
        c = (torch.arange(GRID) + 0.5) / GRID
        cy, cx = torch.meshgrid(c, c, indexing="ij")
        anchors = torch.stack([cx.flatten(), cy.flatten(), torch.full((GRID * GRID,), 0.3),
                               torch.full((GRID * GRID,), 0.3)], -1)
        self.register_buffer("anchor_logits", torch.log(anchors / (1 - anchors)))
        self.loss_function = SetCriterion(HungarianMatcher(), {"loss_ce": 2.0, "loss_bbox": 5.0, "loss_giou": 2.0})

    def forward(self, pixel_values, labels=None):
        src = self.input_proj(self.backbone(pixel_values)).flatten(2).transpose(1, 2)
        memory = self.encoder(src + self.pos_embed)
        object_query = self.enc_output_norm(self.enc_output(memory))
        enc_outputs_class = self.enc_out_class_embed(object_query)
        enc_coord_logits = self.enc_out_bbox_embed(object_query) + self.anchor_logits
        enc_outputs_coord = enc_coord_logits.sigmoid().detach()
        topk = enc_outputs_class.max(-1).values.topk(self.num_queries, dim=1).indices
        reference = torch.gather(enc_coord_logits.detach(), 1, topk[..., None].expand(-1, -1, 4))
        tgt = self.query_feat.weight[None].expand(pixel_values.shape[0], -1, -1)
        hs = self.decoder(tgt, memory + self.pos_embed)
        logits = self.class_embed(hs)
        pred_boxes = (self.bbox_embed(hs) + reference).sigmoid()
        output = DetectionOutput(logits=logits, pred_boxes=pred_boxes)
        if labels is not None:
            outputs_loss = {"logits": logits, "pred_boxes": pred_boxes,
                            "enc_outputs": {"logits": enc_outputs_class, "pred_boxes": enc_outputs_coord}}
            output["loss"], output["loss_dict"] = self.loss_function(outputs_loss, labels)
        return output


class Trainer:
    def __init__(self, model, train_dataset, data_collator, learning_rate=1e-3, batch_size=8,
                 num_train_epochs=2, max_grad_norm=1.0, logging_steps=20):
        self.model, self.train_dataset, self.data_collator = model, train_dataset, data_collator
        self.learning_rate, self.batch_size, self.num_train_epochs = learning_rate, batch_size, num_train_epochs
        self.max_grad_norm, self.logging_steps = max_grad_norm, logging_steps

    def train(self):
        loader = DataLoader(self.train_dataset, batch_size=self.batch_size, shuffle=True,
                            collate_fn=self.data_collator, generator=torch.Generator().manual_seed(0))
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.learning_rate, weight_decay=1e-4)
        self.model.train()
        step = 0
        for epoch in range(self.num_train_epochs):
            for batch in loader:
                outputs = self.model(**batch)
                outputs.loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
                step += 1
                if step % self.logging_steps == 0:
                    parts = " ".join(f"{k} {v.item():.3f}" for k, v in outputs.loss_dict.items())
                    print(f"epoch {epoch} step {step} loss {outputs.loss.item():.3f} | {parts}")


def main():
    torch.manual_seed(0)
    model = TinyLwDetrForObjectDetection()
    trainer = Trainer(model, SquaresDataset(480, seed=0), collate_fn)
    trainer.train()


if __name__ == "__main__":
    main()
