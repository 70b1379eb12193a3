"""A FunASR-style trainer class: train_epoch() walks the loader with a batch index, picks a
context (model.no_sync under DDP, nullcontext otherwise) per micro-batch, runs forward_step()
(model returns loss, stats, weight) and backward_step() (loss / accum_grad, backward) inside it,
and update_step() steps the optimizer and a warmup scheduler when (batch_idx + 1) % accum_grad
== 0. The no_sync choice uses the wrong test, batch_idx % accum_grad != 0: the FIRST micro-batch
of each accumulation window runs with gradient sync and the LAST one (the one whose backward
should all-reduce the accumulated gradient right before the step) runs inside no_sync(). The
gradients of micro-batches 2..accum_grad are therefore never communicated, every rank steps with
mostly its own local gradient, and the replicas drift apart while the run looks normal. Two ranks
are simulated in one process by a lockstep DDP stand-in whose gradient all-reduce fires at the
end of a backward only when sync was enabled at forward time, as in DDP.

Thread: https://github.com/modelscope/FunASR/pull/3472
"""
import copy
import math
from contextlib import contextmanager, nullcontext

import torch
import torch.nn.functional as F
from torch import nn


class _RankLosses(torch.autograd.Function):
    """Mean of the per-rank losses for logging; in backward every rank gets the full upstream
    gradient (each rank backwards its own loss) and, when sync was on, the all-reduce is queued
    to run once autograd has accumulated every .grad."""

    @staticmethod
    def forward(ctx, ddp, sync, *losses):
        ctx.ddp, ctx.sync, ctx.n = ddp, sync, len(losses)
        return torch.stack(losses).mean()

    @staticmethod
    def backward(ctx, grad):
        if ctx.sync:
            torch.autograd.Variable._execution_engine.queue_callback(ctx.ddp._allreduce_grads)
        return (None, None) + (grad,) * ctx.n


class LockstepDDP(nn.Module):
    """Stands in for DistributedDataParallel over `world_size` ranks in one process."""

    def __init__(self, module, world_size):
        super().__init__()
        self.replicas = nn.ModuleList([module] + [copy.deepcopy(module) for _ in range(world_size - 1)])
        self.require_backward_grad_sync = True

    @property
    def module(self):
        return self.replicas[0]

    @contextmanager
    def no_sync(self):
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _allreduce_grads(self):
        for group in zip(*(r.parameters() for r in self.replicas)):
            if group[0].grad is None:
                continue
            avg = torch.stack([p.grad for p in group]).mean(0)
            for p in group:
                p.grad.copy_(avg)

    def forward(self, **batch):
        outs = [rep(**{k: v[r] for k, v in batch.items()}) for r, rep in enumerate(self.replicas)]
        loss = _RankLosses.apply(self, self.require_backward_grad_sync, *[o[0] for o in outs])
        stats = {k: torch.stack([o[1][k] for o in outs]).mean() for k in outs[0][1]}
        weight = sum(o[2] for o in outs)
        return loss, stats, weight


