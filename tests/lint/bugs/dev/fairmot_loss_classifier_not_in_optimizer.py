"""
Shape: main(cfg) builds the detector with create_model() and Adam(detector.parameters()), then hands both to a MotTrainer whose BaseTrainer.__init__ gets the loss module from _get_losses(); MotLoss owns an nn.Linear id_classifier and two nn.Parameter uncertainty weights; ModleWithLoss wraps detector+loss and run_phase steps the solver.
Bug: the MotLoss module (id_classifier, s_det, s_id) is created after the solver and its parameters are never added to it, so they stay at their initial values.
Thread: https://github.com/ifzhang/FairMOT/issues/223
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data

from datasets.dataset_factory import get_dataset
from models.losses import FocalLoss, RegL1Loss
from models.detector import create_model, load_model, save_model
from models.utils import _sigmoid, _tranpose_and_gather_feat
from opts import opts


class MotLoss(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.crit = FocalLoss()
        self.crit_reg = RegL1Loss()
        self.cfg = cfg
        self.reid_dim = cfg.reid_dim
        self.n_ids = cfg.n_ids
        self.id_classifier = nn.Linear(self.reid_dim, self.n_ids)
        self.id_ce = nn.CrossEntropyLoss(ignore_index=-1)
        self.id_scale = math.sqrt(2) * math.log(self.n_ids - 1)
        self.s_det = nn.Parameter(torch.full((1,), -1.85))
        self.s_id = nn.Parameter(torch.full((1,), -1.05))

    def forward(self, head_outs, sample):
        o = self.cfg
        out = head_outs[0]
        hm = _sigmoid(out['hm'])
        hm_loss = self.crit(hm, sample['hm'])
        wh_loss = self.crit_reg(out['wh'], sample['reg_mask'], sample['ind'], sample['wh'])
        off_loss = self.crit_reg(out['reg'], sample['reg_mask'], sample['ind'], sample['reg'])
        emb = _tranpose_and_gather_feat(out['id'], sample['ind'])
        emb = emb[sample['reg_mask'] > 0].contiguous()
        emb = self.id_scale * F.normalize(emb)
        ids = sample['ids'][sample['reg_mask'] > 0]
        id_term = self.id_ce(self.id_classifier(emb).contiguous(), ids)
        det_term = o.hm_weight * hm_loss + o.wh_weight * wh_loss + o.off_weight * off_loss
        loss = torch.exp(-self.s_det) * det_term + torch.exp(-self.s_id) * id_term + (self.s_det + self.s_id)
        loss = loss * 0.5
        return loss, {'loss': loss, 'hm_loss': hm_loss, 'id_term': id_term}


class ModleWithLoss(nn.Module):
    def __init__(self, detector, loss):
        super().__init__()
        self.detector = detector
        self.loss = loss

    def forward(self, sample):
        head_outs = self.detector(sample['input'])
        loss, stats = self.loss(head_outs, sample)
        return head_outs[-1], loss, stats


class BaseTrainer:
    def __init__(self, cfg, detector, solver=None):
        self.cfg = cfg
        self.solver = solver
        self.stat_names, self.loss = self._get_losses(cfg)
        self.wrapped = ModleWithLoss(detector, self.loss)

    def set_device(self, device):
        self.wrapped = self.wrapped.to(device)

    def _get_losses(self, cfg):
        raise NotImplementedError

    def run_phase(self, phase, epoch, batches):
        mwl = self.wrapped
        if phase == 'train':
            mwl.train()
        else:
            mwl.eval()
        totals = {}
        for it, sample in enumerate(batches):
            for k in sample:
                if k != 'meta':
                    sample[k] = sample[k].to(device=self.cfg.device, non_blocking=True)
            _, loss, stats = mwl(sample)
            loss = loss.mean()
            if phase == 'train':
                self.solver.zero_grad()
                loss.backward()
                self.solver.step()
            for k, v in stats.items():
                totals[k] = totals.get(k, 0.0) + v.mean().item()
        return {k: v / max(len(batches), 1) for k, v in totals.items()}, {}

    def train(self, epoch, batches):
        return self.run_phase('train', epoch, batches)


class MotTrainer(BaseTrainer):
    def __init__(self, cfg, detector, solver=None):
        super().__init__(cfg, detector, solver=solver)

    def _get_losses(self, cfg):
        return ['loss', 'hm_loss', 'id_term'], MotLoss(cfg)


def main(cfg):
    torch.manual_seed(cfg.seed)
    DatasetCls = get_dataset(cfg.dataset, cfg.task)
    dataset = DatasetCls(cfg, cfg.data_root, cfg.train_paths, (1088, 608), augment=True)
    cfg = opts().update_dataset_info_and_set_heads(cfg, dataset)
    cfg.device = torch.device('cuda' if cfg.gpus[0] >= 0 else 'cpu')

    detector = create_model(cfg.arch, cfg.heads, cfg.head_conv)
    solver = torch.optim.Adam(detector.parameters(), cfg.lr)
    first_epoch = 0
    if cfg.load_model != '':
        detector, solver, first_epoch = load_model(detector, cfg.load_model, solver, cfg.resume,
                                                   cfg.lr, cfg.lr_step)

    train_loader = torch.utils.data.DataLoader(dataset, batch_size=cfg.batch_size, shuffle=True,
                                               num_workers=cfg.num_workers, pin_memory=True,
                                               drop_last=True)
    trainer = MotTrainer(cfg, detector, solver)
    trainer.set_device(cfg.device)
    for epoch in range(first_epoch + 1, cfg.num_epochs + 1):
        log_train, _ = trainer.train(epoch, train_loader)
        save_model(os.path.join(cfg.save_dir, 'model_last.pth'), epoch, detector, solver)
        if epoch in cfg.lr_step:
            new_lr = cfg.lr * (0.1 ** (cfg.lr_step.index(epoch) + 1))
            for group in solver.param_groups:
                group['lr'] = new_lr


if __name__ == '__main__':
    main(opts().parse())
