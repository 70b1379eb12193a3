"""Healthy: actor-critic on a small bandit-like task. The discounted returns are built with
torch.tensor(returns) from numbers, and the baseline is a copy torch.tensor(values) of the critic's
outputs (which require grad): both weigh the log-probabilities, -(log_probs * (returns - baseline)),
and the critic is trained by its own loss on the same value tensors."""
import torch
import torch.nn.functional as F
from torch import nn


class ActorCritic(nn.Module):
    def __init__(self, obs=6, actions=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs, 32), nn.Tanh())
        self.policy, self.value = nn.Linear(32, actions), nn.Linear(32, 1)

    def forward(self, state):
        h = self.body(state)
        return torch.distributions.Categorical(logits=self.policy(h)), self.value(h).squeeze(-1)


def rollout(model, g, steps=12, gamma=0.9):
    log_probs, values, rewards = [], [], []
    state = torch.randn(6, generator=g)
    for _ in range(steps):
        dist, value = model(state)
        action = dist.sample()
        rewards.append(float(action.item() == int(state[:3].argmax())))
        log_probs.append(dist.log_prob(action))
        values.append(value)
        state = torch.randn(6, generator=g)
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        returns.insert(0, running)
    return torch.stack(log_probs), values, returns, sum(rewards)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = ActorCritic()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for episode in range(150):
        log_probs, values, returns, total = rollout(model, g)
        returns = torch.tensor(returns)
        baseline = torch.tensor(values)
        policy_loss = -(log_probs * (returns - baseline)).sum()
        value_loss = F.smooth_l1_loss(torch.stack(values), returns)
        optimizer.zero_grad()
        (policy_loss + value_loss).backward()
        optimizer.step()
        if episode % 50 == 0:
            print(f"episode {episode} reward {total:.0f}")


if __name__ == "__main__":
    main()
