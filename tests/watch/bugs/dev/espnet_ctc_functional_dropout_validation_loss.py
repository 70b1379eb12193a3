"""An ESPnet1-style end-to-end CTC speech recogniser and its trainer: an E2E module with
forward(xs_pad, ilens, ys_pad) runs a BLSTM-with-projection encoder over padded feature frames and
returns the loss of a CTC module (mtlalpha = 1.0, pure CTC), reporting loss and the greedy CTC
character error rate (computed from ctc.argmax(hs_pad)); a chainer-like CustomUpdater does one
Adam step per minibatch with gradient-norm clipping, a CustomEvaluator puts the model in
eval() under torch.no_grad(), averages the reported validation observations and puts it back in
train(); the trainer keeps the snapshot with the best validation loss and, when the validation loss
does not improve, restores that snapshot and decays the learning rate (the adam lr-decay
criterion on validation/main/loss). The bug: CTC.forward computes the logits as
self.ctc_lo(F.dropout(hs_pad, p=self.dropout_rate)), a functional dropout without
training=self.training, so model.eval() cannot switch it off: the validation CTC loss is measured
on randomly dropped encoder states, it is higher than the trained model deserves and jitters from
one evaluation to the next (the same snapshot evaluated twice on the same dev set gives two
losses), and the best-snapshot choice and the lr decay are driven by that noise. The greedy CER
goes through ctc.argmax, which has no dropout, so it stays deterministic.

Thread: https://github.com/espnet/espnet/pull/3539
"""
import copy

import torch
import torch.nn.functional as F

ODIM, IDIM = 9, 12  # 8 symbols + blank (0)


class RNNP(torch.nn.Module):
    def __init__(self, idim, elayers, cdim, hdim):
        super().__init__()
        self.rnns = torch.nn.ModuleList()
        self.projs = torch.nn.ModuleList()
        for i in range(elayers):
            self.rnns.append(torch.nn.LSTM(idim if i == 0 else hdim, cdim, batch_first=True, bidirectional=True))
            self.projs.append(torch.nn.Linear(2 * cdim, hdim))

    def forward(self, xs_pad, ilens):
        for rnn, proj in zip(self.rnns, self.projs):
            packed = torch.nn.utils.rnn.pack_padded_sequence(xs_pad, ilens, batch_first=True, enforce_sorted=False)
            ys, _ = rnn(packed)
            ys_pad, ilens = torch.nn.utils.rnn.pad_packed_sequence(ys, batch_first=True)
            xs_pad = torch.tanh(proj(ys_pad))
        return xs_pad, ilens


class CTC(torch.nn.Module):
    def __init__(self, odim, eprojs, dropout_rate):
        super().__init__()
        self.dropout_rate = dropout_rate
        self.ctc_lo = torch.nn.Linear(eprojs, odim)
        self.ctc_loss = torch.nn.CTCLoss(reduction="sum", zero_infinity=True)
        self.ignore_id = -1

    def forward(self, hs_pad, hlens, ys_pad):
        ys = [y[y != self.ignore_id] for y in ys_pad]
        ys_hat = self.ctc_lo(F.dropout(hs_pad, p=self.dropout_rate)).transpose(0, 1)
        olens = torch.LongTensor([len(s) for s in ys])
        loss = self.ctc_loss(ys_hat.log_softmax(2), torch.cat(ys), hlens.long(), olens)
        return loss / ys_hat.size(1)  # batch-size average

    def argmax(self, hs_pad):
        return torch.argmax(self.ctc_lo(hs_pad), dim=2)


class E2E(torch.nn.Module):
    def __init__(self, idim, odim, args):
        super().__init__()
        self.mtlalpha = args.mtlalpha
        self.enc = RNNP(idim, args.elayers, args.eunits, args.eprojs)
        self.ctc = CTC(odim, args.eprojs, args.dropout_rate)
        self.reported = {}

    def forward(self, xs_pad, ilens, ys_pad):
        hs_pad, hlens = self.enc(xs_pad, ilens)
        loss_ctc = self.ctc(hs_pad, hlens, ys_pad)
        loss = loss_ctc  # mtlalpha == 1.0: no attention decoder
        self.reported = {"loss": loss.item(), "loss_ctc": loss_ctc.item(), "cer_ctc": self.error_rate(hs_pad, hlens, ys_pad)}
        return loss

    def error_rate(self, hs_pad, hlens, ys_pad):
        errs, total = 0, 0
        for pred, n, ref in zip(self.ctc.argmax(hs_pad).tolist(), hlens.tolist(), ys_pad.tolist()):
            hyp, prev = [], 0
            for p in pred[:n]:
                if p != prev and p != 0:
                    hyp.append(p)
                prev = p
            ref = [r for r in ref if r != -1]
            errs += edit_distance(hyp, ref)
            total += len(ref)
        return errs / total


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, d[0] = d[0], i
        for j, y in enumerate(b, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (x != y))
    return d[-1]


