"""
Shape: a training-framework Logic class holding the step hooks for a dict of models and a dict of optimizers: train_epoch_begin(models, epoch, loader) puts every model in train mode, train_step(models, optimizers, batch_idx, batch) runs forward/backward, train_step_optimizers steps them, train_validation_begin(models) puts every model in eval mode and train_validation_end(models) is an empty hook; a small Trainer drives the hooks and runs its evaluator on an iteration trigger that need not fall on epoch boundaries.
Bug: train_validation_end does not put the models back into train mode, so when validation runs in the middle of an epoch the remaining steps of that epoch train in eval mode; only the next train_epoch_begin restores training mode.
Thread: https://github.com/pfnet/pytorch-pfn-extras/issues/688
"""
from typing import Any, Dict, Mapping

import torch


class StepLogic:
    def __init__(self, model_name: str = 'main', backward_outputs=None):
        self.model_name = model_name
        self.backward_outputs = backward_outputs or ['loss']

    def train_epoch_begin(self, models: Mapping[str, torch.nn.Module], epoch: int, loader: Any) -> None:
        for net in models.values():
            net.train()
        sampler = getattr(loader, 'sampler', None)
        if hasattr(sampler, 'set_epoch'):
            sampler.set_epoch(epoch)

    def train_epoch_end(self, models: Mapping[str, torch.nn.Module], epoch: int) -> None:
        pass

    def train_step(self, models: Mapping[str, torch.nn.Module], optimizers: Mapping[str, torch.optim.Optimizer],
                   batch_idx: int, batch: Any) -> Any:
        net = models[self.model_name]
        optimizers[self.model_name].zero_grad()
        outs = net(**batch) if isinstance(batch, dict) else net(*batch)
        for key in self.backward_outputs:
            outs[key].backward()
        return outs

    def train_step_optimizers(self, models: Mapping[str, torch.nn.Module],
                              optimizers: Mapping[str, torch.optim.Optimizer], batch_idx: int) -> None:
        optimizers[self.model_name].step()

    def train_validation_begin(self, models: Mapping[str, torch.nn.Module]) -> None:
        for net in models.values():
            net.eval()

    def train_validation_end(self, models: Mapping[str, torch.nn.Module]) -> None:
        pass

    def eval_step(self, models: Mapping[str, torch.nn.Module], batch_idx: int, batch: Any) -> Any:
        net = models[self.model_name]
        with torch.no_grad():
            return net(**batch) if isinstance(batch, dict) else net(*batch)


class LoopTrainer:
    def __init__(self, logic: StepLogic, models: Dict[str, torch.nn.Module],
                 optimizers: Dict[str, torch.optim.Optimizer], max_epochs: int,
                 eval_every_iters: int):
        self.logic = logic
        self.models = models
        self.optimizers = optimizers
        self.max_epochs = max_epochs
        self.eval_every_iters = eval_every_iters
        self.iteration = 0

    def _evaluate(self, val_loader):
        self.logic.train_validation_begin(self.models)
        totals = []
        for idx, batch in enumerate(val_loader):
            outs = self.logic.eval_step(self.models, idx, batch)
            totals.append(float(outs['loss']))
        self.logic.train_validation_end(self.models)
        return sum(totals) / max(len(totals), 1)

    def run(self, train_loader, val_loader):
        for epoch in range(self.max_epochs):
            self.logic.train_epoch_begin(self.models, epoch, train_loader)
            for idx, batch in enumerate(train_loader):
                self.logic.train_step(self.models, self.optimizers, idx, batch)
                self.logic.train_step_optimizers(self.models, self.optimizers, idx)
                self.iteration += 1
                if self.iteration % self.eval_every_iters == 0:
                    val_loss = self._evaluate(val_loader)
                    print('iter', self.iteration, 'val/loss', val_loss)
            self.logic.train_epoch_end(self.models, epoch)
