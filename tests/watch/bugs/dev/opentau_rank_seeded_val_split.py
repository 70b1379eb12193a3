"""A robot-policy training script in the style of an accelerate-launched trainer: set_seed(seed,
accelerator) offsets the seed by the process index so that augmentation differs per rank, and then
every rank calls make_dataset(cfg), which splits the frames into train and validation with
torch.utils.data.random_split on the global RNG. The policy returns its loss from forward(batch);
the step averages the ranks' gradients (done here in one process for a simulated two-rank job),
and the validation loss is gathered over the ranks and drives the running-best checkpoint. Because
the split is drawn after the per-rank seed offset, each rank partitions the frames differently and
most of one rank's validation frames are in the other rank's training split, so the reported
validation loss is measured on frames the model trained on.

Thread: https://github.com/TensorAuto/OpenTau/pull/498
"""
import copy
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, random_split


class SimulatedAccelerator:
    """Stands in for the launcher: one object per process of a two-process job."""

    def __init__(self, process_index, num_processes=2):
        self.process_index, self.num_processes = process_index, num_processes

    @property
    def is_main_process(self):
        return self.process_index == 0


def set_seed(seed, accelerator=None):
    if accelerator is not None:
        seed += accelerator.process_index * 12345
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class EpisodeFrames(Dataset):
    """Frames of recorded episodes: robot state and a task embedding in, an action chunk out."""

    def __init__(self, n_frames=640, state_dim=12, chunk=4, action_dim=3):
        g = torch.Generator().manual_seed(2024)
        self.state = torch.randn(n_frames, state_dim, generator=g)
        self.task = torch.randn(n_frames, 4, generator=g)
        mix = torch.randn(state_dim + 4, chunk * action_dim, generator=g) / 4
        clean = torch.tanh(torch.cat([self.state, self.task], 1) @ mix)
        self.action = (clean + 0.5 * torch.randn(clean.shape, generator=g)).view(n_frames, chunk, action_dim)

    def __len__(self):
        return len(self.state)

    def __getitem__(self, idx):
        return {"observation.state": self.state[idx], "task": self.task[idx], "action": self.action[idx]}


def make_dataset(cfg):
    dataset = EpisodeFrames()
    val_size = int(len(dataset) * cfg["val_split_ratio"])
    train_ds, val_ds = random_split(dataset, [len(dataset) - val_size, val_size])
    return train_ds, val_ds


class MLPPolicy(nn.Module):
    def __init__(self, state_dim=12, chunk=4, action_dim=3, hidden=256):
        super().__init__()
        self.chunk, self.action_dim = chunk, action_dim
        self.net = nn.Sequential(nn.Linear(state_dim + 4, hidden), nn.GELU(), nn.Linear(hidden, hidden),
                                 nn.GELU(), nn.Linear(hidden, chunk * action_dim))

    def forward(self, batch):
        x = torch.cat([batch["observation.state"], batch["task"]], 1)
        pred = self.net(x).view(-1, self.chunk, self.action_dim)
        loss = F.mse_loss(pred, batch["action"])
        return loss, {"mse": loss.item()}


def cycle(loader):
    while True:
        for batch in loader:
            yield batch


def train(cfg):
    world = [SimulatedAccelerator(r, cfg["num_processes"]) for r in range(cfg["num_processes"])]
    train_iters, val_loaders = [], []
    for accelerator in world:
        set_seed(cfg["seed"], accelerator=accelerator)
        train_ds, val_ds = make_dataset(cfg)
        train_iters.append(cycle(DataLoader(train_ds, batch_size=cfg["batch_size"], shuffle=True,
                                            drop_last=True)))
        val_loaders.append(DataLoader(val_ds, batch_size=cfg["batch_size"]))

    set_seed(cfg["seed"], accelerator=world[0])
    policy = MLPPolicy()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg["lr"], weight_decay=1e-4)
    running_best, best_state = float("inf"), None
    for step in range(1, cfg["steps"] + 1):
        policy.train()
        optimizer.zero_grad()
        for it in train_iters:
            loss, _ = policy(next(it))
            (loss / len(train_iters)).backward()
        nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()

        if step % cfg["val_freq"] == 0:
            policy.eval()
            per_rank = []
            with torch.no_grad():
                for loader in val_loaders:
                    per_rank.append(np.mean([policy(batch)[0].item() for batch in loader]))
            val_loss = float(np.mean(per_rank))
            if val_loss < running_best:
                running_best, best_state = val_loss, copy.deepcopy(policy.state_dict())
            if world[0].is_main_process:
                print(f"step {step} train loss {loss.item():.4f} Validation/loss {val_loss:.4f} "
                      f"running_best {running_best:.4f}")
    policy.load_state_dict(best_state)
    return policy


if __name__ == "__main__":
    train({"seed": 1234, "num_processes": 2, "val_split_ratio": 0.15, "batch_size": 32, "lr": 3e-3,
           "steps": 150, "val_freq": 25})
