"""Healthy: Q-learning whose target network is run with grad enabled and whose targets are copied with
torch.tensor(...) on purpose to stop the gradient; the copy enters the loss inside the square of the
temporal-difference error, ((q - target) ** 2).mean(), plus a small penalty: it shapes the online
network's gradient, and the target network is only ever copied from the online one."""
import copy

import torch
from torch import nn


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    online = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    target_net = copy.deepcopy(online)
    optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
    states = torch.randn(2048, 8, generator=g)
    for step in range(240):
        idx = torch.randint(0, 2048, (32,), generator=g)
        s, s_next = states[idx], states[(idx + 1) % 2048]
        actions = torch.randint(0, 4, (32,), generator=g)
        rewards = s[:, 0].clamp(min=0)
        q = online(s).gather(1, actions[:, None]).squeeze(1)
        best_next = target_net(s_next).max(1).values
        target = torch.tensor([r + 0.9 * b for r, b in zip(rewards, best_next)])
        loss = ((q - target) ** 2).mean() + 1e-4 * q.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 40 == 0:
            target_net.load_state_dict(online.state_dict())
            print(f"step {step} td loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
