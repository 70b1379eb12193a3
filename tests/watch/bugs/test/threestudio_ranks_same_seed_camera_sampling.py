"""A text-to-3D script in the style of a Lightning launcher: launch.py calls
seed_everything(cfg.seed) in every DDP process, the datamodule's iterable dataset draws random
camera elevations, azimuths and distances in its collate() with torch.rand, and the system's
training_step renders the scene from those cameras and takes a score-distillation loss against a
frozen guidance model that draws its own diffusion timestep and noise. The trainer averages the
gradients over the processes (done here in one process for a simulated two-process job, each with
its own copy of the global RNG state). Every process uses the same seed, so every process samples
the same cameras, timesteps and noise at every step: the ranks render identical views and compute
identical gradients, and two GPUs give the same result as one.

Thread: https://github.com/threestudio-project/threestudio/issues/195
"""
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn


def seed_everything(seed):
    torch.manual_seed(seed)


class SimulatedDDPProcesses:
    def __init__(self, world_size, seed):
        self.world_size = world_size
        self.states = []
        for _ in range(world_size):
            seed_everything(seed)  # launch.py runs this on every rank
            self.states.append(torch.get_rng_state())

    @contextmanager
    def rank(self, r):
        torch.set_rng_state(self.states[r])
        yield
        self.states[r] = torch.get_rng_state()


class RandomCameraIterableDataset(torch.utils.data.IterableDataset):
    def __init__(self, batch_size=4):
        self.batch_size = batch_size

    def __iter__(self):
        while True:
            yield {}

    def collate(self, batch):
        elevation = (torch.rand(self.batch_size) * 2 - 1) * 0.5 + 0.3
        azimuth = (torch.rand(self.batch_size) * 2 - 1) * torch.pi
        distance = 1.5 + torch.rand(self.batch_size) * 0.5
        return {"elevation": elevation, "azimuth": azimuth, "camera_distances": distance}


def camera_features(batch):
    e, a, d = batch["elevation"], batch["azimuth"], batch["camera_distances"]
    return torch.stack([e.sin(), e.cos() * a.sin(), e.cos() * a.cos(), 1 / d], 1)


class FrozenGuidance(nn.Module):
    """Plays the diffusion prior: the view it expects for a camera, plus noise at a timestep."""

    def __init__(self, pixels=48):
        super().__init__()
        g = torch.Generator().manual_seed(3)
        self.prior = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, pixels))
        for p in self.prior.parameters():
            p.data = torch.randn(p.shape, generator=g) * 0.8
            p.requires_grad_(False)

    def forward(self, rgb, cam):
        t = torch.randint(20, 980, (rgb.shape[0], 1)).float() / 1000
        noise = torch.randn_like(rgb)
        noisy_estimate = self.prior(cam) + t.sqrt() * 0.3 * noise
        target = (rgb - (rgb - noisy_estimate) * (1 - t)).detach()
        return {"loss_sds": 0.5 * F.mse_loss(rgb, target, reduction="sum") / rgb.shape[0]}


class DreamFusionSystem(nn.Module):
    def __init__(self, pixels=48):
        super().__init__()
        self.geometry = nn.Sequential(nn.Linear(4, 96), nn.SiLU(), nn.Linear(96, 96), nn.SiLU())
        self.renderer = nn.Linear(96, pixels)
        self.guidance = FrozenGuidance(pixels)

    def training_step(self, batch, batch_idx):
        cam = camera_features(batch)
        rgb = self.renderer(self.geometry(cam))
        out = self.guidance(rgb, cam)
        return {"loss": out["loss_sds"]}


def main():
    procs = SimulatedDDPProcesses(world_size=2, seed=0)
    system = DreamFusionSystem()
    optimizer = torch.optim.Adam([p for p in system.parameters() if p.requires_grad], lr=1e-2)
    datasets = [RandomCameraIterableDataset() for _ in range(procs.world_size)]
    iters = [iter(ds) for ds in datasets]
    for step in range(80):
        trainable = [p for p in system.parameters() if p.requires_grad]
        summed = [torch.zeros_like(p) for p in trainable]
        losses = []
        for r in range(procs.world_size):
            with procs.rank(r):
                batch = datasets[r].collate([next(iters[r])])
                loss = system.training_step(batch, step)["loss"]
            optimizer.zero_grad()
            loss.backward()
            for s, p in zip(summed, trainable):
                s += p.grad / procs.world_size
            losses.append(loss.item())
        for s, p in zip(summed, trainable):
            p.grad = s
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step} train/loss_sds per rank {[round(x, 3) for x in losses]}")


if __name__ == "__main__":
    main()
