"""A fastMRI-style reconstruction training script: the data module builds the training DataLoader
with a DistributedSampler, num_workers > 0 and a worker_init_fn that seeds the undersampling mask
function's own RandomState from worker_info.seed; the transform undersamples the k-space with a
random column mask, and a small U-Net-like model maps the zero-filled image to the fully sampled
one under an L1 loss with RMSprop. Every DDP process calls seed_everything with the same seed, so
the loaders of all ranks draw the same base seed and worker k of every rank seeds its mask function
identically: the ranks train on the same sequence of masks (the processes, and the gradient average
across them, are simulated here in one process with one copy of the global RNG state per rank).

Thread: https://github.com/facebookresearch/fastMRI/pull/123
"""
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class RandomMaskFunc:
    def __init__(self, center_fraction=0.08, acceleration=4):
        self.center_fraction, self.acceleration = center_fraction, acceleration
        self.rng = np.random.RandomState()

    def __call__(self, num_cols):
        num_low = int(round(num_cols * self.center_fraction))
        prob = (num_cols / self.acceleration - num_low) / (num_cols - num_low)
        mask = self.rng.uniform(size=num_cols) < prob
        pad = (num_cols - num_low + 1) // 2
        mask[pad:pad + num_low] = True
        return torch.from_numpy(mask.astype(np.float32))


class UnetDataTransform:
    def __init__(self, mask_func):
        self.mask_func = mask_func

    def __call__(self, image):
        kspace = torch.fft.fftshift(torch.fft.fft2(image))  # centred k-space
        masked = kspace * self.mask_func(image.shape[-1]).view(1, -1)
        zero_filled = torch.fft.ifft2(torch.fft.ifftshift(masked)).abs()
        mean, std = zero_filled.mean(), zero_filled.std() + 1e-6
        return ((zero_filled - mean) / std)[None], ((image - mean) / std)[None]


class SliceDataset(Dataset):
    def __init__(self, n, transform, size=32):
        g = torch.Generator().manual_seed(11)
        base = F.avg_pool2d(torch.randn(n, 1, size, size, generator=g), 5, 1, 2)[:, 0]
        self.images, self.transform = base / base.std() + 2.0, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i])


def worker_init_fn(worker_id):
    worker_info = torch.utils.data.get_worker_info()
    data = worker_info.dataset
    seed = worker_info.seed % (2 ** 32 - 1)
    if data.transform.mask_func is not None:
        data.transform.mask_func.rng.seed(seed)


class SimulatedRanks:
    def __init__(self, world_size, seed):
        self.world_size = world_size
        torch.manual_seed(seed)  # seed_everything on every rank
        self.states = [torch.get_rng_state() for _ in range(world_size)]

    @contextmanager
    def rank(self, r):
        torch.set_rng_state(self.states[r])
        yield
        self.states[r] = torch.get_rng_state()


def main():
    world_size = 2
    ranks = SimulatedRanks(world_size, seed=42)
    with ranks.rank(0):
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                              nn.ReLU(), nn.Conv2d(16, 1, 3, padding=1))
    ranks.states = [ranks.states[0]] * world_size  # DDP starts every rank from the same weights and RNG
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3, weight_decay=0.0)
    loaders = []
    for r in range(world_size):
        ds = SliceDataset(64, UnetDataTransform(RandomMaskFunc()))
        sampler = DistributedSampler(ds, num_replicas=world_size, rank=r, shuffle=True, seed=0)
        loaders.append(DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2,
                                  worker_init_fn=worker_init_fn))
    for epoch in range(9):
        iters = []
        for r in range(world_size):
            loaders[r].sampler.set_epoch(epoch)
            with ranks.rank(r):
                iters.append(iter(loaders[r]))
        for batch_idx, batches in enumerate(zip(*iters)):
            summed = [torch.zeros_like(p) for p in model.parameters()]
            for image, target in batches:
                loss = F.l1_loss(model(image), target)
                optimizer.zero_grad()
                loss.backward()
                for s, p in zip(summed, model.parameters()):
                    s += p.grad / world_size
            for s, p in zip(summed, model.parameters()):
                p.grad = s
            optimizer.step()
        print(f"epoch {epoch} last train_loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
