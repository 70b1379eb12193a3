"""A speech-enhancement mask network trained with a differentiable intelligibility (STOI-like)
loss module. The loss cuts the estimate and the clean target into short segments, removes each
segment's mean and divides it by its norm, written as sqrt(sum of squares) with the epsilon added
after the square root. Batches are zero-padded to the longest utterance, so some estimated segments
are exactly zero: the forward value stays finite, but the square root's gradient at 0 is infinite
and multiplies a zero, which gives NaN gradients; the optimizer writes them into the weights.
A train(model, loss_func, optimizer, loader, epochs) helper drives it.

Thread: https://github.com/mpariente/pytorch_stoi/issues/7
"""
import torch
from torch import nn

EPS = 1e-8


class NegSTOILoss(nn.Module):
    def __init__(self, seg_len=32):
        super().__init__()
        self.seg_len = seg_len

    def _segments(self, x):
        b, t = x.shape
        n = t // self.seg_len
        return x[:, :n * self.seg_len].reshape(b, n, self.seg_len)

    def _normalize(self, seg):
        seg = seg - seg.mean(dim=-1, keepdim=True)
        return seg / (torch.sqrt(torch.sum(seg ** 2, dim=-1, keepdim=True)) + EPS)

    def forward(self, est_targets, targets):
        est = self._normalize(self._segments(est_targets))
        ref = self._normalize(self._segments(targets))
        correlation = (est * ref).sum(dim=-1)
        return -correlation.mean()


class MaskNet(nn.Module):
    def __init__(self, frame=32, hidden=64):
        super().__init__()
        self.frame = frame
        self.net = nn.Sequential(nn.Linear(frame, hidden), nn.ReLU(), nn.Linear(hidden, frame), nn.Sigmoid())

    def forward(self, noisy):
        b, t = noisy.shape
        frames = noisy.view(b, t // self.frame, self.frame)
        return (self.net(frames) * frames).view(b, t)


def padded_batches(n_batches, batch_size, max_len=1024, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(max_len).float()
    batches = []
    for _ in range(n_batches):
        lengths = torch.randint(max_len // 2, max_len + 1, (batch_size,), generator=g)
        lengths[0] = max_len
        freq = 0.02 + 0.1 * torch.rand(batch_size, 1, generator=g)
        clean = torch.sin(freq * t) * (1 + 0.5 * torch.sin(0.005 * t))
        noisy = clean + 0.5 * torch.randn(batch_size, max_len, generator=g)
        pad = t[None, :] >= lengths[:, None]          # zero padding after each utterance
        batches.append((noisy.masked_fill(pad, 0.0), clean.masked_fill(pad, 0.0)))
    return batches


def train(model, loss_func, optimizer, loader, epochs):
    step = 0
    for epoch in range(epochs):
        for noisy, clean in loader:
            optimizer.zero_grad()
            loss = loss_func(model(noisy), clean)
            loss.backward()
            nan_grads = sum(int(torch.isnan(p.grad).any()) for p in model.parameters())
            optimizer.step()
            if step % 10 == 0:
                print(f"epoch {epoch} step {step} neg-stoi {loss.item():.4f} "
                      f"parameters with NaN grad {nan_grads}/{len(list(model.parameters()))}")
            step += 1


def main():
    torch.manual_seed(0)
    model = MaskNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, NegSTOILoss(), optimizer, padded_batches(30, 8), epochs=2)


if __name__ == "__main__":
    main()
