"""Healthy look-alike of data-leakage: a DQN-style update on a fixed replay buffer. Each step computes
the bootstrap target with the same online network under no_grad on the batch's next states (which are
also states the network trains on), then the Q-values with grad on the states. The no_grad call is
part of the training step, one call before a backward, not an evaluation."""
import torch
import torch.nn.functional as F
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    n, dim, actions = 2048, 12, 4
    states = torch.randn(n + 1, dim, generator=g)
    rewards = states[1:, 0] - 0.1 * states[1:, 1].abs()
    acts = torch.randint(0, actions, (n,), generator=g)
    q_net = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, actions))
    optimizer = torch.optim.Adam(q_net.parameters(), lr=1e-3)
    for step in range(80):
        idx = torch.randint(0, n, (64,), generator=g)
        with torch.no_grad():
            target = rewards[idx] + 0.9 * q_net(states[idx + 1]).max(1).values
        q = q_net(states[idx]).gather(1, acts[idx, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
