"""A policy-gradient loop on a small simulated balancing task: every episode starts from the upright
state plus a little noise (a few hundredths), so the first batches of observations the policy sees,
under no_grad while acting and then in the update, are close to one another. They still differ by a
few percent of their size: a healthy start, not inputs that are all the same."""
import torch
from torch import nn


class Balancer:
    """Four-number state: position, velocity, angle, angular velocity (plus a constant height)."""

    def __init__(self, n, g):
        self.n, self.g = n, g
        self.state = self.reset()

    def reset(self):
        noise = 0.05 * (2 * torch.rand(self.n, 4, generator=self.g) - 1)
        return torch.cat([noise, torch.ones(self.n, 1)], 1)

    def step(self, action):
        s = self.state.clone()
        force = (2 * action.float() - 1) * 0.1
        s[:, 1] += force + 0.02 * s[:, 2]
        s[:, 0] += 0.02 * s[:, 1]
        s[:, 3] += 0.15 * s[:, 2] - force
        s[:, 2] += 0.02 * s[:, 3]
        done = s[:, 2].abs() > 0.2
        s[done] = self.reset()[done]
        self.state = s
        return s, (~done).float()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    env = Balancer(16, g)
    policy = nn.Sequential(nn.Linear(5, 32), nn.Tanh(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for update in range(60):
        states, actions, rewards = [], [], []
        with torch.no_grad():
            for _ in range(8):
                s = env.state
                a = torch.distributions.Categorical(logits=policy(s)).sample()
                _, r = env.step(a)
                states.append(s)
                actions.append(a)
                rewards.append(r)
        returns = torch.stack(rewards).flip(0).cumsum(0).flip(0)
        logp = torch.distributions.Categorical(logits=policy(torch.cat(states))).log_prob(torch.cat(actions))
        advantage = torch.cat(list(returns)) - returns.mean()
        loss = -(logp * advantage).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if update % 20 == 0:
            print(f"update {update} mean return {returns[0].mean().item():.2f}")


if __name__ == "__main__":
    main()
