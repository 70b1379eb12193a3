"""A DeepSensor-style training loop: a ConvNP-like wrapper exposes the torch network as
`model.model` and a `loss_fn(task, normalise=True)` (a Gaussian negative log-likelihood at the
target points given the context points), and the user calls a helper
`train_epoch(model, tasks, lr, batch_size)` once per epoch. The helper builds a fresh
torch.optim.Adam(model.model.parameters(), lr) on every call, so Adam's moment estimates and step
count are thrown away at the start of each epoch. With short epochs every restart gives a few
bias-corrected, sign-like full-lr steps in all coordinates and the averaged second moments never
settle, so the loss curve is noisier and ends higher than with one optimizer kept across epochs.

Thread: https://github.com/alan-turing-institute/deepsensor/issues/47
"""
import math

import numpy as np
import torch
import torch.optim as optim
from torch import nn


class SetConvNet(nn.Module):
    """A small conditional neural process: encode (x, y) context pairs, pool, decode at targets."""

    def __init__(self, hidden=64):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.decoder = nn.Sequential(nn.Linear(hidden + 1, hidden), nn.ReLU(),
                                     nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, xc, yc, xt):
        r = self.encoder(torch.stack([xc, yc], dim=-1)).mean(dim=1, keepdim=True)
        h = torch.cat([r.expand(-1, xt.shape[1], -1), xt.unsqueeze(-1)], dim=-1)
        mean, raw_std = self.decoder(h).unbind(-1)
        return mean, 0.01 + nn.functional.softplus(raw_std)


class ConvNP:
    def __init__(self):
        self.model = SetConvNet()

    def loss_fn(self, task, normalise=True):
        mean, std = self.model(task["x_c"], task["y_c"], task["x_t"])
        nll = -torch.distributions.Normal(mean, std).log_prob(task["y_t"]).sum()
        if normalise:
            nll = nll / task["y_t"].numel()
        return nll


def concat_tasks(tasks):
    return {k: torch.cat([t[k] for t in tasks], dim=0) for k in tasks[0]}


def train_epoch(model, tasks, lr=5e-5, batch_size=None):
    opt = optim.Adam(model.model.parameters(), lr=lr)

    def train_step(task):
        opt.zero_grad()
        loss = model.loss_fn(task, normalise=True)
        loss.backward()
        opt.step()
        return loss.detach().cpu().numpy()

    tasks = [tasks[i] for i in np.random.permutation(len(tasks))]
    n_batches = len(tasks) // batch_size if batch_size is not None else len(tasks)
    batch_losses = []
    for batch_i in range(n_batches):
        if batch_size is not None:
            task = concat_tasks(tasks[batch_i * batch_size:(batch_i + 1) * batch_size])
        else:
            task = tasks[batch_i]
        batch_losses.append(train_step(task))
    return batch_losses


def make_tasks(n_tasks, gen, n_context=10, n_target=20):
    tasks = []
    for _ in range(n_tasks):
        amp = 0.5 + 1.5 * torch.rand(1, generator=gen)
        phase = math.pi * torch.rand(1, generator=gen)
        x = 4 * torch.rand(1, n_context + n_target, generator=gen) - 2
        y = amp * torch.sin(2 * x + phase) + 0.05 * torch.randn(x.shape, generator=gen)
        tasks.append({"x_c": x[:, :n_context], "y_c": y[:, :n_context],
                      "x_t": x[:, n_context:], "y_t": y[:, n_context:]})
    return tasks


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    gen = torch.Generator().manual_seed(0)
    train_tasks = make_tasks(64, gen)
    val_task = concat_tasks(make_tasks(64, torch.Generator().manual_seed(1)))
    model = ConvNP()
    for epoch in range(30):
        losses = train_epoch(model, train_tasks, lr=3e-3, batch_size=16)
        if epoch % 5 == 0 or epoch == 29:
            with torch.no_grad():
                val = model.loss_fn(val_task).item()
            print(f"epoch {epoch:2d}  train NLL {np.mean(losses):.4f}  val NLL {val:.4f}")


if __name__ == "__main__":
    main()
