"""A semi-supervised toolkit's MeanTeacher algorithm: train() draws a labeled and an unlabeled batch
(weak and strong views) per iteration, calls train_step() and then the "after_train_step" hooks
(ParamUpdateHook: backward, optimizer.step, zero_grad; EMAHook: update the EMA shadow). train_step
computes the supervised loss on the student, swaps the EMA shadow into the model to get teacher
logits on the weak view under no_grad, then runs the student on the strong view for an MSE
consistency loss against the teacher's probabilities, ramped in by an unsup warm-up. The strong-view
logits are taken from the weak-view (teacher) output instead of the student's strong-view output, so
the consistency term compares the teacher with itself: it is exactly 0, has no graph, and only the
supervised loss on the few labeled samples ever trains the model.

Thread: https://github.com/microsoft/Semi-supervised-learning/issues/102
"""
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

PROTOS = torch.randn(10, 32, generator=torch.Generator().manual_seed(11))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        feat = self.body(x)
        return {"logits": self.head(feat), "feat": feat}


class EMA:
    def __init__(self, model, decay):
        self.model, self.decay = model, decay
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.backup = {}

    def update(self):
        for n, p in self.model.named_parameters():
            self.shadow[n].mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)

    def apply_shadow(self):
        for n, p in self.model.named_parameters():
            self.backup[n] = p.data.clone()
            p.data.copy_(self.shadow[n])

    def restore(self):
        for n, p in self.model.named_parameters():
            p.data.copy_(self.backup[n])


class ParamUpdateHook:
    def after_train_step(self, alg):
        alg.out_dict["loss"].backward()
        alg.optimizer.step()
        alg.model.zero_grad()


class EMAHook:
    def after_train_step(self, alg):
        alg.ema.update()


class MeanTeacher:
    def __init__(self, args):
        self.args, self.model, self.it = args, Net(), 0
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9)
        self.ema = EMA(self.model, args.ema_m)
        self.hooks = [ParamUpdateHook(), EMAHook()]
        self.lambda_u, self.unsup_warm_up = args.lambda_u, args.unsup_warm_up

    def consistency_loss(self, logits, targets):
        return F.mse_loss(torch.softmax(logits, dim=-1), targets, reduction="mean")

    def train_step(self, x_lb, y_lb, x_ulb_w, x_ulb_s):
        outs_x_lb = self.model(x_lb)
        sup_loss = F.cross_entropy(outs_x_lb["logits"], y_lb)
        self.ema.apply_shadow()
        with torch.no_grad():
            outs_x_ulb_w = self.model(x_ulb_w)
            logits_x_ulb_w = outs_x_ulb_w["logits"]
        self.ema.restore()
        outs_x_ulb_s = self.model(x_ulb_s)  # noqa: F841
        logits_x_ulb_s = outs_x_ulb_w["logits"]
        unsup_loss = self.consistency_loss(logits_x_ulb_s, torch.softmax(logits_x_ulb_w.detach(), dim=-1))
        warm = np.clip(self.it / (self.unsup_warm_up * self.args.num_train_iter), 0.0, 1.0)
        total = sup_loss + self.lambda_u * unsup_loss * warm
        return {"loss": total}, {"sup_loss": sup_loss.item(), "unsup_loss": unsup_loss.item()}

    def train(self, labeled, unlabeled, test):
        g = torch.Generator().manual_seed(0)
        (xl, yl), xu = labeled, unlabeled
        self.model.train()
        while self.it < self.args.num_train_iter:
            i = torch.randint(0, len(xl), (16,), generator=g)
            j = torch.randint(0, len(xu), (64,), generator=g)
            x_w = xu[j] + 0.1 * torch.randn(64, 32, generator=g)
            x_s = (xu[j] + 0.6 * torch.randn(64, 32, generator=g)) * (torch.rand(64, 32, generator=g) > 0.2)
            self.out_dict, self.log_dict = self.train_step(xl[i], yl[i], x_w, x_s)
            for hook in self.hooks:
                hook.after_train_step(self)
            self.it += 1
            if self.it % 40 == 0:
                print(f"it {self.it} {self.log_dict} acc {self.evaluate(*test):.3f}")

    def evaluate(self, x, y):
        self.model.eval()
        self.ema.apply_shadow()
        with torch.no_grad():
            acc = (self.model(x)["logits"].argmax(-1) == y).float().mean().item()
        self.ema.restore()
        self.model.train()
        return acc


def make(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    return PROTOS[y] + 1.2 * torch.randn(n, 32, generator=g), y


def main():
    torch.manual_seed(0)
    args = SimpleNamespace(lr=0.03, ema_m=0.99, lambda_u=50.0, unsup_warm_up=0.4, num_train_iter=200)
    labeled, (xu, _), test = make(40, 1), make(4000, 2), make(1000, 3)
    MeanTeacher(args).train(labeled, xu, test)


if __name__ == "__main__":
    main()
