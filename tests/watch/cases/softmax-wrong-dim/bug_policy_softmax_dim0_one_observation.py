"""A REINFORCE agent on a contextual bandit that scores one observation at a time: the policy network
returns logits of shape (1, actions) and the agent turns them into probabilities with
F.softmax(logits, dim=0), written as if the logits were a 1-D vector. Over an axis of size one every
probability is 1, so the sampled actions are uniform and the policy gradient is exactly zero."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

N_ARMS, OBS = 4, 8


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(OBS, 32), nn.Tanh(), nn.Linear(32, N_ARMS))

    def forward(self, obs):
        return self.body(obs)


class Agent:
    def __init__(self, policy, lr=1e-2):
        self.policy = policy
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
        self.log_probs, self.rewards = [], []

    def act(self, obs):
        logits = self.policy(obs.unsqueeze(0))
        probs = F.softmax(logits, dim=0)
        dist = Categorical(probs=probs)
        action = dist.sample()
        self.log_probs.append(dist.log_prob(action))
        return int(action)

    def finish_episode(self):
        rewards = torch.tensor(self.rewards)
        advantage = rewards - rewards.mean()
        loss = -(torch.cat(self.log_probs) * advantage).sum()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.log_probs, self.rewards = [], []
        return float(rewards.mean())


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    arm_weights = torch.randn(OBS, N_ARMS, generator=g)
    agent = Agent(Policy())
    for episode in range(80):
        for _ in range(16):
            obs = torch.randn(OBS, generator=g)
            best = int((obs @ arm_weights).argmax())
            agent.rewards.append(1.0 if agent.act(obs) == best else 0.0)
        mean_reward = agent.finish_episode()
        if episode % 20 == 0:
            print(f"episode {episode} mean reward {mean_reward:.2f}")


if __name__ == "__main__":
    main()
