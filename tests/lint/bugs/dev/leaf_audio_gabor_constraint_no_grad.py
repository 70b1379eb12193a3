"""
Shape: a learnable audio front-end package: a constraint module whose forward clamps the (center, width) Gabor
parameters, a Gabor Conv1D module that holds those parameters as an nn.Parameter, passes them through the
constraint, builds complex impulse responses with a helper function and convolves the waveform with them; a
front-end nn.Module that chains the Gabor conv, a squared-modulus activation, a pooling module and a compression
module; and the reporter's toy script that builds the front-end on the GPU, Adam with amsgrad, and fits the output
to a constant target with an L2-norm loss, printing the Gabor kernel before and after.
Bug: the constraint module runs its clamp and stack inside torch.no_grad(), so the constrained kernel used to build
the filters has no grad_fn; the loss still backpropagates into the later layers but the Gabor conv parameters never
receive a gradient and stay at their initialisation.
Thread: https://github.com/denfed/leaf-audio-pytorch/issues/3
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from leaf_audio_pytorch import initializers, pooling, postprocessing


def gabor_responses(params, t):
    width = params[:, 1]
    centre = params[:, 0].type(torch.complex64)
    norm = (1.0 / (np.sqrt(2.0 * math.pi) * width)).type(torch.complex64).unsqueeze(1)
    envelope = torch.exp(torch.tensordot(1.0 / (2.0 * width ** 2), -t ** 2, dims=0)).type(torch.complex64)
    carrier = torch.exp(1j * torch.tensordot(centre, t.type(torch.complex64), dims=0))
    return norm * carrier * envelope


class ClampGabor(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, params):
        with torch.no_grad():
            lo_sigma = 4 * math.sqrt(2 * math.log(2)) / math.pi
            hi_sigma = self.kernel_size * math.sqrt(2 * math.log(2)) / math.pi
            mu = torch.clamp(params[:, 0], 0.0, math.pi)
            sigma = torch.clamp(params[:, 1], lo_sigma, hi_sigma)
            return torch.stack([mu, sigma], dim=1)


class GaborFilterConv(nn.Module):
    def __init__(self, n_out, kernel_size, padding, init_fn):
        super().__init__()
        self.n_complex = n_out // 2
        self.kernel_size = kernel_size
        self.padding = padding
        start = init_fn(torch.zeros(self.n_complex, 2), sample_rate=16000, min_freq=60.0, max_freq=7800.0)
        self.gabor_params = nn.Parameter(start)
        self.constraint = ClampGabor(kernel_size)
        self.register_buffer("taps", torch.arange(-(kernel_size // 2), (kernel_size + 1) // 2, dtype=torch.float32))

    def forward(self, wav):
        params = self.constraint(self.gabor_params)
        resp = gabor_responses(params, self.taps)
        bank = torch.stack([torch.real(resp), torch.imag(resp)], dim=1)
        bank = bank.view(2 * self.n_complex, self.kernel_size).unsqueeze(1)
        return F.conv1d(wav, bank, stride=1, padding=self.padding)


class SquaredModulus(nn.Module):
    def forward(self, x):
        x = x.transpose(1, 2)
        return 2 * F.avg_pool1d(x ** 2, kernel_size=2, stride=2).transpose(1, 2)


class LearnableFrontend(nn.Module):
    def __init__(self, n_filters=40, sample_rate=16000, win_ms=25.0, hop_ms=10.0):
        super().__init__()
        win = int(sample_rate * win_ms // 1000 + 1)
        hop = int(sample_rate * hop_ms // 1000)
        self.filters = GaborFilterConv(2 * n_filters, win, win // 2, initializers.GaborInit)
        self.modulus = SquaredModulus()
        self.pool = pooling.GaussianLowpass(kernel_size=win, strides=hop, filter_size=n_filters, padding=win // 2,
                                            use_bias=False, kernel_initializer=initializers.ConstantInit,
                                            trainable=True)
        self.compress = postprocessing.PCENLayer(alpha=0.96, smooth_coef=0.04, delta=2.0, floor=1e-12,
                                                 trainable=True, learn_smooth_coef=True,
                                                 per_channel_smooth_coef=True)
        self.compress.build(num_channels=n_filters)

    def forward(self, wav):
        h = wav.unsqueeze(1) if wav.dim() < 2 else wav
        h = self.pool(self.modulus(self.filters(h)))
        h = torch.maximum(h, torch.full_like(h, 1e-5))
        return self.compress(h)


if __name__ == "__main__":
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    frontend = LearnableFrontend().to(dev)
    wave = torch.rand(1, 1, 97339, device=dev)
    frontend.train()
    print(frontend.filters.gabor_params.data)
    opt = torch.optim.Adam(frontend.parameters(), lr=0.002, betas=(0.9, 0.999), eps=1e-8,
                           weight_decay=1e-6, amsgrad=True)
    for _ in range(100):
        out = frontend(wave)
        goal = torch.ones_like(out)
        loss = torch.norm((out - goal).view(1, -1), p=2, dim=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(frontend.filters.gabor_params.data)
