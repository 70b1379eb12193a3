"""A SAC agent for a continuous-control walker task, written in the style of a hands-on RL lab
repository: a PolicyNetContinuous (MLP -> mu, softplus std; rsample from Normal, tanh squash,
log-probability with the tanh correction), two QValueNetContinuous critics taking the concatenated
state and action, target copies updated with soft_update(tau), a learnable log_alpha with its own
optimizer and a target entropy of -action_dim; calc_target(rewards, next_states, dones) builds the
soft TD target, update(transition_dict) does the two critic MSE steps, the actor step and the alpha
step; the main loop runs episodes, stores transitions in a ReplayBuffer and updates once the buffer
is warm, printing the episode return. The bug: the policy returns log_prob = dist.log_prob(sample)
minus the tanh correction per action dimension, shape (B, action_dim), without summing over the
action dimensions; the soft target r + gamma * (min Q - alpha * log_prob) therefore has shape
(B, 4), and F.mse_loss(critic(s, a), td_target) broadcasts the (B, 1) Q-values against it (only a
UserWarning), so each Q is regressed on the mean of four per-dimension targets whose entropy term
is a quarter of the real one; the actor and alpha losses average the per-dimension log-probs too.

Thread: https://github.com/sunwuzhou03/reinforcement-learning-lab/issues/1
"""
import collections
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

STATE_DIM, ACTION_DIM, EP_LEN = 8, 4, 25


class WalkerLike:
    """Toy continuous task: the best action is a fixed linear map of the state."""

    def __init__(self, rng):
        self.rng = rng
        self.W = rng.normal(0, 0.5, (ACTION_DIM, STATE_DIM)).astype(np.float32)

    def reset(self):
        self.t = 0
        self.s = self.rng.normal(0, 1, STATE_DIM).astype(np.float32)
        return self.s

    def step(self, a):
        best = np.tanh(self.W @ self.s)
        r = 1.0 - float(np.mean((a - best) ** 2))
        self.t += 1
        self.s = (0.8 * self.s + self.rng.normal(0, 0.6, STATE_DIM)).astype(np.float32)
        return self.s, r, self.t >= EP_LEN


class ReplayBuffer:
    def __init__(self, capacity):
        self.buffer = collections.deque(maxlen=capacity)

    def add(self, *tr):
        self.buffer.append(tr)

    def sample(self, n):
        s, a, r, ns, d = zip(*random.sample(self.buffer, n))
        return np.array(s), np.array(a), r, np.array(ns), d

    def size(self):
        return len(self.buffer)


class PolicyNetContinuous(nn.Module):
    def __init__(self, hidden_dim=64):
        super().__init__()
        self.fc1 = nn.Linear(STATE_DIM, hidden_dim)
        self.fc_mu = nn.Linear(hidden_dim, ACTION_DIM)
        self.fc_std = nn.Linear(hidden_dim, ACTION_DIM)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        mu, std = self.fc_mu(x), F.softplus(self.fc_std(x)) + 1e-3
        dist = torch.distributions.Normal(mu, std)
        normal_sample = dist.rsample()
        action = torch.tanh(normal_sample)
        log_prob = dist.log_prob(normal_sample) - torch.log(1 - action.pow(2) + 1e-7)
        return action, log_prob


class QValueNetContinuous(nn.Module):
    def __init__(self, hidden_dim=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(STATE_DIM + ACTION_DIM, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, 1))

    def forward(self, x, a):
        return self.net(torch.cat([x, a], dim=1))


