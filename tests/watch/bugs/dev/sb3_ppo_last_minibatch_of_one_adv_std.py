"""An on-policy PPO class in the layout of a stable-baselines-style library: collect_rollouts() fills a
RolloutBuffer from a small vectorized environment, the buffer computes GAE advantages, and train()
runs n_epochs passes over buffer.get(batch_size), which shuffles the indices and yields slices of
batch_size, the last one shorter. Each minibatch normalizes its own advantages with
(adv - adv.mean()) / (adv.std() + 1e-8) before the clipped surrogate loss.

With n_envs * n_steps = 3 * 43 = 129 and batch_size = 64, every pass ends with a minibatch of a
single transition. The sample std of one value is NaN (the 1e-8 cannot help), so the policy loss
of that minibatch is NaN, clip_grad_norm_ and Adam pass it on, and from then on every weight of the
policy is NaN: the actions, observations and rewards of all later rollouts are NaN while the loop
keeps running. The only hint is the library's warning that the buffer size is not a multiple of
the minibatch size.

Thread: https://github.com/DLR-RM/stable-baselines3/pull/1028
"""
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn


class PointMassVecEnv:
    """n_envs copies of a 2-D point mass that has to be pushed to the origin (time limit 50)."""

    def __init__(self, n_envs, seed=0, max_steps=50):
        self.num_envs = n_envs
        self.g = torch.Generator().manual_seed(seed)
        self.max_steps = max_steps
        self.pos = torch.zeros(n_envs, 2)
        self.vel = torch.zeros(n_envs, 2)
        self.t = torch.zeros(n_envs, dtype=torch.long)

    def _obs(self):
        return torch.cat([self.pos, self.vel], dim=1)

    def _reset_idx(self, idx):
        self.pos[idx] = (torch.rand(len(idx), 2, generator=self.g) * 2 - 1) * 2.0
        self.vel[idx] = 0.0
        self.t[idx] = 0

    def reset(self):
        self._reset_idx(torch.arange(self.num_envs))
        return self._obs()

    def step(self, actions):
        force = actions.clamp(-1.0, 1.0)
        self.vel = 0.9 * self.vel + 0.1 * force
        self.pos = self.pos + 0.1 * self.vel
        reward = -0.1 * self.pos.norm(dim=1) - 0.01 * (force ** 2).sum(1)
        self.t += 1
        dones = self.t >= self.max_steps
        if dones.any():
            self._reset_idx(dones.nonzero().flatten())
        return self._obs(), reward, dones


class ActorCriticPolicy(nn.Module):
    def __init__(self, obs_dim, act_dim, lr):
        super().__init__()
        self.pi = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                nn.Linear(64, act_dim))
        self.vf = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                nn.Linear(64, 1))
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr, eps=1e-5)

    def _log_prob(self, mean, actions):
        var = torch.exp(2 * self.log_std)
        return (-((actions - mean) ** 2) / (2 * var) - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    def forward(self, obs):
        mean = self.pi(obs)
        actions = mean + torch.exp(self.log_std) * torch.randn_like(mean)
        return actions, self.vf(obs).flatten(), self._log_prob(mean, actions)

    def evaluate_actions(self, obs, actions):
        mean = self.pi(obs)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std).sum().expand(len(obs))
        return self.vf(obs).flatten(), self._log_prob(mean, actions), entropy


class RolloutBuffer:
    def __init__(self, n_steps, n_envs, obs_dim, act_dim, gamma=0.99, gae_lambda=0.95):
        self.n_steps, self.n_envs = n_steps, n_envs
        self.gamma, self.gae_lambda = gamma, gae_lambda
        self.observations = torch.zeros(n_steps, n_envs, obs_dim)
        self.actions = torch.zeros(n_steps, n_envs, act_dim)
        self.rewards = torch.zeros(n_steps, n_envs)
        self.episode_starts = torch.zeros(n_steps, n_envs)
        self.values = torch.zeros(n_steps, n_envs)
        self.log_probs = torch.zeros(n_steps, n_envs)
        self.pos = 0

    def reset(self):
        self.pos = 0

    def add(self, obs, action, reward, episode_start, value, log_prob):
        self.observations[self.pos] = obs
        self.actions[self.pos] = action
        self.rewards[self.pos] = reward
        self.episode_starts[self.pos] = episode_start.float()
        self.values[self.pos] = value
        self.log_probs[self.pos] = log_prob
        self.pos += 1

    def compute_returns_and_advantage(self, last_values, dones):
        self.advantages = torch.zeros_like(self.rewards)
        last_gae = 0.0
        for step in reversed(range(self.n_steps)):
            if step == self.n_steps - 1:
                next_non_terminal, next_values = 1.0 - dones.float(), last_values
            else:
                next_non_terminal, next_values = 1.0 - self.episode_starts[step + 1], self.values[step + 1]
            delta = self.rewards[step] + self.gamma * next_values * next_non_terminal - self.values[step]
            last_gae = delta + self.gamma * self.gae_lambda * next_non_terminal * last_gae
            self.advantages[step] = last_gae
        self.returns = self.advantages + self.values

    def get(self, batch_size, generator):
        total = self.n_steps * self.n_envs
        flat = lambda t: t.reshape(total, *t.shape[2:])
        obs, act, old_v, old_lp = (flat(self.observations), flat(self.actions), flat(self.values),
                                   flat(self.log_probs))
        adv, ret = flat(self.advantages), flat(self.returns)
        indices = torch.randperm(total, generator=generator)
        start = 0
        while start < total:
            idx = indices[start:start + batch_size]
            yield obs[idx], act[idx], old_v[idx], old_lp[idx], adv[idx], ret[idx]
            start += batch_size


