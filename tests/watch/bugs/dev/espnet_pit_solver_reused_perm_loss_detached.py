"""An ESPnet-style two-speaker speech separation model (STFT encoder, a BLSTM mask separator, iSTFT
decoder) whose training criterion is a list of loss wrappers, each a permutation-invariant
(PIT) solver around one criterion with a weight: a time-domain SI-SNR loss that searches the best
speaker permutation itself (independent_perm=True), then a spectral-magnitude L1 loss that reuses
that permutation (independent_perm=False) and is added to the total with its weight. In the branch
that reuses the given permutation, the solver gathers the per-utterance losses into a new tensor
with torch.tensor([...]), which copies the values out of the autograd graph: the L1 term is reported
in the total loss but sends no gradient, so the model is trained by the SI-SNR term alone. A Trainer
class runs train_one_epoch with backward, gradient clipping, step and zero_grad.

Thread: https://github.com/espnet/espnet/pull/5974
"""
from itertools import permutations

import torch
from torch import nn

N_FFT, HOP = 128, 32


class SISNRLoss(nn.Module):
    name = "si_snr_loss"

    def forward(self, ref, inf, eps=1e-8):
        ref = ref - ref.mean(-1, keepdim=True)
        inf = inf - inf.mean(-1, keepdim=True)
        proj = (inf * ref).sum(-1, keepdim=True) * ref / (ref.pow(2).sum(-1, keepdim=True) + eps)
        noise = inf - proj
        return -10 * torch.log10(proj.pow(2).sum(-1) / (noise.pow(2).sum(-1) + eps) + eps)


class MagnitudeL1Loss(nn.Module):
    name = "mag_l1_loss"

    def forward(self, ref, inf):
        return (ref.abs() - inf.abs()).abs().flatten(1).mean(-1)


class PITSolver(nn.Module):
    def __init__(self, criterion, weight=1.0, independent_perm=True):
        super().__init__()
        self.criterion, self.weight, self.independent_perm = criterion, weight, independent_perm

    def forward(self, ref, inf, others=None):
        perm = (others or {}).get("perm")
        n_spk = len(ref)
        if self.independent_perm or perm is None:
            candidates = list(permutations(range(n_spk)))
            per_perm = torch.stack([sum(self.criterion(ref[s], inf[t]) for s, t in enumerate(p)) / n_spk
                                    for p in candidates], dim=1)
            loss, idx = per_perm.min(dim=1)
            perm = torch.tensor(candidates, dtype=torch.long)[idx]
        else:
            loss = torch.tensor([
                torch.tensor([self.criterion(ref[s][b:b + 1], inf[t][b:b + 1]) for s, t in enumerate(p)]).mean()
                for b, p in enumerate(perm.tolist())
            ])
        loss = loss.mean()
        return loss, {self.criterion.name: loss.detach()}, {"perm": perm}


class SeparationModel(nn.Module):
    def __init__(self, loss_wrappers, n_spk=2, hidden=64):
        super().__init__()
        n_bins = N_FFT // 2 + 1
        self.n_spk = n_spk
        self.register_buffer("window", torch.hann_window(N_FFT))
        self.blstm = nn.LSTM(n_bins, hidden, batch_first=True, bidirectional=True)
        self.mask = nn.Linear(2 * hidden, n_bins * n_spk)
        self.loss_wrappers = nn.ModuleList(loss_wrappers)

    def encode(self, wav):
        return torch.stft(wav, N_FFT, HOP, window=self.window, return_complex=True)       # (B, F, T)

    def forward(self, speech_mix, speech_ref):
        spec = self.encode(speech_mix)
        h, _ = self.blstm(spec.abs().transpose(1, 2).log1p())
        masks = torch.sigmoid(self.mask(h)).view(h.shape[0], h.shape[1], self.n_spk, -1)
        spec_pre = [masks[:, :, i].transpose(1, 2) * spec for i in range(self.n_spk)]
        speech_pre = [torch.istft(s, N_FFT, HOP, window=self.window, length=speech_mix.shape[-1]) for s in spec_pre]
        spec_ref = [self.encode(r) for r in speech_ref.unbind(1)]

        loss, stats, others = 0.0, {}, {}
        for wrapper in self.loss_wrappers:
            if isinstance(wrapper.criterion, SISNRLoss):
                cur, cur_stats, others = wrapper(list(speech_ref.unbind(1)), speech_pre, others)
            else:
                cur, cur_stats, others = wrapper(spec_ref, spec_pre, others)
            loss = loss + wrapper.weight * cur
            stats.update(cur_stats)
        stats["loss"] = loss.detach()
        return loss, stats


def two_speaker_batches(n_batches, batch_size=4, length=4000, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(length).float() / 8000.0
    out = []
    for _ in range(n_batches):
        srcs = []
        for _ in range(2):
            f0 = 100 + 200 * torch.rand(batch_size, 1, generator=g)
            env = 0.5 + 0.5 * torch.sin(2 * torch.pi * (1 + 4 * torch.rand(batch_size, 1, generator=g)) * t)
            srcs.append(env * sum(torch.sin(2 * torch.pi * k * f0 * t) / k for k in range(1, 4)))
        ref = torch.stack(srcs, dim=1)
        out.append((ref.sum(1) + 0.01 * torch.randn(batch_size, length, generator=g), ref))
    return out


class Trainer:
    def __init__(self, model, optimizer, grad_clip=5.0):
        self.model, self.optimizer, self.grad_clip = model, optimizer, grad_clip

    def train_one_epoch(self, iterator, epoch):
        self.model.train()
        for i, (speech_mix, speech_ref) in enumerate(iterator):
            loss, stats = self.model(speech_mix, speech_ref)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            self.optimizer.step()
            self.optimizer.zero_grad()
            if i % 10 == 0:
                print(f"epoch {epoch} iter {i}: " + " ".join(f"{k}={v.item():.3f}" for k, v in stats.items()))


def main():
    torch.manual_seed(0)
    loss_wrappers = [PITSolver(SISNRLoss(), weight=1.0, independent_perm=True),
                     PITSolver(MagnitudeL1Loss(), weight=1.0, independent_perm=False)]
    model = SeparationModel(loss_wrappers)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    data = two_speaker_batches(35)
    for epoch in range(2):
        trainer.train_one_epoch(data, epoch)


if __name__ == "__main__":
    main()
