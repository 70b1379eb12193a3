"""A super-gradients style Trainer: train(model, training_params, train_loader) takes a dict of
training params (SGD optimizer by default, mixed_precision, clip_grad_norm, batch_accumulate), keeps
a GradScaler that is enabled only with mixed precision, runs the forward pass under autocast and
calls phase callbacks around the backward and gradient step. Its _backward_step does
scaler.scale(loss).backward() and then applies gradient clipping right away, before the
accumulation check and before scaler.step(); nothing unscales the gradients first. With
mixed_precision=True and clip_grad_norm=1.0 the clipping therefore measures the gradient
multiplied by the loss scale (65536), rescales it to norm 1, and scaler.step() divides it by the
scale again, so SGD receives a gradient of norm about 1.5e-5 on every step.

Thread: https://github.com/Deci-AI/super-gradients/pull/653
"""
import torch
import torch.nn.functional as F
from torch import nn


class PhaseCallbackHandler:
    def __init__(self, callbacks):
        self.callbacks = callbacks

    def __getattr__(self, phase):
        return lambda context: [getattr(cb, phase, lambda c: None)(context) for cb in self.callbacks]


class LossLoggerCallback:
    def on_train_batch_gradient_step_end(self, context):
        if context["step"] % 20 == 0:
            print(f"epoch {context['epoch']} step {context['step']} loss {context['loss']:.4f}")


class Trainer:
    def __init__(self, experiment_name):
        self.experiment_name = experiment_name

    def train(self, model, training_params, train_loader, valid_loader):
        self.net, self.train_loader, self.training_params = model, train_loader, training_params
        self.max_epochs = training_params["max_epochs"]
        self.batch_accumulate = training_params.get("batch_accumulate", 1)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=training_params["initial_lr"],
                                         momentum=0.9, weight_decay=1e-4)
        # SCALER IS ENABLED ONLY IF mixed_precision=True
        self.scaler = torch.amp.GradScaler("cpu", enabled=training_params["mixed_precision"])
        self.phase_callback_handler = PhaseCallbackHandler([LossLoggerCallback()])
        step = 0
        for epoch in range(self.max_epochs):
            self.net.train()
            for batch_idx, (inputs, targets) in enumerate(self.train_loader):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=training_params["mixed_precision"]):
                    loss = F.cross_entropy(self.net(inputs).float(), targets)
                context = {"epoch": epoch, "step": step, "loss": loss.item()}
                self._backward_step(loss, epoch, batch_idx, context)
                step += 1
            print(f"epoch {epoch} valid accuracy {self._validate(valid_loader):.3f}")

    def _backward_step(self, loss, epoch, batch_idx, context):
        self.scaler.scale(loss).backward()
        self.phase_callback_handler.on_train_batch_backward_end(context)
        if self.training_params["clip_grad_norm"]:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.training_params["clip_grad_norm"])
        integrated_batches_num = batch_idx + len(self.train_loader) * epoch + 1
        if integrated_batches_num % self.batch_accumulate == 0:
            self.phase_callback_handler.on_train_batch_gradient_step_start(context)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()
            self.phase_callback_handler.on_train_batch_gradient_step_end(context)

    @torch.no_grad()
    def _validate(self, loader):
        self.net.eval()
        correct = sum((self.net(x).argmax(1) == y).sum().item() for x, y in loader)
        return correct / sum(len(y) for _, y in loader)


def make_loader(n, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 1, 12, 12, generator=torch.Generator().manual_seed(123))
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y] + 0.8 * torch.randn(n, 1, 12, 12, generator=g)
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, n, batch_size)]


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    training_params = {"max_epochs": 4, "initial_lr": 0.05, "mixed_precision": True,
                       "clip_grad_norm": 1.0, "batch_accumulate": 1}
    trainer = Trainer(experiment_name="cifar_like_amp")
    trainer.train(model, training_params, make_loader(1280, 64, seed=0), make_loader(512, 128, seed=1))


if __name__ == "__main__":
    main()