class UtteranceClassifier(nn.Module):
    """Small frame encoder + mean pooling + classifier; returns (loss, stats, weight)."""

    def __init__(self, feat_dim=20, hidden=64, num_classes=12):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(feat_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.decoder = nn.Linear(hidden, num_classes)

    def forward(self, speech, text):
        logits = self.decoder(self.encoder(speech).mean(dim=1))
        loss = F.cross_entropy(logits, text)
        acc = (logits.argmax(-1) == text).float().mean()
        return loss, {"loss": loss.detach(), "acc": acc}, torch.tensor(float(text.numel()))


def make_split(n, speakers, seed, feat_dim=20, frames=10, num_classes=12):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(num_classes, feat_dim, generator=torch.Generator().manual_seed(7))
    spk_shift = 1.5 * torch.randn(8, feat_dim, generator=torch.Generator().manual_seed(8))
    labels = torch.randint(0, num_classes, (n,), generator=g)
    spk = torch.tensor(speakers)[torch.randint(0, len(speakers), (n,), generator=g)]
    x = protos[labels][:, None] + spk_shift[spk][:, None] + 1.2 * torch.randn(n, frames, feat_dim, generator=g)
    return x, labels


class RankShardedLoader:
    """Each rank reads its own data list (FunASR splits the jsonl per rank); batches of all ranks
    are stacked on a leading rank dimension for the lockstep stand-in."""

    def __init__(self, shards, batch_size, seed=0):
        self.shards, self.batch_size, self.seed, self.epoch = shards, batch_size, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return len(self.shards[0][0]) // self.batch_size

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        perms = [torch.randperm(len(x), generator=g) for x, _ in self.shards]
        for b in range(len(self)):
            sl = [p[b * self.batch_size:(b + 1) * self.batch_size] for p in perms]
            yield {"speech": torch.stack([x[i] for (x, _), i in zip(self.shards, sl)]),
                   "text": torch.stack([y[i] for (_, y), i in zip(self.shards, sl)])}


class WarmupLR(torch.optim.lr_scheduler.LambdaLR):
    def __init__(self, optim, warmup_steps=25):
        super().__init__(optim, lambda s: min((s + 1) / warmup_steps, math.sqrt(warmup_steps / (s + 1))))


class Trainer:
    def __init__(self, accum_grad=4, use_ddp=True, log_interval=16, max_epoch=8):
        self.accum_grad, self.use_ddp, self.log_interval, self.max_epoch = accum_grad, use_ddp, log_interval, max_epoch
        self.train_loss_avg = 0.0
        self.optim_steps = 0

    def forward_step(self, model, batch, loss_dict):
        loss, stats, weight = model(**batch)
        loss_dict.update(loss=loss, stats=stats, weight=weight)

    def backward_step(self, model, loss_dict):
        scaled_loss = loss_dict["loss"] / self.accum_grad
        scaled_loss.backward()

    def update_step(self, model, optim, scheduler, loss_dict):
        if (loss_dict["batch_idx"] + 1) % self.accum_grad == 0:
            optim.step()
            scheduler.step()
            optim.zero_grad(set_to_none=True)
            self.optim_steps += 1

    def train_epoch(self, model, optim, scheduler, dataloader_train, epoch):
        model.train()
        accum_grad = self.accum_grad
        optim.zero_grad()
        dataloader_train.set_epoch(epoch)
        for batch_idx, batch in enumerate(dataloader_train):
            loss_dict = {"epoch": epoch, "batch_idx": batch_idx}
            my_context = nullcontext
            if self.use_ddp:
                my_context = model.no_sync if batch_idx % accum_grad != 0 else my_context
            with my_context():
                self.forward_step(model, batch, loss_dict)
                self.backward_step(model, loss_dict)
            self.update_step(model, optim, scheduler, loss_dict)
            self.train_loss_avg = (self.train_loss_avg * batch_idx + loss_dict["loss"].item()) / (batch_idx + 1)
            if (batch_idx + 1) % self.log_interval == 0:
                print(f"train, epoch: {epoch}/{self.max_epoch}, step_in_epoch: {batch_idx + 1}/{len(dataloader_train)}, "
                      f"optim steps: {self.optim_steps}, loss_avg: {self.train_loss_avg:.4f}, "
                      f"acc: {loss_dict['stats']['acc'].item():.3f}, lr: {scheduler.get_last_lr()[0]:.2e}")

    @torch.no_grad()
    def validate(self, model, val_x, val_y, epoch):
        model.eval()
        accs = [(rep.decoder(rep.encoder(val_x).mean(1)).argmax(-1) == val_y).float().mean().item() for rep in model.replicas]
        drift = sum((a - b).pow(2).sum() for a, b in zip(model.replicas[0].parameters(), model.replicas[1].parameters())).sqrt()
        print(f"val, epoch: {epoch}, acc rank0: {accs[0]:.3f}, acc rank1: {accs[1]:.3f}, weight distance rank0-rank1: {drift.item():.4f}")
        model.train()


def main():
    torch.manual_seed(0)
    world_size = 2
    shards = [make_split(1024, [0, 1, 2, 3], seed=1), make_split(1024, [4, 5, 6, 7], seed=2)]
    val_x, val_y = make_split(512, list(range(8)), seed=3)
    loader = RankShardedLoader(shards, batch_size=16)
    model = LockstepDDP(UtteranceClassifier(), world_size)
    optim = torch.optim.Adam(model.parameters(), lr=2e-3)
    scheduler = WarmupLR(optim)
    trainer = Trainer(accum_grad=4, use_ddp=world_size > 1)
    for epoch in range(trainer.max_epoch):
        trainer.train_epoch(model, optim, scheduler, loader, epoch)
        trainer.validate(model, val_x, val_y, epoch)
    print(f"done, optimizer steps: {trainer.optim_steps}")


if __name__ == "__main__":
    main()
