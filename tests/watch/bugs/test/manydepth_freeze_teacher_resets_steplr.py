"""A multi-frame depth training class: a Trainer builds a models dict (a multi-frame encoder and
depth decoder, a single-frame teacher encoder and decoder, a pose net), one Adam over all of them
and a StepLR(step_size=scheduler_step_size, gamma=0.1); train() loops over epochs, run_epoch() does
zero_grad/backward/step per batch and steps the scheduler once at the end of the epoch. At
freeze_teacher_epoch, freeze_teacher() drops the teacher and pose parameters by building a new Adam
over the depth parameters and a new StepLR. The new scheduler counts epochs from zero again, and
with the defaults (20 epochs, step size 15, freeze at epoch 15) it only sees 5 more epochs, so the
learning rate is never decayed during the whole run.

Thread: https://github.com/nianticlabs/manydepth/issues/46
"""
import types

import torch
from torch import nn, optim
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self, cin):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(cin, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 16, 3, 2, 1), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class DepthDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 1, 3, 1, 1))

    def forward(self, f):
        disp = torch.sigmoid(self.net(F.interpolate(f, scale_factor=2.0, mode='bilinear', align_corners=False)))
        return {'disp': disp}


class PoseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 8, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1))

    def forward(self, a, b):
        return self.net(torch.cat([a, b], 1))


def make_dataset(n, seed, size=16):
    """Pairs of frames: the previous frame is the current one shifted by a known number of pixels."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing='ij')
    a = torch.rand(n, 1, 1, 1, generator=g) * 0.6 + 0.2
    b = torch.rand(n, 1, 1, 1, generator=g) * 0.6 + 0.2
    depth_gt = (a * yy + b * (1 - xx)).clamp(0.05, 1.0)
    cur = (1.0 / depth_gt) * 0.2 + 0.05 * torch.randn(n, 1, size, size, generator=g)
    shift = torch.randint(-2, 3, (n,), generator=g)
    prev = torch.stack([torch.roll(cur[i], int(shift[i]), dims=-1) for i in range(n)])
    return cur, prev, depth_gt, shift.float().unsqueeze(1)


class Trainer:
    def __init__(self, options):
        self.opt = options
        torch.manual_seed(0)
        self.models = {
            'encoder': Encoder(2), 'depth': DepthDecoder(),
            'mono_encoder': Encoder(1), 'mono_depth': DepthDecoder(), 'pose': PoseNet(),
        }
        self.train_teacher_and_pose = True
        self.parameters_to_train = []
        for m in self.models.values():
            self.parameters_to_train += list(m.parameters())
        self.model_optimizer = optim.Adam(self.parameters_to_train, self.opt.learning_rate)
        self.model_lr_scheduler = optim.lr_scheduler.StepLR(self.model_optimizer, self.opt.scheduler_step_size, 0.1)
        self.data = make_dataset(self.opt.batch_size * self.opt.batches_per_epoch, seed=1)
        self.loader_gen = torch.Generator().manual_seed(2)

    def set_train(self):
        for name, m in self.models.items():
            if self.train_teacher_and_pose or name in ('encoder', 'depth'):
                m.train()

    def set_eval(self):
        for m in self.models.values():
            m.eval()

    def train(self):
        self.step = 0
        for self.epoch in range(self.opt.num_epochs):
            if self.epoch == self.opt.freeze_teacher_epoch:
                self.freeze_teacher()
            self.run_epoch()

    def freeze_teacher(self):
        if self.train_teacher_and_pose:
            self.train_teacher_and_pose = False
            print('freezing teacher and pose networks!')
            self.parameters_to_train = list(self.models['encoder'].parameters()) + list(self.models['depth'].parameters())
            self.model_optimizer = optim.Adam(self.parameters_to_train, self.opt.learning_rate)
            self.model_lr_scheduler = optim.lr_scheduler.StepLR(self.model_optimizer, self.opt.scheduler_step_size, 0.1)
            self.set_eval()
            self.set_train()

    def batches(self):
        cur, prev, depth, shift = self.data
        order = torch.randperm(cur.shape[0], generator=self.loader_gen)
        for i in range(0, cur.shape[0], self.opt.batch_size):
            idx = order[i:i + self.opt.batch_size]
            yield {'cur': cur[idx], 'prev': prev[idx], 'depth_gt': depth[idx], 'shift': shift[idx]}

    def process_batch(self, inputs):
        outputs = {}
        with torch.set_grad_enabled(self.train_teacher_and_pose):
            outputs['mono'] = self.models['mono_depth'](self.models['mono_encoder'](inputs['cur']))['disp']
            outputs['pose'] = self.models['pose'](inputs['cur'], inputs['prev'])
        aligned = torch.stack([torch.roll(inputs['prev'][i], -int(outputs['pose'][i].round().clamp(-2, 2)), dims=-1)
                               for i in range(inputs['prev'].shape[0])])
        outputs['disp'] = self.models['depth'](self.models['encoder'](torch.cat([inputs['cur'], aligned], 1)))['disp']
        target = 1.0 / inputs['depth_gt'] * 0.2
        losses = {'multi': F.l1_loss(outputs['disp'], target),
                  'consistency': F.l1_loss(outputs['disp'], outputs['mono'].detach())}
        loss = losses['multi'] + 0.1 * losses['consistency']
        if self.train_teacher_and_pose:
            loss = loss + F.l1_loss(outputs['mono'], target) + 0.05 * F.smooth_l1_loss(outputs['pose'], inputs['shift'])
        losses['loss'] = loss
        return outputs, losses

    def run_epoch(self):
        self.set_train()
        total = 0.0
        for batch_idx, inputs in enumerate(self.batches()):
            outputs, losses = self.process_batch(inputs)
            self.model_optimizer.zero_grad()
            losses['loss'].backward()
            self.model_optimizer.step()
            total += losses['loss'].item()
            self.step += 1
        self.model_lr_scheduler.step()
        print(f"epoch {self.epoch} loss {total / (batch_idx + 1):.4f} lr {self.model_optimizer.param_groups[0]['lr']:.1e}")


if __name__ == '__main__':
    opts = types.SimpleNamespace(learning_rate=1e-3, scheduler_step_size=15, num_epochs=20,
                                 freeze_teacher_epoch=15, batch_size=8, batches_per_epoch=4)
    Trainer(opts).train()
