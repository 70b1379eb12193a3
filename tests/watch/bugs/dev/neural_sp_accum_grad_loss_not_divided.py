"""An ASR toolkit's train script: main() builds a Speech2Text model (a BLSTM encoder with a CTC
head, called as model(batch, task) and returning the loss and an observation dict), wraps Adam in
an LRScheduler class, and runs a while-True loop over train_set.next(). With accum_grad_n_steps
set, it calls loss.backward() on every mini-batch and clips, steps and zeroes only every
accum_grad_n_steps mini-batches, but the loss is never divided by accum_grad_n_steps, so each
update uses the sum of the mini-batch gradients instead of their mean (four times too large with
accum_grad_n_steps=4), which the gradient clipping then sees too.

Thread: https://github.com/hirofumi0810/neural_sp/pull/169
"""
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


class Dataset:
    """Mini-batch iterator in the toolkit's style: next() returns (batch, is_new_epoch)."""

    def __init__(self, n_utts, batch_size, n_frames=40, input_dim=20, vocab=8, ylen=6, seed=0):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(vocab, input_dim, generator=torch.Generator().manual_seed(99))
        self.ys = torch.randint(1, vocab, (n_utts, ylen), generator=g)  # 0 is the blank
        seg = n_frames // ylen
        xs = 0.8 * torch.randn(n_utts, n_frames, input_dim, generator=g)
        for k in range(ylen):
            xs[:, k * seg:(k + 1) * seg] += protos[self.ys[:, k]].unsqueeze(1)
        self.xs = xs
        self.batch_size, self.n_frames, self.ylen = batch_size, n_frames, ylen
        self.g, self.offset, self.epoch = g, 0, 0
        self.perm = torch.randperm(n_utts, generator=g)

    def __len__(self):
        return len(self.xs)

    def next(self):
        idx = self.perm[self.offset:self.offset + self.batch_size]
        self.offset += self.batch_size
        is_new_epoch = self.offset >= len(self.xs)
        if is_new_epoch:
            self.offset, self.epoch = 0, self.epoch + 1
            self.perm = torch.randperm(len(self.xs), generator=self.g)
        batch = {"xs": self.xs[idx], "ys": self.ys[idx],
                 "xlens": torch.full((len(idx),), self.n_frames), "ylens": torch.full((len(idx),), self.ylen)}
        return batch, is_new_epoch


class Speech2Text(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.enc = nn.LSTM(args.input_dim, args.enc_n_units, batch_first=True, bidirectional=True)
        self.ctc_output = nn.Linear(2 * args.enc_n_units, args.vocab)

    def forward(self, batch, task, is_eval=False):
        enc_out, _ = self.enc(batch["xs"])
        logp = self.ctc_output(enc_out).log_softmax(-1).transpose(0, 1)  # (T, B, V)
        loss = F.ctc_loss(logp, batch["ys"], batch["xlens"], batch["ylens"], blank=0, zero_infinity=True)
        return loss, {"loss.ctc": loss.item()}


class LRScheduler:
    """Thin optimizer wrapper that owns the learning rate and the step counter."""

    def __init__(self, optimizer, base_lr):
        self.optimizer, self.lr, self.n_steps, self.n_epochs = optimizer, base_lr, 0, 0

    def step(self):
        self.n_steps += 1
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()


def main():
    torch.manual_seed(1)
    args = SimpleNamespace(input_dim=20, enc_n_units=32, vocab=8, lr=1e-3, batch_size=8, n_epochs=4,
                           accum_grad_n_steps=4, clip_grad_norm=5.0, print_step=20)
    train_set = Dataset(n_utts=640, batch_size=args.batch_size, seed=0)
    model = Speech2Text(args)
    optimizer = LRScheduler(torch.optim.Adam(model.parameters(), lr=args.lr), args.lr)
    tasks = ["all"]

    accum_n_steps = 0
    n_steps = optimizer.n_steps * args.accum_grad_n_steps
    while True:
        batch_train, is_new_epoch = train_set.next()
        accum_n_steps += 1
        for task in tasks:
            loss, observation = model(batch_train, task)
            loss.backward()
            loss.detach()
            if args.accum_grad_n_steps == 1 or accum_n_steps >= args.accum_grad_n_steps:
                if args.clip_grad_norm > 0:
                    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
                accum_n_steps = 0
            loss_train = loss.item()
        n_steps += 1
        if n_steps % args.print_step == 0:
            print(f"step:{n_steps}(ep:{optimizer.n_epochs}) loss:{loss_train:.3f} "
                  f"total_norm:{float(total_norm):.2f} updates:{optimizer.n_steps}")
        if is_new_epoch:
            optimizer.n_epochs += 1
            if optimizer.n_epochs == args.n_epochs:
                break


if __name__ == "__main__":
    main()
