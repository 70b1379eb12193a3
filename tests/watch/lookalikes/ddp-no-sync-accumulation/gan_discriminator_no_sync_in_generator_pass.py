"""A GAN trained under DistributedDataParallel (one process here; torchrun would start one per GPU),
both networks wrapped. The generator's loss runs through the discriminator, so that pass is made
inside D.no_sync(): D's reducer must not all-reduce gradients nobody steps on (zero_grad() clears
them before D's next update). D's gradients thus see an unsynchronised backward() between two of
its steps, but the last backward() before each D step is D's own loss, synchronised: correct."""
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def setup():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)


def real_batch(n, g):
    angle = torch.rand(n, generator=g) * 6.2832
    return torch.stack([angle.cos(), angle.sin()], 1) * 2 + 0.05 * torch.randn(n, 2, generator=g)


def main():
    torch.manual_seed(0)
    setup()
    try:
        G = DistributedDataParallel(nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2)))
        D = DistributedDataParallel(nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)))
        opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
        bce = nn.BCEWithLogitsLoss()
        g = torch.Generator().manual_seed(0)
        for it in range(80):
            real = real_batch(64, g)
            fake = G(torch.randn(64, 8, generator=g))
            d_loss = bce(D(real), torch.ones(64, 1)) + bce(D(fake.detach()), torch.zeros(64, 1))
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()

            with D.no_sync():
                g_loss = bce(D(fake), torch.ones(64, 1))
                opt_g.zero_grad()
                g_loss.backward()
            opt_g.step()
            if it % 20 == 0:
                print(f"it {it} d {d_loss.item():.3f} g {g_loss.item():.3f}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
