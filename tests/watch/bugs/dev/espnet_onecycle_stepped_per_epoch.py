"""A speech-toolkit style Trainer: schedulers are classified by registering the torch classes
under two abstract bases, AbsBatchStepScheduler (stepped after every optimizer update inside
train_one_epoch) and AbsEpochStepScheduler (stepped once at the end of each epoch in run()).
OneCycleLR, configured from scheduler_conf with max_lr and total_steps counted in iterations,
is registered as an epoch-step scheduler, so it is stepped once per epoch: over the whole run it
takes only max_epoch of its total_steps, and the learning rate stays near its starting value,
max_lr / div_factor, instead of rising to max_lr and annealing.

Thread: https://github.com/espnet/espnet/pull/3319
"""
from abc import ABC

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class AbsScheduler(ABC):
    pass


class AbsBatchStepScheduler(AbsScheduler):
    pass


class AbsEpochStepScheduler(AbsScheduler):
    pass


AbsBatchStepScheduler.register(torch.optim.lr_scheduler.CyclicLR)
for cls in (torch.optim.lr_scheduler.ReduceLROnPlateau, torch.optim.lr_scheduler.StepLR,
            torch.optim.lr_scheduler.ExponentialLR, torch.optim.lr_scheduler.CosineAnnealingLR,
            torch.optim.lr_scheduler.OneCycleLR):
    AbsEpochStepScheduler.register(cls)

scheduler_classes = {"onecyclelr": torch.optim.lr_scheduler.OneCycleLR,
                     "steplr": torch.optim.lr_scheduler.StepLR}


class ESPnetModel(nn.Module):
    """Frame-level classifier standing in for an encoder with a CTC-like head."""

    def __init__(self, idim=40, hdim=64, odim=12):
        super().__init__()
        self.encoder = nn.GRU(idim, hdim, batch_first=True)
        self.head = nn.Linear(hdim, odim)

    def forward(self, speech, text):
        hs, _ = self.encoder(speech)
        logits = self.head(hs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), text.reshape(-1))
        acc = (logits.argmax(-1) == text).float().mean()
        return loss, {"loss": loss.detach(), "acc": acc.detach()}


class Trainer:
    @classmethod
    def run(cls, model, optimizers, schedulers, train_iter, max_epoch, grad_clip=5.0):
        for iepoch in range(1, max_epoch + 1):
            stats = cls.train_one_epoch(model, train_iter, optimizers, schedulers, grad_clip)
            for scheduler in schedulers:
                if isinstance(scheduler, AbsEpochStepScheduler):
                    scheduler.step()
            print(f"{iepoch}epoch results: loss={stats['loss']:.4f} acc={stats['acc']:.3f} "
                  f"lr={optimizers[0].param_groups[0]['lr']:.2e}")

    @classmethod
    def train_one_epoch(cls, model, iterator, optimizers, schedulers, grad_clip):
        model.train()
        totals, n = {"loss": 0.0, "acc": 0.0}, 0
        for speech, text in iterator:
            loss, stats = model(speech, text)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
            for optimizer in optimizers:
                optimizer.step()
            for scheduler in schedulers:
                if isinstance(scheduler, AbsBatchStepScheduler):
                    scheduler.step()
            for optimizer in optimizers:
                optimizer.zero_grad()
            for k in totals:
                totals[k] += stats[k].item()
            n += 1
        return {k: v / n for k, v in totals.items()}


def toy_speech(n, frames=30, idim=40, odim=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(odim, idim, generator=torch.Generator().manual_seed(7))
    text = torch.randint(0, odim, (n, frames), generator=g)
    speech = protos[text] + 1.5 * torch.randn(n, frames, idim, generator=g)
    return TensorDataset(speech, text)


def main():
    torch.manual_seed(0)
    max_epoch, batch_size = 5, 32
    train_iter = DataLoader(toy_speech(640), batch_size=batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(0))
    model = ESPnetModel()
    optimizers = [torch.optim.Adam(model.parameters(), lr=1e-3)]
    scheduler_conf = {"max_lr": 5e-3, "total_steps": max_epoch * len(train_iter)}
    schedulers = [scheduler_classes["onecyclelr"](optimizers[0], **scheduler_conf)]
    Trainer.run(model, optimizers, schedulers, train_iter, max_epoch)


if __name__ == "__main__":
    main()
