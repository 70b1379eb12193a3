"""A trainer library with algorithms hooked on events: Trainer.__init__ runs Event.INIT, where the SAM
algorithm wraps the optimizer in a SAMOptimizer (a torch.optim.Optimizer built over the base optimizer's
param_groups, with first_step/second_step and a closure-driven step()); then it compiles the
warmup-plus-cosine schedule into a LambdaLR on the wrapped optimizer, which sets the lr of the shared
groups to 0.0 for the warmup start; then, for a sharded data-parallel config, it prepares the module
and rebuilds the optimizer's param groups (clear the list, add one new group with the saved
hyperparameters and the wrapped model's parameters). That rebuild runs on the SAMOptimizer, so from
here on SAM and its base optimizer hold different group dicts: the scheduler raises the lr in SAM's
new group, while the base AdamW that performs every update keeps lr = 0.0 for the whole run, and
nothing is learned. (Here the sharded wrapper is a single-process stand-in that keeps the same
parameter tensors.)

Thread: https://github.com/mosaicml/composer/pull/3259
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class SAMOptimizer(torch.optim.Optimizer):
    def __init__(self, base_optimizer, rho=0.05, epsilon=1e-12, interval=1):
        self.base_optimizer = base_optimizer
        self.interval = interval
        self.global_step = 0
        super().__init__(self.base_optimizer.param_groups, {"rho": rho, "epsilon": epsilon})

    @torch.no_grad()
    def first_step(self):
        norm = torch.norm(torch.stack([p.grad.norm(2) for g in self.param_groups for p in g["params"]
                                       if p.grad is not None]), 2)
        for group in self.param_groups:
            scale = group["rho"] / (norm + group["epsilon"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale
                p.add_(e_w)
                self.state[p]["e_w"] = e_w

    @torch.no_grad()
    def second_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if "e_w" in self.state[p]:
                    p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()

    @torch.no_grad()
    def step(self, closure=None):
        closure = torch.enable_grad()(closure)
        if (self.global_step + 1) % self.interval == 0:
            loss = closure()
            self.first_step()
            closure(log=False)
            self.second_step()
        else:
            loss = closure()
            self.base_optimizer.step()
        self.global_step += 1
        return loss


class SAM:
    """Algorithm: on Event.INIT, wrap every optimizer of the state with SAM."""

    def __init__(self, rho=0.05, interval=1):
        self.rho, self.interval = rho, interval

    def match(self, event, state):
        return event == "INIT"

    def apply(self, event, state):
        state["optimizers"] = [SAMOptimizer(o, rho=self.rho, interval=self.interval) for o in state["optimizers"]]


def cosine_with_warmup(t_warmup, t_max, alpha_f=0.1):
    def factor(step):
        if step < t_warmup:
            return step / t_warmup
        frac = (step - t_warmup) / max(1, t_max - t_warmup)
        return alpha_f + (1 - alpha_f) * 0.5 * (1 + math.cos(math.pi * frac))
    return factor


def prepare_sharded_module(model, optimizers):
    """Stand-in for the sharded wrapper: re-registers the parameters, then rebuilds the optimizer's groups."""
    optim = optimizers[0]
    info = {k: v for k, v in optim.param_groups[0].items() if k != "params"}
    optim.param_groups.clear()
    optim.state.clear()
    wrapped = model  # the sharded wrapper would flatten parameters here
    info["params"] = list(wrapped.parameters())
    optim.add_param_group(info)
    return wrapped


class Trainer:
    def __init__(self, model, train_dataloader, optimizer, algorithms, max_epochs, warmup_frac, sharded):
        self.model = model
        self.train_dataloader = train_dataloader
        self.max_epochs = max_epochs
        self.state = {"optimizers": [optimizer]}
        for algo in algorithms:
            if algo.match("INIT", self.state):
                algo.apply("INIT", self.state)
        total = max_epochs * len(train_dataloader)
        self.schedulers = [torch.optim.lr_scheduler.LambdaLR(
            o, cosine_with_warmup(max(1, int(warmup_frac * total)), total)) for o in self.state["optimizers"]]
        if sharded:
            self.model = prepare_sharded_module(self.model, self.state["optimizers"])

    def fit(self):
        optimizer = self.state["optimizers"][0]
        step = 0
        for epoch in range(self.max_epochs):
            self.model.train()
            for x, y in self.train_dataloader:
                logged = {}

                def closure(log=True):
                    optimizer.zero_grad()
                    loss = F.cross_entropy(self.model(x), y)
                    loss.backward()
                    if log:
                        logged["loss"] = loss.item()
                    return loss

                optimizer.step(closure)
                for s in self.schedulers:
                    s.step()
                if step % 16 == 0:
                    print(f"epoch {epoch} step {step} loss {logged['loss']:.4f} "
                          f"lr {optimizer.param_groups[0]['lr']:.2e}")
                step += 1


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 32, generator=g)
    w = torch.randn(32, 4, generator=g)
    y = (x @ w + 0.3 * torch.randn(512, 4, generator=g)).argmax(1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(2))
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-5)
    trainer = Trainer(model, loader, optimizer, algorithms=[SAM()], max_epochs=3, warmup_frac=0.01, sharded=True)
    trainer.fit()
    with torch.no_grad():
        acc = (trainer.model(x).argmax(1) == y).float().mean().item()
    print(f"train accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
