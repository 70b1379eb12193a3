"""A REINFORCE agent on a contextual bandit: the policy network ends in nn.Softmax so that its
output "is" the action distribution, and the agent builds torch.distributions.Categorical(logits=...)
from that output, as its RL library's action distribution expects logits. Categorical normalises
the probabilities again (logits - logsumexp), so every policy is squeezed towards uniform: the
entropy stays near log(actions) and the reward barely rises above chance."""
import torch
from torch import nn
from torch.distributions import Categorical

FEATURES, ACTIONS = 8, 6


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, 64), nn.Tanh(), nn.Linear(64, ACTIONS), nn.Softmax(dim=-1))

    def forward(self, obs):
        return self.net(obs)


class Agent:
    def __init__(self, policy, lr=1e-2):
        self.policy = policy
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=lr)

    def update(self, obs, rewards_of):
        dist = Categorical(logits=self.policy(obs))
        actions = dist.sample()
        reward = rewards_of(obs, actions)
        loss = -((reward - reward.mean()) * dist.log_prob(actions)).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return reward.mean().item(), dist.entropy().mean().item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(FEATURES, ACTIONS, generator=g)

    def rewards_of(obs, actions):
        return (actions == (obs @ w).argmax(1)).float()

    agent = Agent(Policy())
    for step in range(150):
        reward, entropy = agent.update(torch.randn(64, FEATURES, generator=g), rewards_of)
        if step % 50 == 0:
            print(f"step {step} reward {reward:.3f} entropy {entropy:.3f}")


if __name__ == "__main__":
    main()
