"""A video-diffusion fine-tuning script in the style of an accelerate-launched trainer: every
process calls set_seed(args.seed) with the same value, the dataset's __getitem__ ignores the index
and picks a clip with random.choice(self.folders), and the loop adds noise to the clip latents,
denoises them conditioned on the first frame, backpropagates the MSE to the clean latents and steps
AdamW on gradients averaged over the processes (done here in one process for a simulated
two-process job, each with its own copy of the global RNG state). Because every process seeds the
same generator, every process draws the same clips and the same noise at every step: the two ranks
compute identical gradients, so the second GPU adds no data and the run learns like one GPU.

Thread: https://github.com/pixeli99/SVD_Xtend/issues/75
"""
import random
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class SimulatedProcesses:
    """Stands in for the launcher: keeps one global-RNG state per process of a two-process job."""

    def __init__(self, num_processes, seed):
        self.num_processes = num_processes
        self.states = []
        for _ in range(num_processes):
            set_seed(seed)  # what each process runs at start-up
            self.states.append((random.getstate(), torch.get_rng_state()))

    @contextmanager
    def process(self, i):
        random.setstate(self.states[i][0])
        torch.set_rng_state(self.states[i][1])
        yield
        self.states[i] = (random.getstate(), torch.get_rng_state())


class ClipFolders(torch.utils.data.Dataset):
    def __init__(self, n_folders=96, frames=4, dim=16):
        g = torch.Generator().manual_seed(7)
        first = torch.randn(n_folders, 1, dim, generator=g)
        drift = torch.randn(n_folders, 1, dim, generator=g) * 0.3
        steps = torch.arange(frames).view(1, frames, 1)
        self.folders = list(first + drift * steps)

    def __len__(self):
        return 100000

    def __getitem__(self, idx):
        chosen = random.choice(self.folders)
        return {"latents": chosen}


class Denoiser(nn.Module):
    def __init__(self, frames=4, dim=16, hidden=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(frames * dim + dim + 1, hidden), nn.SiLU(),
                                 nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, frames * dim))

    def forward(self, noisy, cond, sigma):
        b = noisy.shape[0]
        h = torch.cat([noisy.flatten(1), cond.flatten(1), sigma.log().view(b, 1)], 1)
        return self.net(h).view_as(noisy)


def main():
    procs = SimulatedProcesses(num_processes=2, seed=42)
    dataset = ClipFolders()
    unet = Denoiser()
    optimizer = torch.optim.AdamW(unet.parameters(), lr=3e-3)
    batch_size, global_step = 4, 0
    for global_step in range(90):
        losses = []
        grads = [torch.zeros_like(p) for p in unet.parameters()]
        for rank in range(procs.num_processes):
            with procs.process(rank):
                idx = range(global_step * batch_size, (global_step + 1) * batch_size)
                latents = torch.stack([dataset[i]["latents"] for i in idx])
                sigma = torch.exp(torch.randn(batch_size) * 1.2 - 0.7)
                noise = torch.randn_like(latents)
            noisy = latents + noise * sigma.view(-1, 1, 1)
            c_in = 1 / (sigma ** 2 + 1).sqrt()
            denoised = unet(noisy * c_in.view(-1, 1, 1), latents[:, :1], sigma)
            loss = F.mse_loss(denoised, latents)
            unet.zero_grad()
            loss.backward()
            for acc, p in zip(grads, unet.parameters()):
                acc += p.grad / procs.num_processes
            losses.append(loss.item())
        for acc, p in zip(grads, unet.parameters()):
            p.grad = acc  # the all-reduced gradient every process steps with
        optimizer.step()
        optimizer.zero_grad()
        if global_step % 15 == 0:
            print(f"step {global_step} loss per process {[round(x, 4) for x in losses]}")


if __name__ == "__main__":
    main()
