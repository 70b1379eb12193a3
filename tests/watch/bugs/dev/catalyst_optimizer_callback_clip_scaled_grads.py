"""A Catalyst-style pipeline: a SupervisedRunner whose train(model, criterion, optimizer, loaders,
callbacks, engine) runs a CriterionCallback that stores the batch loss in runner.batch_metrics
and an OptimizerCallback that does the backward, the gradient clipping and the step through the
engine. The AMP engine wraps the forward in autocast, its backward_loss() calls
scaler.scale(loss).backward() and its optimizer_step() calls scaler.step() and scaler.update().
The OptimizerCallback applies grad_clip_fn (clip_grad_value_ with clip_value=1.0, as in the
library's MNIST config) right after backward_loss(), with no scaler.unscale_() in between, so the
clipping acts on gradients that are still multiplied by the loss scale (65536): every element
above 1/65536 in true size is cut to the same magnitude, and the optimizer receives gradients of
at most 1.5e-5 per element.

Thread: https://github.com/catalyst-team/catalyst/issues/1319
"""
from functools import partial

import torch
from torch import nn


class AMPEngine:
    def __init__(self):
        self.scaler = torch.amp.GradScaler("cpu")

    def autocast(self):
        return torch.autocast("cpu", dtype=torch.bfloat16)

    def backward_loss(self, loss, model, optimizer):
        self.scaler.scale(loss).backward()

    def optimizer_step(self, loss, model, optimizer):
        self.scaler.step(optimizer)
        self.scaler.update()

    def zero_grad(self, loss, model, optimizer):
        model.zero_grad()


class CriterionCallback:
    def on_batch_end(self, runner):
        runner.batch_metrics["loss"] = runner.criterion(runner.batch["logits"].float(), runner.batch["targets"])


class OptimizerCallback:
    def __init__(self, metric_key, accumulation_steps=1, grad_clip_fn=None, grad_clip_params=None):
        self.metric_key, self.accumulation_steps = metric_key, accumulation_steps
        self.grad_clip_fn = partial(grad_clip_fn, **(grad_clip_params or {})) if grad_clip_fn else None
        self._accumulation_counter = 0

    def on_batch_end(self, runner):
        if runner.is_train_loader:
            self._accumulation_counter += 1
            need_gradient_step = self._accumulation_counter % self.accumulation_steps == 0
            loss = runner.batch_metrics[self.metric_key]
            runner.engine.backward_loss(loss, runner.model, runner.optimizer)
            if self.grad_clip_fn is not None:
                self.grad_clip_fn(runner.model.parameters())
            if need_gradient_step:
                runner.engine.optimizer_step(loss, runner.model, runner.optimizer)
                runner.engine.zero_grad(loss, runner.model, runner.optimizer)


class SupervisedRunner:
    def handle_batch(self, batch):
        features, targets = batch
        with self.engine.autocast():
            logits = self.model(features)
        self.batch = {"features": features, "targets": targets, "logits": logits}

    def train(self, model, criterion, optimizer, scheduler, loaders, callbacks, engine, num_epochs):
        self.model, self.criterion, self.optimizer, self.engine = model, criterion, optimizer, engine
        step = 0
        for epoch in range(num_epochs):
            for loader_key, loader in loaders.items():
                self.is_train_loader = loader_key == "train"
                model.train(self.is_train_loader)
                correct = total = 0
                with torch.set_grad_enabled(self.is_train_loader):
                    for batch in loader:
                        self.batch_metrics = {}
                        self.handle_batch(batch)
                        for cb in callbacks.values():
                            cb.on_batch_end(self)
                        correct += (self.batch["logits"].argmax(1) == batch[1]).sum().item()
                        total += len(batch[1])
                        if self.is_train_loader and step % 25 == 0:
                            print(f"epoch {epoch} step {step} loss {self.batch_metrics['loss'].item():.4f}")
                        step += self.is_train_loader
                print(f"epoch {epoch} {loader_key} accuracy01 {correct / total:.3f}")
            scheduler.step()


def make_loader(n, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(64, 10, generator=torch.Generator().manual_seed(5))
    x = torch.randn(n, 1, 8, 8, generator=g)
    y = (x.flatten(1) @ w + 0.5 * torch.randn(n, 10, generator=g)).argmax(1)
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, n, batch_size)]


def main():
    torch.manual_seed(42)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2], gamma=0.3)
    callbacks = {
        "loss": CriterionCallback(),
        "optimizer": OptimizerCallback(metric_key="loss", grad_clip_fn=nn.utils.clip_grad_value_,
                                       grad_clip_params={"clip_value": 1.0}),
    }
    loaders = {"train": make_loader(1600, 32, seed=0), "valid": make_loader(640, 64, seed=1)}
    SupervisedRunner().train(model, nn.CrossEntropyLoss(), optimizer, scheduler, loaders,
                             callbacks, AMPEngine(), num_epochs=3)


if __name__ == "__main__":
    main()