class CustomUpdater:
    def __init__(self, model, grad_clip, train_iter, optimizer):
        self.model, self.grad_clip, self.train_iter, self.optimizer = model, grad_clip, train_iter, optimizer

    def update_epoch(self, gen):
        self.model.train()
        for xs_pad, ilens, ys_pad in self.train_iter(gen):
            loss = self.model(xs_pad, ilens, ys_pad)
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            self.optimizer.step()
        return self.model.reported


class CustomEvaluator:
    def __init__(self, model, val_iter):
        self.model, self.val_iter = model, val_iter

    def evaluate(self):
        self.model.eval()
        sums, n = {}, 0
        with torch.no_grad():
            for xs_pad, ilens, ys_pad in self.val_iter():
                self.model(xs_pad, ilens, ys_pad)
                for k, v in self.model.reported.items():
                    sums[k] = sums.get(k, 0.0) + v * len(ilens)
                n += len(ilens)
        self.model.train()
        return {f"validation/main/{k}": v / n for k, v in sums.items()}


def make_utts(n, gen):
    """Each symbol is spoken as 2-4 frames around its own mean vector, with silence in between."""
    means = torch.randn(ODIM, IDIM, generator=torch.Generator().manual_seed(3)) * 1.2
    utts = []
    for _ in range(n):
        ys = torch.randint(1, ODIM, (int(torch.randint(3, 7, (1,), generator=gen)),), generator=gen)
        frames = []
        for y in ys.tolist():
            frames += [means[0]] * int(torch.randint(0, 2, (1,), generator=gen))
            frames += [means[y]] * int(torch.randint(2, 5, (1,), generator=gen))
        xs = torch.stack(frames) + 0.6 * torch.randn(len(frames), IDIM, generator=gen)
        utts.append((xs, ys))
    return utts


def make_iter(utts, batch_size, shuffle):
    def it(gen=None):
        order = torch.randperm(len(utts), generator=gen).tolist() if shuffle else range(len(utts))
        order = list(order)
        for s in range(0, len(order), batch_size):
            batch = [utts[i] for i in order[s:s + batch_size]]
            ilens = torch.tensor([len(x) for x, _ in batch])
            xs_pad = torch.nn.utils.rnn.pad_sequence([x for x, _ in batch], batch_first=True)
            ys_pad = torch.nn.utils.rnn.pad_sequence([y for _, y in batch], batch_first=True, padding_value=-1)
            yield xs_pad, ilens, ys_pad
    return it


class Args:
    elayers, eunits, eprojs, dropout_rate, mtlalpha = 2, 32, 32, 0.3, 1.0
    grad_clip, epochs, batch_size, lr, lr_decay = 5.0, 10, 16, 5e-3, 0.5


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    args = Args()
    train_utts, dev_utts = make_utts(320, gen), make_utts(80, gen)
    model = E2E(IDIM, ODIM, args)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    updater = CustomUpdater(model, args.grad_clip, make_iter(train_utts, args.batch_size, True), optimizer)
    evaluator = CustomEvaluator(model, make_iter(dev_utts, args.batch_size, False))

    best_loss, best_snapshot = float("inf"), None
    for epoch in range(1, args.epochs + 1):
        main_obs = updater.update_epoch(gen)
        obs = evaluator.evaluate()
        print(f"epoch {epoch} main/loss {main_obs['loss']:.4f} validation/main/loss "
              f"{obs['validation/main/loss']:.4f} validation/main/cer_ctc {obs['validation/main/cer_ctc']:.4f}")
        if obs["validation/main/loss"] < best_loss:
            best_loss, best_snapshot = obs["validation/main/loss"], copy.deepcopy(model.state_dict())
        else:  # adam lr decay: restore the best snapshot and decay the learning rate
            model.load_state_dict(best_snapshot)
            for group in optimizer.param_groups:
                group["lr"] *= args.lr_decay
            print(f"  restored snapshot.loss.best, lr decayed to {optimizer.param_groups[0]['lr']:.1e}")

    model.load_state_dict(best_snapshot)
    for run in range(2):
        obs = evaluator.evaluate()
        print(f"model.loss.best re-evaluated ({run}): validation/main/loss {obs['validation/main/loss']:.4f} "
              f"(recorded {best_loss:.4f}) cer_ctc {obs['validation/main/cer_ctc']:.4f}")


if __name__ == "__main__":
    main()
