"""Healthy look-alike of loss-detached-from-graph: a DQN-style update where the target network
runs under torch.no_grad() and its output is detached on purpose; only the online network is in
the optimizer, and the target is synced from it every 10 steps."""
import copy

import torch
from torch import nn


class Agent:
    def __init__(self, online, gamma=0.9, lr=1e-3):
        self.online, self.target = online, copy.deepcopy(online)
        self.optimizer = torch.optim.Adam(online.parameters(), lr=lr)
        self.gamma = gamma

    def update(self, state, action, reward, next_state, done):
        with torch.no_grad():
            best_next = self.target(next_state).max(1).values
            target = reward + self.gamma * (1 - done) * best_next
        q = self.online(state).gather(1, action[:, None]).squeeze(1)
        loss = nn.functional.smooth_l1_loss(q, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def sync(self):
        self.target.load_state_dict(self.online.state_dict())


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    agent = Agent(nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3)))
    for step in range(60):
        state, next_state = torch.randn(32, 6, generator=g), torch.randn(32, 6, generator=g)
        action = torch.randint(0, 3, (32,), generator=g)
        reward, done = state[:, 0], (torch.rand(32, generator=g) < 0.1).float()
        loss = agent.update(state, action, reward, next_state, done)
        if step % 10 == 9:
            agent.sync()
    print(f"loss {loss:.3f}")


if __name__ == "__main__":
    main()
