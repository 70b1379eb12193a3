"""An open-unmix-style music source separation model trained on waveforms through an SI-SDR loss.
The network reads the magnitude spectrogram of the mixture, predicts the magnitude spectrogram of
one source (bass) as a non-negative mask times the mixture magnitude, the estimate is given the
mixture phase and turned back into a waveform with istft, and the loss is the negative SI-SDR
between estimated and true source waveforms. The SI-SDR loss module computes the optimal scaling
alpha = <estimate, target> / ||target||^2 with nothing added to the denominator, so a training
segment in which the bass is silent (an all-zero target, common in multitrack stems) gives 0/0 =
NaN; the NaN loss is backpropagated, Adam writes it into every weight and every later prediction
and loss is NaN. A train(model, sampler, optimizer, criterion) helper runs one epoch.

Thread: https://github.com/csteinmetz1/auraloss/issues/25
"""
import torch
from torch import nn

N_FFT, HOP = 256, 64


class SISDRLoss(nn.Module):
    def __init__(self, zero_mean=True, eps=1e-8, reduction="mean"):
        super().__init__()
        self.zero_mean, self.eps, self.reduction = zero_mean, eps, reduction

    def forward(self, input, target):
        if self.zero_mean:
            input = input - input.mean(dim=-1, keepdim=True)
            target = target - target.mean(dim=-1, keepdim=True)
        alpha = (input * target).sum(-1) / (target ** 2).sum(-1)
        scaled = target * alpha.unsqueeze(-1)
        residual = input - scaled
        ratio = (scaled ** 2).sum(-1) / ((residual ** 2).sum(-1) + self.eps)
        losses = 10 * torch.log10(ratio + self.eps)
        losses = losses.mean() if self.reduction == "mean" else losses.sum()
        return -losses


class Separator(nn.Module):
    def __init__(self, n_bins=N_FFT // 2 + 1, hidden=48):
        super().__init__()
        self.fc_in = nn.Linear(n_bins, hidden)
        self.bn_in = nn.BatchNorm1d(hidden)
        self.lstm = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.fc_out = nn.Linear(2 * hidden, n_bins)
        self.window = torch.hann_window(N_FFT)

    def forward(self, mix):
        spec = torch.stft(mix, N_FFT, HOP, window=self.window, return_complex=True)  # (B, F, T)
        mag, phase = spec.abs(), torch.angle(spec)
        x = self.fc_in(mag.transpose(1, 2))                                        # (B, T, H)
        x = torch.tanh(self.bn_in(x.transpose(1, 2)).transpose(1, 2))
        h, _ = self.lstm(x)
        mask = torch.relu(self.fc_out(torch.cat([x, h], dim=-1)))
        est_mag = mask.transpose(1, 2) * mag
        est_spec = torch.polar(est_mag, phase)
        return torch.istft(est_spec, N_FFT, HOP, window=self.window, length=mix.shape[-1])


class StemSampler:
    """Random excerpts of synthetic multitrack songs: bass + drums + other, bass sometimes silent."""

    def __init__(self, n_batches, batch_size, seg_len=4096, p_silent=0.05, seed=0):
        self.n_batches, self.batch_size, self.seg_len, self.p_silent = n_batches, batch_size, seg_len, p_silent
        self.g = torch.Generator().manual_seed(seed)

    def __iter__(self):
        t = torch.arange(self.seg_len).float() / 8000.0
        for _ in range(self.n_batches):
            b, g = self.batch_size, self.g
            f0 = 40 + 80 * torch.rand(b, 1, generator=g)
            bass = 0.6 * torch.sin(2 * torch.pi * f0 * t) * (1 + 0.3 * torch.sin(2 * torch.pi * 2 * t))
            silent = torch.rand(b, generator=g) < self.p_silent
            bass[silent] = 0.0
            hits = (torch.rand(b, self.seg_len, generator=g) < 0.002).float()
            drums = torch.nn.functional.conv1d(hits[:, None], torch.exp(-torch.arange(200.0) / 30)[None, None].flip(-1),
                                               padding=199)[:, 0, : self.seg_len] * torch.randn(b, 1, generator=g)
            f1 = 300 + 900 * torch.rand(b, 1, generator=g)
            other = 0.3 * torch.sin(2 * torch.pi * f1 * t) + 0.05 * torch.randn(b, self.seg_len, generator=g)
            yield bass + drums + other, bass


def train(model, sampler, optimizer, criterion):
    model.train()
    total, n = 0.0, 0
    for mix, target in sampler:
        optimizer.zero_grad()
        estimate = model(mix)
        loss = criterion(estimate, target)
        loss.backward()
        optimizer.step()
        total += loss.item()
        n += 1
    return total / n


def main():
    torch.manual_seed(0)
    model = Separator()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = SISDRLoss()
    sampler = StemSampler(n_batches=25, batch_size=8)
    for epoch in range(3):
        loss = train(model, sampler, optimizer, criterion)
        print(f"epoch {epoch}: train neg SI-SDR {loss:.3f} dB")


if __name__ == "__main__":
    main()
