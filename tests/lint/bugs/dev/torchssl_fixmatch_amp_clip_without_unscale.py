"""
Shape: FixMatch class: __init__ builds self.backbone from net_builder, opt/sched injected later via set_optimizer(); train(cfg) zips the labelled and unlabelled loaders, computes sup + consistency loss under an autocast_ctx() context, then branches on cfg.amp (amp_scaler.scale(...).backward(), optional clip_grad_norm_, amp_scaler.step/update) vs the fp32 path, then sched.step(), EMA update and backbone.zero_grad(); evaluate() switches to eval and back to train.
Bug: in the AMP branch clip_grad_norm_ runs on the scaled gradients; amp_scaler.unscale_(self.opt) is missing before the clip.
Thread: https://github.com/TorchSSL/TorchSSL/pull/59
"""
import contextlib
import os

import torch
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast

from train_utils import EMA, ce_loss
from .fixmatch_utils import Get_Scalar, consistency_loss


class FixMatch:
    def __init__(self, net_builder, n_cls, ema_decay, T, p_cutoff, unsup_weight, hard_label=True,
                 eval_every=1000, tb_log=None, logger=None):
        self.n_cls = n_cls
        self.ema_decay = ema_decay
        self.backbone = net_builder(num_classes=n_cls)
        self.ema_net = None
        self.eval_every = eval_every
        self.temp_fn = Get_Scalar(T)
        self.cutoff_fn = Get_Scalar(p_cutoff)
        self.unsup_weight = unsup_weight
        self.tb_log = tb_log
        self.hard_pseudo = hard_label
        self.opt = None
        self.sched = None
        self.iter_no = 0
        self.log_fn = logger.info if logger is not None else print

    def attach_loaders(self, loaders):
        self.loaders = loaders

    def set_optimizer(self, opt, sched=None):
        self.opt = opt
        self.sched = sched

    def train(self, cfg):
        self.backbone.train()
        self.ema_helper = EMA(self.backbone, self.ema_decay)
        self.ema_helper.register()
        best_top1, best_it = 0.0, 0

        amp_scaler = GradScaler()
        autocast_ctx = autocast if cfg.amp else contextlib.nullcontext

        for (_, xl, yl), (_, xu_weak, xu_strong) in zip(self.loaders['train_lb'],
                                                          self.loaders['train_ulb']):
            if self.iter_no > cfg.num_train_iter:
                break
            n_lb = xl.shape[0]
            xl, xu_weak, xu_strong = xl.cuda(cfg.gpu), xu_weak.cuda(cfg.gpu), xu_strong.cuda(cfg.gpu)
            yl = yl.cuda(cfg.gpu)
            stacked = torch.cat((xl, xu_weak, xu_strong))

            with autocast_ctx():
                out = self.backbone(stacked)
                lg_lb = out[:n_lb]
                lg_w, lg_s = out[n_lb:].chunk(2)
                loss_sup = ce_loss(lg_lb, yl, reduction='mean')
                loss_unsup, mask, _, _ = consistency_loss(lg_s, lg_w, 'ce', self.temp_fn(self.iter_no),
                                                          self.cutoff_fn(self.iter_no),
                                                          use_hard_labels=cfg.hard_label)
                loss_total = loss_sup + self.unsup_weight * loss_unsup

            if cfg.amp:
                amp_scaler.scale(loss_total).backward()
                if cfg.clip > 0:
                    torch.nn.utils.clip_grad_norm_(self.backbone.parameters(), cfg.clip)
                amp_scaler.step(self.opt)
                amp_scaler.update()
            else:
                loss_total.backward()
                if cfg.clip > 0:
                    torch.nn.utils.clip_grad_norm_(self.backbone.parameters(), cfg.clip)
                self.opt.step()

            self.sched.step()
            self.ema_helper.update()
            self.backbone.zero_grad()

            if self.iter_no % self.eval_every == 0:
                res = self.evaluate(cfg=cfg)
                if res['eval/top-1-acc'] > best_top1:
                    best_top1, best_it = res['eval/top-1-acc'], self.iter_no
                    self.save_model('model_best.pth', os.path.join(cfg.save_dir, cfg.save_name))
            self.iter_no += 1

        return self.evaluate(cfg=cfg)

    @torch.no_grad()
    def evaluate(self, eval_loader=None, cfg=None):
        self.backbone.eval()
        self.ema_helper.apply_shadow()
        loader = self.loaders['eval'] if eval_loader is None else eval_loader
        correct, seen = 0, 0
        for _, x, y in loader:
            x, y = x.cuda(cfg.gpu), y.cuda(cfg.gpu)
            out = self.backbone(x)
            correct += (out.argmax(-1) == y).sum().item()
            seen += x.shape[0]
        self.ema_helper.restore()
        self.backbone.train()
        return {'eval/top-1-acc': correct / max(seen, 1)}

    def save_model(self, name, path):
        torch.save({'backbone': self.backbone.state_dict(), 'opt': self.opt.state_dict(),
                    'iter_no': self.iter_no}, os.path.join(path, name))