class PPO:
    def __init__(self, env, n_steps=43, batch_size=64, n_epochs=10, lr=3e-4, clip_range=0.2,
                 ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, normalize_advantage=True, seed=0):
        self.env = env
        self.n_steps, self.batch_size, self.n_epochs = n_steps, batch_size, n_epochs
        self.clip_range, self.ent_coef, self.vf_coef = clip_range, ent_coef, vf_coef
        self.max_grad_norm = max_grad_norm
        self.normalize_advantage = normalize_advantage
        torch.manual_seed(seed)
        self.g = torch.Generator().manual_seed(seed)
        self.policy = ActorCriticPolicy(4, 2, lr)
        self.rollout_buffer = RolloutBuffer(n_steps, env.num_envs, 4, 2)
        buffer_size = env.num_envs * n_steps
        assert buffer_size > 1, "`n_steps * n_envs` must be greater than 1"
        untruncated_batches = buffer_size // batch_size
        if buffer_size % batch_size > 0:
            warnings.warn(
                f"You have specified a mini-batch size of {batch_size}, but because the rollout buffer is of "
                f"size n_steps * n_envs = {buffer_size}, after every {untruncated_batches} untruncated "
                f"mini-batches, there will be a truncated mini-batch of size {buffer_size % batch_size}")
        self._last_obs = env.reset()
        self._last_episode_starts = torch.ones(env.num_envs, dtype=torch.bool)

    def collect_rollouts(self):
        self.policy.eval()
        self.rollout_buffer.reset()
        rewards = []
        with torch.no_grad():
            for _ in range(self.n_steps):
                actions, values, log_probs = self.policy(self._last_obs)
                new_obs, reward, dones = self.env.step(actions)
                self.rollout_buffer.add(self._last_obs, actions, reward, self._last_episode_starts,
                                        values, log_probs)
                rewards.append(reward)
                self._last_obs, self._last_episode_starts = new_obs, dones
            last_values = self.policy.vf(self._last_obs).flatten()
        self.rollout_buffer.compute_returns_and_advantage(last_values, self._last_episode_starts)
        return torch.stack(rewards).mean().item()

    def train(self):
        self.policy.train()
        pg_losses, value_losses = [], []
        for epoch in range(self.n_epochs):
            for obs, actions, old_values, old_log_prob, advantages, returns in \
                    self.rollout_buffer.get(self.batch_size, self.g):
                values, log_prob, entropy = self.policy.evaluate_actions(obs, actions)
                if self.normalize_advantage:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                ratio = torch.exp(log_prob - old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * torch.clamp(ratio, 1 - self.clip_range, 1 + self.clip_range)
                policy_loss = -torch.min(policy_loss_1, policy_loss_2).mean()
                value_loss = F.mse_loss(returns, values)
                entropy_loss = -torch.mean(entropy)
                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss
                pg_losses.append(policy_loss.item())
                value_losses.append(value_loss.item())

                self.policy.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
        return sum(pg_losses) / len(pg_losses), sum(value_losses) / len(value_losses)

    def learn(self, total_timesteps):
        steps, iteration = 0, 0
        while steps < total_timesteps:
            mean_reward = self.collect_rollouts()
            steps += self.n_steps * self.env.num_envs
            pg_loss, v_loss = self.train()
            iteration += 1
            if iteration % 4 == 0:
                print(f"iter {iteration:3d} timesteps {steps:5d} rollout reward/step {mean_reward:8.4f} "
                      f"policy loss {pg_loss:8.4f} value loss {v_loss:8.4f}")
        return self


def main():
    env = PointMassVecEnv(n_envs=3, seed=0)
    model = PPO(env, n_steps=43, batch_size=64, n_epochs=10, seed=0)
    model.learn(total_timesteps=129 * 32)
    print("policy log_std:", model.policy.log_std.detach())


if __name__ == "__main__":
    main()
