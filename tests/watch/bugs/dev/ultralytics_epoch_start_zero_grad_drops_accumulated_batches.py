"""A YOLO-style BaseTrainer for an image classifier: _setup_train builds the model, the SGD optimizer
(three parameter groups: decayed weights, norm weights, biases), a linear LambdaLR and a disabled
GradScaler; _do_train runs the epoch loop with a warmup that ramps lr, momentum and the
accumulation count (nbs / batch_size), calls scaler.scale(loss).backward() on every batch and
optimizer_step() (unscale, clip to norm 10, step, update, zero_grad) once `ni - last_opt_step >=
self.accumulate`; last_opt_step carries over from one epoch to the next. The epoch loop also calls
self.optimizer.zero_grad() at the start of every epoch, before the batch loop. Since an epoch's
last few batches usually have not reached the accumulation count yet, their gradients are still
waiting in .grad when the next epoch begins, and that zero_grad throws them away: with 7 batches
per epoch and accumulate=4, a large share of the backpropagated batches never reaches a step.

Thread: https://github.com/ultralytics/ultralytics/pull/11217
"""
import warnings
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class ClassifyDataset(Dataset):
    def __init__(self, n, nc=5, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(nc, 3, size, size, generator=torch.Generator().manual_seed(123))
        self.cls = torch.randint(0, nc, (n,), generator=g)
        self.img = protos[self.cls] * 0.6 + torch.randn(n, 3, size, size, generator=g)

    def __len__(self):
        return len(self.cls)

    def __getitem__(self, i):
        return {"img": self.img[i], "cls": self.cls[i]}


class ClassificationModel(nn.Module):
    def __init__(self, nc=5):
        super().__init__()
        self.model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.SiLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.SiLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, nc))

    def forward(self, x):
        if isinstance(x, dict):  # training: the batch dict comes in, the loss goes out
            return self.loss(x)
        return self.model(x)

    def loss(self, batch):
        preds = self.model(batch["img"])
        loss = F.cross_entropy(preds, batch["cls"], reduction="mean")
        return loss, loss.detach()


class BaseTrainer:
    def __init__(self, args):
        self.args = args
        self.epochs = args.epochs
        self.batch_size = args.batch
        self.start_epoch = 0
        self.accumulate = 1
        # bookkeeping for this reproduction: batches whose gradient reached a step / was dropped
        self.pending = self.applied = self.dropped = 0

    def build_optimizer(self, model, lr, momentum, decay):
        g = [], [], []  # decayed weights, norm weights, biases
        bn = tuple(v for k, v in nn.__dict__.items() if "Norm" in k)
        for module in model.modules():
            for name, param in module.named_parameters(recurse=False):
                if "bias" in name:
                    g[2].append(param)
                elif isinstance(module, bn):
                    g[1].append(param)
                else:
                    g[0].append(param)
        optimizer = torch.optim.SGD(g[2], lr=lr, momentum=momentum, nesterov=True)
        optimizer.add_param_group({"params": g[0], "weight_decay": decay})
        optimizer.add_param_group({"params": g[1], "weight_decay": 0.0})
        return optimizer

    def _setup_train(self):
        torch.manual_seed(self.args.seed)
        self.model = ClassificationModel(nc=5)
        self.scaler = torch.amp.GradScaler("cpu", enabled=self.args.amp)
        self.train_loader = DataLoader(ClassifyDataset(112, seed=0), batch_size=self.batch_size,
                                       shuffle=True, generator=torch.Generator().manual_seed(0))
        self.test_loader = DataLoader(ClassifyDataset(400, seed=1), batch_size=200)
        self.accumulate = max(round(self.args.nbs / self.batch_size), 1)
        weight_decay = self.args.weight_decay * self.batch_size * self.accumulate / self.args.nbs
        self.optimizer = self.build_optimizer(self.model, self.args.lr0, self.args.momentum,
                                              weight_decay)
        self.lf = lambda x: max(1 - x / self.epochs, 0) * (1.0 - self.args.lrf) + self.args.lrf
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda=self.lf)
        self.scheduler.last_epoch = self.start_epoch - 1

    def optimizer_step(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        self.applied += self.pending
        self.pending = 0

    def _do_train(self):
        self._setup_train()
        nb = len(self.train_loader)
        nw = max(round(self.args.warmup_epochs * nb), 100) if self.args.warmup_epochs > 0 else -1
        last_opt_step = -1
        epoch = self.start_epoch
        while True:
            self.epoch = epoch
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # 'lr_scheduler.step() before optimizer.step()'
                self.scheduler.step()
            self.model.train()
            self.dropped += self.pending
            self.pending = 0
            self.optimizer.zero_grad()
            tloss = None
            for i, batch in enumerate(self.train_loader):
                ni = i + nb * epoch
                if ni <= nw:
                    xi = [0, nw]
                    self.accumulate = max(1, int(np.interp(
                        ni, xi, [1, self.args.nbs / self.batch_size]).round()))
                    for j, x in enumerate(self.optimizer.param_groups):
                        x["lr"] = np.interp(ni, xi, [self.args.warmup_bias_lr if j == 0 else 0.0,
                                                     x["initial_lr"] * self.lf(epoch)])
                        if "momentum" in x:
                            x["momentum"] = np.interp(ni, xi, [self.args.warmup_momentum,
                                                               self.args.momentum])
                with torch.autocast("cpu", enabled=self.args.amp):
                    self.loss, self.loss_items = self.model(batch)
                    tloss = (self.loss_items if tloss is None
                             else (tloss * i + self.loss_items) / (i + 1))
                self.scaler.scale(self.loss).backward()
                self.pending += 1
                if ni - last_opt_step >= self.accumulate:
                    self.optimizer_step()
                    last_opt_step = ni
            if epoch % 10 == 0 or epoch == self.epochs - 1:
                print(f"epoch {epoch + 1}/{self.epochs} loss {tloss.item():.4f} "
                      f"val top1 {self.validate():.3f}")
            epoch += 1
            if epoch >= self.epochs:
                break
        total = self.applied + self.dropped + self.pending
        print(f"batches backpropagated: {total}, gradient applied by a step: {self.applied}, "
              f"thrown away by the epoch-start zero_grad: {self.dropped}")

    def validate(self):
        self.model.eval()
        correct = 0
        with torch.no_grad():
            for batch in self.test_loader:
                correct += (self.model(batch["img"]).argmax(1) == batch["cls"]).sum().item()
        self.model.train()
        return correct / len(self.test_loader.dataset)


def main():
    args = SimpleNamespace(epochs=60, batch=16, nbs=64, lr0=0.01, lrf=0.01, momentum=0.937,
                           weight_decay=0.0005, warmup_epochs=3.0, warmup_momentum=0.8,
                           warmup_bias_lr=0.1, amp=False, seed=0)
    BaseTrainer(args)._do_train()


if __name__ == "__main__":
    main()