class SACContinuous:
    def __init__(self, actor_lr=1e-3, critic_lr=2e-3, alpha_lr=1e-3, gamma=0.9, tau=0.01):
        self.actor = PolicyNetContinuous()
        self.critic_1, self.critic_2 = QValueNetContinuous(), QValueNetContinuous()
        self.target_critic_1, self.target_critic_2 = QValueNetContinuous(), QValueNetContinuous()
        self.target_critic_1.load_state_dict(self.critic_1.state_dict())
        self.target_critic_2.load_state_dict(self.critic_2.state_dict())
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=actor_lr)
        self.critic_1_optimizer = torch.optim.Adam(self.critic_1.parameters(), lr=critic_lr)
        self.critic_2_optimizer = torch.optim.Adam(self.critic_2.parameters(), lr=critic_lr)
        self.log_alpha = torch.tensor(np.log(0.1), dtype=torch.float, requires_grad=True)
        self.log_alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=alpha_lr)
        self.target_entropy = -ACTION_DIM
        self.gamma, self.tau = gamma, tau

    def take_action(self, state):
        with torch.no_grad():
            return self.actor(torch.tensor(state[None], dtype=torch.float))[0][0].numpy()

    def calc_target(self, rewards, next_states, dones):
        next_actions, log_prob = self.actor(next_states)
        entropy = -log_prob
        q1 = self.target_critic_1(next_states, next_actions)
        q2 = self.target_critic_2(next_states, next_actions)
        next_value = torch.min(q1, q2) + self.log_alpha.exp() * entropy
        return rewards + self.gamma * next_value * (1 - dones)

    def soft_update(self, net, target_net):
        for p_t, p in zip(target_net.parameters(), net.parameters()):
            p_t.data.copy_(p_t.data * (1.0 - self.tau) + p.data * self.tau)

    def update(self, transition_dict):
        states = torch.tensor(transition_dict["states"], dtype=torch.float)
        actions = torch.tensor(transition_dict["actions"], dtype=torch.float)
        rewards = torch.tensor(transition_dict["rewards"], dtype=torch.float).view(-1, 1)
        next_states = torch.tensor(transition_dict["next_states"], dtype=torch.float)
        dones = torch.tensor(transition_dict["dones"], dtype=torch.float).view(-1, 1)

        td_target = self.calc_target(rewards, next_states, dones)
        critic_1_loss = torch.mean(F.mse_loss(self.critic_1(states, actions), td_target.detach()))
        critic_2_loss = torch.mean(F.mse_loss(self.critic_2(states, actions), td_target.detach()))
        self.critic_1_optimizer.zero_grad()
        critic_1_loss.backward()
        self.critic_1_optimizer.step()
        self.critic_2_optimizer.zero_grad()
        critic_2_loss.backward()
        self.critic_2_optimizer.step()

        new_actions, log_prob = self.actor(states)
        entropy = -log_prob
        q = torch.min(self.critic_1(states, new_actions), self.critic_2(states, new_actions))
        actor_loss = torch.mean(-self.log_alpha.exp() * entropy - q)
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()

        alpha_loss = torch.mean((entropy - self.target_entropy).detach() * self.log_alpha.exp())
        self.log_alpha_optimizer.zero_grad()
        alpha_loss.backward()
        self.log_alpha_optimizer.step()

        self.soft_update(self.critic_1, self.target_critic_1)
        self.soft_update(self.critic_2, self.target_critic_2)
        return critic_1_loss.item(), actor_loss.item()


def train_off_policy_agent(env, agent, num_episodes, replay_buffer, minimal_size, batch_size):
    for i in range(num_episodes):
        state, done, episode_return, losses = env.reset(), False, 0.0, []
        while not done:
            action = agent.take_action(state)
            next_state, reward, done = env.step(action)
            replay_buffer.add(state, action, reward, next_state, done)
            state = next_state
            episode_return += reward
            if replay_buffer.size() > minimal_size:
                b_s, b_a, b_r, b_ns, b_d = replay_buffer.sample(batch_size)
                losses.append(agent.update({"states": b_s, "actions": b_a, "next_states": b_ns,
                                            "rewards": b_r, "dones": b_d}))
        if (i + 1) % 5 == 0:
            c, a = np.mean(losses, 0) if losses else (float("nan"), float("nan"))
            print(f"episode {i + 1}: return {episode_return:.3f} critic loss {c:.4f} actor loss {a:.4f} "
                  f"alpha {agent.log_alpha.exp().item():.4f}")


def main():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    env = WalkerLike(np.random.default_rng(0))
    agent = SACContinuous()
    train_off_policy_agent(env, agent, num_episodes=30, replay_buffer=ReplayBuffer(10000),
                           minimal_size=200, batch_size=64)


if __name__ == "__main__":
    main()
