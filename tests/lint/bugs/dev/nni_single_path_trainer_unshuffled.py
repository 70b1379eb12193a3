"""
Shape: one-shot NAS trainer class SinglePathTrainer(BaseOneShotTrainer): __init__ stores the model/loss/metrics/optimizer passed in, swaps LayerChoice/InputChoice modules for random-path wrappers, and builds self.train_loader / self.valid_loader from the datasets; _train_one_epoch samples a random path per batch; fit() alternates _train_one_epoch and _validate_one_epoch.
Bug: self.train_loader is built with torch.utils.data.DataLoader(train_ds, batch_size=..., num_workers=...) and no shuffle=True, so the training order is identical every epoch.
Thread: https://github.com/microsoft/nni/issues/4692
"""
import logging
import random

import torch
import torch.nn as nn

from nni.retiarii.oneshot.interface import BaseOneShotTrainer
from nni.retiarii.oneshot.pytorch.utils import AverageMeterGroup, replace_input_choice, replace_layer_choice, to_device

_logger = logging.getLogger(__name__)


class RandomPathLayer(nn.Module):
    def __init__(self, lc):
        super(RandomPathLayer, self).__init__()
        self.branch_names = []
        for name, module in lc.named_children():
            self.add_module(name, module)
            self.branch_names.append(name)
        self.pick = None

    def forward(self, *args, **kwargs):
        if isinstance(self.pick, list):
            return sum(getattr(self, self.branch_names[i])(*args, **kwargs) for i in self.pick)
        return getattr(self, self.branch_names[self.pick])(*args, **kwargs)

    def __len__(self):
        return len(self.branch_names)


class RandomPathInput(nn.Module):
    def __init__(self, ic):
        super(RandomPathInput, self).__init__()
        self.n_inputs = ic.n_inputs
        self.pick = None

    def forward(self, candidates):
        if isinstance(self.pick, list):
            return sum(candidates[t] for t in self.pick)
        return candidates[self.pick]

    def __len__(self):
        return self.n_inputs


class SinglePathTrainer(BaseOneShotTrainer):
    def __init__(self, model, loss, metrics, optimizer, num_epochs, train_ds, valid_ds,
                 batch_size=64, workers=4, device=None, log_every=None):
        self.model = model
        self.loss = loss
        self.metrics = metrics
        self.optimizer = optimizer
        self.num_epochs = num_epochs
        self.train_ds = train_ds
        self.valid_ds = valid_ds
        self.device = torch.device('cuda' if torch.cuda.is_available() else 'cpu') if device is None else device
        self.log_every = log_every
        self.model.to(self.device)

        self.mutables = []
        replace_layer_choice(self.model, RandomPathLayer, self.mutables)
        replace_input_choice(self.model, RandomPathInput, self.mutables)
        for _, module in self.mutables:
            module.to(self.device)

        self.train_loader = torch.utils.data.DataLoader(self.train_ds,
                                                        batch_size=batch_size,
                                                        num_workers=workers)
        self.valid_loader = torch.utils.data.DataLoader(self.valid_ds,
                                                        batch_size=batch_size,
                                                        num_workers=workers)

    def _draw_path(self):
        picks = {}
        for name, module in self.mutables:
            if name not in picks:
                picks[name] = random.randint(0, len(module) - 1)
            module.pick = picks[name]
        return picks

    def _train_one_epoch(self, epoch):
        self.model.train()
        tracker = AverageMeterGroup()
        for it, (x, y) in enumerate(self.train_loader):
            x, y = to_device(x, self.device), to_device(y, self.device)
            self.optimizer.zero_grad()
            self._draw_path()
            logits = self.model(x)
            loss = self.loss(logits, y)
            loss.backward()
            self.optimizer.step()
            m = self.metrics(logits, y)
            m["loss"] = loss.item()
            tracker.update(m)

    def _validate_one_epoch(self, epoch):
        self.model.eval()
        tracker = AverageMeterGroup()
        with torch.no_grad():
            for it, (x, y) in enumerate(self.valid_loader):
                x, y = to_device(x, self.device), to_device(y, self.device)
                self._draw_path()
                logits = self.model(x)
                m = self.metrics(logits, y)
                m["loss"] = self.loss(logits, y).item()
                tracker.update(m)

    def fit(self):
        for i in range(self.num_epochs):
            self._train_one_epoch(i)
            self._validate_one_epoch(i)

    def export(self):
        return self._draw_path()
