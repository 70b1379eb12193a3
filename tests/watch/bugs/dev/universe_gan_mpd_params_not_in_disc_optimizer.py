"""A GAN-trained speech-enhancement model in the UNIVERSE++ layout: a LightningModule-style class
with manual optimisation holds a condition network (noisy waveform -> enhanced estimate), a small
score network trained with a denoising score loss on the clean target, and two discriminators used
as losses, a multi-period discriminator (MPD, waveform folded by several periods, 2-D convs) and a
multi-resolution discriminator (MRD, convs over STFT magnitudes). training_step() first updates the
discriminators (opt_disc.zero_grad, LSGAN discriminator loss of both on the detached estimate,
backward, grad clipping of each, opt_disc.step), then the generator side (score loss + mel L1 +
adversarial and feature-matching losses from both discriminators, opt_score.step).
configure_optimizers() builds the discriminator parameter list as
`list(self.loss_mrd.parameters()) + list(self.loss_mrd.parameters())` - the MRD twice and the MPD
never - so the MPD's weights are never updated. Its loss sits at the value of a random
discriminator for the whole run and the generator receives adversarial and feature-matching
gradients from an untrained critic; nothing fails.

Thread: https://github.com/line/open-universe/issues/5
"""
import itertools
import math

import torch
from torch import nn
import torch.nn.functional as F


# ----------------------------------------------------------------------------- data
def make_batch(g, bs=6, length=1024, sr=8000):
    t = torch.arange(length) / sr
    f0 = 100 + 150 * torch.rand(bs, 1, generator=g)
    clean = torch.zeros(bs, length)
    for k in range(1, 6):
        amp = torch.rand(bs, 1, generator=g) / k
        clean += amp * torch.sin(2 * math.pi * k * f0 * t + 6.28 * torch.rand(bs, 1, generator=g))
    env = 0.5 + 0.5 * torch.sin(2 * math.pi * 3 * t + 6.28 * torch.rand(bs, 1, generator=g))
    clean = 0.3 * clean * env
    noise = 0.15 * torch.randn(bs, length, generator=g)
    return (clean + noise).unsqueeze(1), clean.unsqueeze(1)


def mel_spec(x, n_fft=256, hop=64):
    spec = torch.stft(x.squeeze(1), n_fft, hop, window=torch.hann_window(n_fft), return_complex=True).abs()
    return torch.log(spec + 1e-5)


# ----------------------------------------------------------------------------- discriminators
class PeriodDisc(nn.Module):
    def __init__(self, period):
        super().__init__()
        self.period = period
        self.convs = nn.ModuleList([nn.Conv2d(1, 16, (5, 1), (3, 1), (2, 0)),
                                    nn.Conv2d(16, 32, (5, 1), (3, 1), (2, 0))])
        self.post = nn.Conv2d(32, 1, (3, 1), 1, (1, 0))

    def forward(self, x):
        b, c, t = x.shape
        if t % self.period != 0:
            n_pad = self.period - (t % self.period)
            x = F.pad(x, (0, n_pad), "reflect")
            t = t + n_pad
        x = x.view(b, c, t // self.period, self.period)
        fmap = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            fmap.append(x)
        x = self.post(x)
        fmap.append(x)
        return x.flatten(1), fmap


class ResolutionDisc(nn.Module):
    def __init__(self, n_fft):
        super().__init__()
        self.n_fft = n_fft
        self.convs = nn.ModuleList([nn.Conv2d(1, 16, 3, 1, 1), nn.Conv2d(16, 32, 3, (2, 2), 1)])
        self.post = nn.Conv2d(32, 1, 3, 1, 1)

    def forward(self, x):
        spec = torch.stft(x.squeeze(1), self.n_fft, self.n_fft // 4, window=torch.hann_window(self.n_fft),
                          return_complex=True).abs().unsqueeze(1)
        x, fmap = spec, []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            fmap.append(x)
        x = self.post(x)
        fmap.append(x)
        return x.flatten(1), fmap


class MultiDisc(nn.Module):
    def __init__(self, discs):
        super().__init__()
        self.discs = nn.ModuleList(discs)

    def forward(self, y, y_hat):
        rs, gs, frs, fgs = [], [], [], []
        for d in self.discs:
            r, fr = d(y)
            g_, fg = d(y_hat)
            rs.append(r); gs.append(g_); frs.append(fr); fgs.append(fg)
        return rs, gs, frs, fgs


def discriminator_loss(real, fake):
    losses_r = [torch.mean((1 - dr) ** 2) for dr in real]
    losses_g = [torch.mean(dg ** 2) for dg in fake]
    return sum(losses_r) + sum(losses_g), losses_r, losses_g


def generator_loss(fake):
    losses = [torch.mean((1 - dg) ** 2) for dg in fake]
    return sum(losses), losses


def feature_loss(fmap_r, fmap_g):
    return 2 * sum(torch.mean(torch.abs(r.detach() - g)) for dr, dg in zip(fmap_r, fmap_g) for r, g in zip(dr, dg))


# ----------------------------------------------------------------------------- generator side
class ConditionModel(nn.Module):
    def __init__(self, ch=32):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, ch, 15, padding=7), nn.PReLU(),
                                 nn.Conv1d(ch, ch, 15, padding=7), nn.PReLU(),
                                 nn.Conv1d(ch, 1, 15, padding=7))

    def forward(self, mix):
        y_est = mix - self.net(mix)
        return [y_est], y_est


