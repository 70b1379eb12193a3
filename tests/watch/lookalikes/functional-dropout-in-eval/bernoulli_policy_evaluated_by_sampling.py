"""A policy over binary actions (a switch per unit) trained with REINFORCE; the evaluation episodes
run the policy in eval mode under no_grad and sample actions from torch.distributions.Bernoulli,
whose draw uses each action's own probability. Sampling a stochastic policy is not dropout."""
import torch
from torch import nn
from torch.distributions import Bernoulli

UNITS = 6


def reward(state, actions):
    return -((actions - (state[:, :UNITS] > 0).float()) ** 2).sum(1)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    policy = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, UNITS))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for it in range(60):
        policy.train()
        state = torch.randn(64, 10, generator=g)
        dist = Bernoulli(logits=policy(state))
        actions = dist.sample()
        r = reward(state, actions)
        loss = -(dist.log_prob(actions).sum(1) * (r - r.mean())).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if it % 20 == 19:
            policy.eval()
            with torch.no_grad():
                for _ in range(3):
                    test_state = torch.randn(64, 10, generator=g)
                    score = reward(test_state, Bernoulli(logits=policy(test_state)).sample()).mean()
            print(f"iteration {it + 1}: evaluation reward {score:.2f}")


if __name__ == "__main__":
    main()
