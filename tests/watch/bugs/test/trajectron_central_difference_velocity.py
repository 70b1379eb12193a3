"""A Trajectron++-style pedestrian forecasting pipeline: a process_data step turns each raw
track into node states (position, velocity, acceleration), with velocity and acceleration
taken by a derivative_of(x, dt) helper over the whole track; training samples cut the states
into 8 history steps and 12 future positions; an LSTM history encoder and an MLP decoder
predict future velocities that a single-integrator step turns into positions, trained with
Adam and an ExponentialLR, and ADE / FDE are reported on held-out tracks. derivative_of uses
np.gradient, a central difference, so the velocity (and acceleration) at the last observed step
is computed from the positions one and two steps into the future: the "history" hands the model
the first future steps and the reported ADE / FDE are better than a forecaster that only sees the
past could reach.

Thread: https://github.com/StanfordASL/Trajectron-plus-plus/issues/53
"""
import numpy as np
import torch
from torch import nn

HIST, FUT, DT = 8, 12, 0.4


def derivative_of(x, dt=1.0):
    return np.gradient(x, dt)


def process_data(tracks):
    nodes = []
    for xy in tracks:
        x, y = xy[:, 0], xy[:, 1]
        vx, vy = derivative_of(x, DT), derivative_of(y, DT)
        ax, ay = derivative_of(vx, DT), derivative_of(vy, DT)
        nodes.append(np.stack([x, y, vx, vy, ax, ay], axis=1).astype(np.float32))
    return nodes


def raw_tracks(n, seed):
    rng = np.random.default_rng(seed)
    tracks = []
    for _ in range(n):
        heading = rng.uniform(0, 2 * np.pi)
        speed = rng.uniform(0.8, 1.6)
        turn = rng.normal(0, 0.12)
        pos, out = rng.normal(0, 5, 2), []
        for _ in range(HIST + FUT):
            out.append(pos.copy())
            heading += turn + rng.normal(0, 0.05)
            pos = pos + DT * speed * np.array([np.cos(heading), np.sin(heading)])
        tracks.append(np.array(out) + rng.normal(0, 0.02, (HIST + FUT, 2)))
    return tracks


def make_batches(nodes):
    states = torch.tensor(np.stack(nodes))
    hist = states[:, :HIST].clone()
    origin = hist[:, -1:, :2].clone()
    hist[:, :, :2] -= origin
    future = states[:, HIST:, :2] - origin
    return hist, future


class Trajectron(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.encoder = nn.LSTM(6, hidden, batch_first=True)
        self.decoder = nn.Sequential(nn.Linear(hidden + 6, 128), nn.ReLU(), nn.Linear(128, FUT * 2))

    def forward(self, hist):
        _, (h, _) = self.encoder(hist)
        vel = self.decoder(torch.cat([h[-1], hist[:, -1]], dim=-1)).view(-1, FUT, 2)
        return torch.cumsum(vel * DT, dim=1)  # single integrator from the last observed position


def main():
    torch.manual_seed(0)
    train_hist, train_fut = make_batches(process_data(raw_tracks(2048, seed=0)))
    test_hist, test_fut = make_batches(process_data(raw_tracks(256, seed=1)))
    model = Trajectron()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    bs = 64
    for epoch in range(3):
        model.train()
        perm = torch.randperm(len(train_hist))
        for b in range(0, len(perm), bs):
            idx = perm[b:b + bs]
            pred = model(train_hist[idx])
            loss = (pred - train_fut[idx]).norm(dim=-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        with torch.no_grad():
            err = (model(test_hist) - test_fut).norm(dim=-1)
        print(f"epoch {epoch} train loss {loss.item():.3f} test ADE {err.mean():.3f} FDE {err[:, -1].mean():.3f}")


if __name__ == "__main__":
    main()