class ScoreModel(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(3, ch, 9, padding=4), nn.PReLU(), nn.Conv1d(ch, 1, 9, padding=4))

    def forward(self, x_t, sigma, cond):
        s = sigma[:, None, None].expand_as(x_t)
        return self.net(torch.cat([x_t, cond[0], s], dim=1)) / sigma[:, None, None]


class UniverseGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.condition_model = ConditionModel()
        self.score_model = ScoreModel()
        self.loss_mpd = MultiDisc([PeriodDisc(p) for p in (2, 3, 5, 7)])
        self.loss_mrd = MultiDisc([ResolutionDisc(n) for n in (128, 256)])
        self.grad_clip_vals = dict(mpd=1000.0, mrd=1000.0, score=1000.0, cond=1000.0)
        self.mel_weight = 5.0
        self.automatic_optimization = False

    def model_parameters(self):
        return itertools.chain(self.score_model.parameters(), self.condition_model.parameters())

    def configure_optimizers(self):
        opt_score = torch.optim.AdamW(self.model_parameters(), lr=2e-4, betas=(0.8, 0.99))
        params_disc = list(self.loss_mrd.parameters()) + list(
            self.loss_mrd.parameters()
        )
        opt_disc = torch.optim.AdamW(params_disc, lr=2e-4, betas=(0.8, 0.99))
        self._optimizers = (opt_score, opt_disc)

    def optimizers(self):
        return self._optimizers

    def training_step(self, batch, batch_idx):
        opt_score, opt_disc = self.optimizers()
        mix, target = batch
        sigma = torch.exp(torch.empty(mix.shape[0]).uniform_(math.log(0.01), math.log(0.5)))
        z = torch.randn_like(target)
        x_t = target + sigma[:, None, None] * z
        cond, y_est = self.condition_model(mix)
        score = self.score_model(x_t, sigma, [c.detach() for c in cond])

        # Discriminator optimization
        opt_disc.zero_grad()
        y_df_hat_r, y_df_hat_g, _, _ = self.loss_mpd(target, y_est.detach())
        loss_disc_f, _, _ = discriminator_loss(y_df_hat_r, y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, _, _ = self.loss_mrd(target, y_est.detach())
        loss_disc_s, _, _ = discriminator_loss(y_ds_hat_r, y_ds_hat_g)
        loss_disc = loss_disc_s + loss_disc_f
        loss_disc.backward()
        nn.utils.clip_grad_norm_(self.loss_mpd.parameters(), self.grad_clip_vals["mpd"])
        nn.utils.clip_grad_norm_(self.loss_mrd.parameters(), self.grad_clip_vals["mrd"])
        opt_disc.step()

        # Generator optimization
        opt_score.zero_grad()
        l_score = torch.mean((sigma[:, None, None] * score + z) ** 2)
        loss_mel = F.l1_loss(mel_spec(y_est), mel_spec(target))
        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = self.loss_mpd(target, y_est)
        loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
        loss_gen_f, _ = generator_loss(y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = self.loss_mrd(target, y_est)
        loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_s, _ = generator_loss(y_ds_hat_g)
        loss_gen = l_score + self.mel_weight * loss_mel + loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f
        loss_gen.backward()
        nn.utils.clip_grad_norm_(self.score_model.parameters(), self.grad_clip_vals["score"])
        nn.utils.clip_grad_norm_(self.condition_model.parameters(), self.grad_clip_vals["cond"])
        opt_score.step()
        return dict(loss_disc=loss_disc.item(), loss_mpd=loss_disc_f.item(), loss_mrd=loss_disc_s.item(),
                    loss_gen=loss_gen.item(), score=l_score.item(), mel=loss_mel.item())


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    module = UniverseGAN()
    module.configure_optimizers()
    val_mix, val_clean = make_batch(torch.Generator().manual_seed(123), bs=16)
    for step in range(150):
        logs = module.training_step(make_batch(g), step)
        if step % 25 == 0 or step == 149:
            with torch.no_grad():
                _, est = module.condition_model(val_mix)
                snr = 10 * torch.log10(val_clean.pow(2).sum() / (est - val_clean).pow(2).sum())
            print(f"step {step:3d} loss_mpd {logs['loss_mpd']:.3f} loss_mrd {logs['loss_mrd']:.3f} "
                  f"loss_gen {logs['loss_gen']:.3f} mel {logs['mel']:.3f} val_snr {snr:.2f} dB")


if __name__ == "__main__":
    main()
