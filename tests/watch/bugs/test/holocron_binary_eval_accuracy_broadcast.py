"""An image binary-classification trainer in the holocron style: a Trainer base class built
from (model, train_loader, val_loader, criterion, optimizer) with fit_n_epochs(num_epochs,
lr) driving a one-cycle schedule, _fit_epoch() stepping batch by batch, and a
BinaryClassificationTrainer subclass whose _get_loss() reshapes the float targets to the
model's (N, 1) logits for BCEWithLogitsLoss and whose evaluate() returns the validation loss
and accuracy printed after every epoch. evaluate() compares (target >= 0.5), of shape (N,),
with (sigmoid(out) >= 0.5), of shape (N, 1): broadcasting turns that into an (N, N) grid that
matches every target against every prediction in the batch, and the sum is then divided by
the number of samples, so the reported accuracy counts pairs, not images. It lands near
half the batch size (hundreds of percent) whatever the model does, and it tracks the
class balance of the predictions, not whether they are right.

Thread: https://github.com/frgfm/holocron/pull/228
"""
import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, train_loader, val_loader, criterion, optimizer):
        self.model = model
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.criterion = criterion
        self.optimizer = optimizer
        self.epoch = 0
        self.step = 0
        self.min_loss = math.inf

    def _get_loss(self, x, target, return_logits=False):
        out = self.model(x)
        loss = self.criterion(out, target)
        return (loss, out) if return_logits else loss

    def _fit_epoch(self):
        self.model.train()
        for x, target in self.train_loader:
            loss = self._get_loss(x, target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.scheduler.step()
            self.step += 1
        self.epoch += 1

    def fit_n_epochs(self, num_epochs, lr):
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(
            self.optimizer, max_lr=lr, epochs=num_epochs, steps_per_epoch=len(self.train_loader))
        for _ in range(num_epochs):
            self._fit_epoch()
            eval_metrics = self.evaluate()
            print(f"Epoch {self.epoch}/{num_epochs} - {self._eval_metrics_str(eval_metrics)}")
            if eval_metrics["val_loss"] < self.min_loss:
                self.min_loss = eval_metrics["val_loss"]


class BinaryClassificationTrainer(Trainer):
    def _get_loss(self, x, target, return_logits=False):
        target = target.to(dtype=x.dtype)
        out = self.model(x)
        loss = self.criterion(out, target.view_as(out))
        return (loss, out) if return_logits else loss

    @torch.inference_mode()
    def evaluate(self):
        self.model.eval()
        val_loss, top1, num_samples, num_valid_batches = 0.0, 0, 0, 0
        for x, target in self.val_loader:
            _loss, out = self._get_loss(x, target, return_logits=True)
            if not torch.isnan(_loss) and not torch.isinf(_loss):
                val_loss += _loss.item()
                num_valid_batches += 1
            top1 += int(torch.sum((target >= 0.5) == (torch.sigmoid(out) >= 0.5)).item())
            num_samples += x.shape[0]
        val_loss /= num_valid_batches
        return dict(val_loss=val_loss, acc=top1 / num_samples)

    @staticmethod
    def _eval_metrics_str(eval_metrics):
        return f"Validation loss: {eval_metrics['val_loss']:.4} (Acc: {eval_metrics['acc']:.2%})"


def make_images(n, gen):
    """Class 1: a bright vertical bar somewhere in the image; class 0: a horizontal one."""
    x = 0.5 * torch.randn(n, 3, 24, 24, generator=gen)
    y = torch.randint(0, 2, (n,), generator=gen)
    for i in range(n):
        p = int(torch.randint(2, 20, (1,), generator=gen))
        if y[i] == 1:
            x[i, :, :, p:p + 3] += 1.0
        else:
            x[i, :, p:p + 3, :] += 1.0
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_loader = DataLoader(make_images(512, gen), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(1))
    val_loader = DataLoader(make_images(200, gen), batch_size=32)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    trainer = BinaryClassificationTrainer(model, train_loader, val_loader, nn.BCEWithLogitsLoss(), optimizer)
    trainer.fit_n_epochs(8, 3e-3)


if __name__ == "__main__":
    main()
