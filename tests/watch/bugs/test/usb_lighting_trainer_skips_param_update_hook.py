"""A semi-supervised toolkit's lightweight Trainer(config, algorithm): fit(lb_loader, ulb_loader,
eval_loader) zips the labeled and unlabeled loaders, calls algorithm.train_step(...) on each pair and
evaluates after every epoch. The FixMatch-style algorithm keeps its backward/optimizer.step/zero_grad
and its EMA update in hooks (a ParamUpdateHook and an EMAHook run at "after_train_step"), and its
train_step only computes the supervised plus thresholded pseudo-label loss and returns it in an
out_dict. Trainer.fit never calls the hooks, so no backward and no optimizer step ever happen: the
loss is computed every iteration, the weights stay at their initial values and every epoch reports
the same accuracy.

Thread: https://github.com/microsoft/Semi-supervised-learning/issues/74
"""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

PROTOS = torch.randn(10, 32, generator=torch.Generator().manual_seed(7))


class ToyDigits(Dataset):
    def __init__(self, n, seed, labeled):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.x = PROTOS[self.y] + 0.9 * torch.randn(n, 32, generator=g)
        self.labeled = labeled

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if self.labeled:
            return {"x_lb": x + 0.1 * torch.randn_like(x), "y_lb": self.y[i]}
        strong = (x + 0.5 * torch.randn_like(x)) * (torch.rand_like(x) > 0.2)
        return {"x_ulb_w": x + 0.1 * torch.randn_like(x), "x_ulb_s": strong}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        feat = self.body(x)
        return {"logits": self.head(feat), "feat": feat}


class ParamUpdateHook:
    def after_train_step(self, alg):
        alg.out_dict["loss"].backward()
        alg.optimizer.step()
        alg.model.zero_grad()


class EMAHook:
    def after_train_step(self, alg):
        for k, v in alg.model.state_dict().items():
            if v.is_floating_point():
                alg.ema[k].mul_(alg.ema_m).add_(v.detach(), alpha=1 - alg.ema_m)
            else:
                alg.ema[k].copy_(v)


class FixMatch:
    def __init__(self, config):
        self.model, self.ema_m, self.ema = Net(), config.ema_m, None
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=config.lr, momentum=0.9, nesterov=True)
        self.p_cutoff, self.lambda_u = config.p_cutoff, config.lambda_u
        self.hooks = [ParamUpdateHook(), EMAHook()]

    def call_hook(self, name):
        for hook in self.hooks:
            if hasattr(hook, name):
                getattr(hook, name)(self)

    def process_batch(self, **kw):
        return kw

    def train_step(self, x_lb, y_lb, x_ulb_w, x_ulb_s):
        n = x_lb.shape[0]
        logits = self.model(torch.cat([x_lb, x_ulb_w, x_ulb_s]))["logits"]
        logits_lb, (logits_w, logits_s) = logits[:n], logits[n:].chunk(2)
        sup_loss = F.cross_entropy(logits_lb, y_lb)
        probs = torch.softmax(logits_w.detach(), dim=-1)
        conf, pseudo = probs.max(dim=-1)
        mask = (conf >= self.p_cutoff).float()
        unsup_loss = (F.cross_entropy(logits_s, pseudo, reduction="none") * mask).mean()
        total = sup_loss + self.lambda_u * unsup_loss
        return {"loss": total}, {"train/sup_loss": sup_loss.item(), "train/unsup_loss": unsup_loss.item()}


class Trainer:
    def __init__(self, config, algorithm):
        self.config, self.algorithm = config, algorithm

    def fit(self, train_lb_loader, train_ulb_loader, eval_loader):
        alg = self.algorithm
        alg.model.train()
        alg.ema = {k: v.detach().clone() for k, v in alg.model.state_dict().items()}
        alg.it = 0
        for epoch in range(self.config.epoch):
            alg.model.train()
            for data_lb, data_ulb in zip(train_lb_loader, train_ulb_loader):
                out_dict, log_dict = alg.train_step(**alg.process_batch(**data_lb, **data_ulb))
                alg.it += 1
            print(f"epoch {epoch} it {alg.it} loss {out_dict['loss'].item():.4f} acc {self.evaluate(eval_loader):.4f}")

    def evaluate(self, loader):
        self.algorithm.model.eval()
        correct = total = 0
        with torch.no_grad():
            for batch in loader:
                pred = self.algorithm.model(batch["x_lb"])["logits"].argmax(-1)
                correct += (pred == batch["y_lb"]).sum().item()
                total += len(pred)
        return correct / total


def main():
    torch.manual_seed(0)
    config = SimpleNamespace(epoch=4, lr=0.03, ema_m=0.999, p_cutoff=0.95, lambda_u=1.0)
    lb = DataLoader(ToyDigits(640, 1, True), batch_size=16, shuffle=True, drop_last=True)
    ulb = DataLoader(ToyDigits(2560, 2, False), batch_size=64, shuffle=True, drop_last=True)
    ev = DataLoader(ToyDigits(500, 3, True), batch_size=100)
    Trainer(config, FixMatch(config)).fit(lb, ulb, ev)


if __name__ == "__main__":
    main()
