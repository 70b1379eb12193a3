"""
Shape: a continual-learning model (GDumb) stores examples in a buffer during `observe` and, at the
end of the last task, re-creates its backbone and calls a module-level `fit_buffer(self, epochs)`
helper that loops over epochs, slices the buffer into mini-batches (optional CutMix) and trains
with SGD plus a CosineAnnealingWarmRestarts schedule that has a hand-written warm start.
Bug: the SGD optimizer (momentum) and its cosine scheduler are constructed anew at the top of every
epoch inside `fit_buffer`, so momentum is discarded and the schedule never advances past its
first step.
Thread: https://github.com/aimagelab/mammoth/issues/25
"""
from torch.optim import SGD
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts

from models.utils.continual_model import ContinualModel
from utils.augmentations import cutmix_data as cutmix
from utils.buffer import Buffer as ReservoirBuffer
from utils.status import progress_bar as show_progress


def fit_buffer(self, n_epochs):
    for ep in range(n_epochs):
        optimizer = SGD(
            self.net.parameters(),
            lr=self.args.maxlr,
            momentum=self.args.optim_mom,
            weight_decay=self.args.optim_wd,
            nesterov=self.args.optim_nesterov,
        )
        scheduler = CosineAnnealingWarmRestarts(
            optimizer, T_0=1, T_mult=2, eta_min=self.args.minlr
        )

        if ep <= 0:
            for group in optimizer.param_groups:
                group["lr"] = self.args.maxlr * 0.1
        elif ep == 1:
            for group in optimizer.param_groups:
                group["lr"] = self.args.maxlr
        else:
            scheduler.step()

        pool_x, pool_y = self.buffer.get_data(
            len(self.buffer.examples), transform=self.transform
        )

        while len(pool_x):
            xb, yb = pool_x[: self.args.batch_size], pool_y[: self.args.batch_size]
            pool_x, pool_y = pool_x[self.args.batch_size:], pool_y[self.args.batch_size:]

            optimizer.zero_grad()
            alpha = self.args.cutmix_alpha
            if alpha is not None:
                mixed, ya, yb2, lam = cutmix(
                    x=xb.cpu(), y=yb.cpu(), alpha=alpha
                )
                out = self.net(mixed.to(self.device))
                loss = lam * self.loss(out, ya.to(self.device)) + (1 - lam) * self.loss(
                    out, yb2.to(self.device)
                )
            else:
                out = self.net(xb)
                loss = self.loss(out, yb)

            loss.backward()
            optimizer.step()
        show_progress(ep, n_epochs, 1, "G", loss.item())


class GreedyDumb(ContinualModel):
    NAME = "gdumb"
    COMPATIBILITY = ["class-il", "task-il"]

    def __init__(self, backbone, loss, args, transform):
        super().__init__(backbone, loss, args, transform)
        self.buffer = ReservoirBuffer(args.buffer_size, self.device)
        self.task = 0

    def observe(self, inputs, labels, raw_inputs):
        self.buffer.add_data(examples=raw_inputs, labels=labels)
        return 0

    def end_task(self, ds):
        self.task += 1
        if self.task != ds.N_TASKS:
            return
        self.net = ds.get_backbone().to(self.device)
        fit_buffer(self, n_epochs=self.args.fitting_epochs)
