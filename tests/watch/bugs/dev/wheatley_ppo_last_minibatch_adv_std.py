"""A PPO trainer for a small scheduling environment, shaped like a CleanRL-derived PPO class:
collect_rollouts() fills a buffer from the vector of environments and computes GAE advantages, and
train() shuffles the flattened buffer and walks it in minibatches of batch_size, normalising the
advantages of each minibatch with (adv - adv.mean()) / (adv.std() + 1e-8), clipping the gradient norm
and stepping Adam. The rollout holds 25 transitions and the minibatch size is 8, so the last minibatch
of every epoch holds a single transition: its advantage std (with Bessel's correction) is NaN, the
policy loss is NaN, the clipped gradients are NaN and the first such step writes NaN into every
weight. Nothing raises; the agent then returns whatever action argmax picks from NaN scores.

Thread: https://github.com/jolibrain/wheatley/pull/93
"""
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical


class FlowtimeEnv:
    """Pick the next job to run among n; reward is minus the time the chosen job waits + runs."""

    def __init__(self, n_jobs, seed):
        self.n_jobs, self.rng = n_jobs, np.random.default_rng(seed)

    def reset(self):
        self.durations = self.rng.uniform(0.1, 1.0, self.n_jobs).astype(np.float32)
        self.done_mask = np.zeros(self.n_jobs, dtype=bool)
        self.clock = 0.0
        return self.obs(), ~self.done_mask

    def obs(self):
        return np.stack([self.durations, self.done_mask.astype(np.float32)], 1).reshape(-1)

    def step(self, action):
        self.clock += float(self.durations[action])
        self.done_mask[action] = True
        reward = -self.clock
        done = bool(self.done_mask.all())
        if done:
            obs, mask = self.reset()
        else:
            obs, mask = self.obs(), ~self.done_mask
        return obs, reward, done, mask


class Agent(nn.Module):
    def __init__(self, n_jobs, hidden=64):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(2 * n_jobs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.action_net = nn.Linear(hidden, n_jobs)
        self.value_net = nn.Linear(hidden, 1)

    def get_value(self, x):
        return self.value_net(self.body(x))

    def get_action_and_value(self, x, action=None, action_masks=None):
        features = self.body(x)
        logits = self.action_net(features)
        logits = torch.where(action_masks, logits, torch.tensor(-1e12))
        distrib = Categorical(logits=logits, validate_args=False)
        if action is None:
            gumbel = -torch.log(-torch.log(torch.rand_like(logits)))
            action = torch.argmax(logits + gumbel, dim=-1)
        return action, distrib.log_prob(action), distrib.entropy(), self.value_net(features)


class PPO:
    def __init__(self, n_workers=1, n_steps_episode=25, n_epochs=4, batch_size=8, gamma=0.99,
                 clip_range=0.2, ent_coef=0.01, vf_coef=0.5, normalize_advantage=True):
        self.num_envs, self.num_steps, self.update_epochs = n_workers, n_steps_episode, n_epochs
        self.minibatch_size, self.gamma, self.gae_lambda = batch_size, gamma, 1.0
        self.clip_coef, self.ent_coef, self.vf_coef = clip_range, ent_coef, vf_coef
        self.norm_adv, self.max_grad_norm = normalize_advantage, 0.5

    def collect_rollouts(self, agent, envs, state):
        obs_buf, mask_buf, actions, logprobs, rewards, dones, values = [], [], [], [], [], [], []
        next_obs, next_mask = state
        for _ in range(self.num_steps):
            obs_buf.append(next_obs)
            mask_buf.append(next_mask)
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, action_masks=next_mask)
            results = [env.step(int(a)) for env, a in zip(envs, action)]
            next_obs = torch.tensor(np.stack([r[0] for r in results]))
            next_mask = torch.tensor(np.stack([r[3] for r in results]))
            actions.append(action)
            logprobs.append(logprob)
            values.append(value.flatten())
            rewards.append(torch.tensor([r[1] for r in results], dtype=torch.float32))
            dones.append(torch.tensor([float(r[2]) for r in results]))
        rewards, dones, values = torch.stack(rewards), torch.stack(dones), torch.stack(values)
        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(self.num_steps)):
                nextvalues = next_value if t == self.num_steps - 1 else values[t + 1]
                nextnonterminal = 1.0 - dones[t]
                delta = rewards[t] + self.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + self.gamma * self.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values
        batch = (torch.cat(obs_buf), torch.cat(mask_buf), torch.cat(actions), torch.cat(logprobs),
                 advantages.reshape(-1), returns.reshape(-1))
        return batch, (next_obs, next_mask), rewards.sum().item() / max(dones.sum().item(), 1)

    def train(self, agent, envs, lr, total_timesteps):
        optimizer = torch.optim.Adam(agent.parameters(), lr=lr)
        reset = [env.reset() for env in envs]
        state = (torch.tensor(np.stack([r[0] for r in reset])), torch.tensor(np.stack([r[1] for r in reset])))
        for update in range(total_timesteps // (self.num_envs * self.num_steps)):
            batch, state, ep_return = self.collect_rollouts(agent, envs, state)
            b_obs, b_masks, b_actions, b_logprobs, b_advantages, b_returns = batch
            batch_size = b_logprobs.shape[0]
            b_inds = np.arange(batch_size)
            for epoch in range(self.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, self.minibatch_size):
                    mb_inds = b_inds[start:start + self.minibatch_size]
                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                        b_obs[mb_inds], action=b_actions[mb_inds], action_masks=b_masks[mb_inds])
                    ratio = (newlogprob - b_logprobs[mb_inds]).exp()
                    mb_advantages = b_advantages[mb_inds]
                    if self.norm_adv:
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                    pg_loss = torch.max(-mb_advantages * ratio,
                                        -mb_advantages * torch.clamp(ratio, 1 - self.clip_coef, 1 + self.clip_coef)).mean()
                    v_loss = nn.functional.mse_loss(newvalue.view(-1), b_returns[mb_inds])
                    loss = pg_loss - self.ent_coef * entropy.mean() + self.vf_coef * v_loss
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), self.max_grad_norm)
                    optimizer.step()
            print(f"update {update} mean episode return {ep_return:.3f} last loss {loss.item():.4f} "
                  f"value loss {v_loss.item():.4f}")


def main():
    torch.manual_seed(0)
    np.random.seed(0)
    n_jobs = 5
    envs = [FlowtimeEnv(n_jobs, seed=0)]
    agent = Agent(n_jobs)
    PPO(n_workers=1, n_steps_episode=25, n_epochs=4, batch_size=8).train(agent, envs, lr=3e-4, total_timesteps=25 * 6)


if __name__ == "__main__":
    main()
