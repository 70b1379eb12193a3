"""A DQN agent in the style of a stable RL baselines library: a DQNPolicy module owns q_net and
q_net_target (the same MLP class, here with Dropout and BatchNorm1d layers in a custom features
extractor) plus the optimizer; set_training_mode(mode) calls self.train(mode) on the whole policy;
the DQN algorithm object has learn(total_timesteps) that alternates collect_rollouts() (epsilon-
greedy actions from the policy in eval mode, stored in a replay buffer), train(gradient_steps,
batch_size) and _on_step() (hard target update every target_update_interval calls). train() first
calls self.policy.set_training_mode(True), then for each gradient step computes the TD target with
q_net_target under torch.no_grad(), gathers the current Q-values of the taken actions, applies
smooth L1 loss, clips the gradient norm and steps the optimizer. The bug: set_training_mode(True)
recurses into q_net_target as well, so the target network computes the bootstrap targets with
dropout active and BatchNorm in batch-statistics mode (and updates its running statistics), giving
noisy, batch-dependent targets; the target network should stay in eval mode throughout.

Thread: https://github.com/DLR-RM/stable-baselines3/pull/553
"""
import numpy as np
import torch as th
import torch.nn.functional as F
from torch import nn

N_STATES, N_ACTIONS = 12, 3


class ChainEnv:
    """Noisy chain: action 2 moves right, 0 moves left, 1 stays; reward at the right end."""

    def __init__(self, rng):
        self.rng = rng

    def _obs(self):
        o = self.rng.normal(0.0, 0.1, N_STATES).astype(np.float32)
        o[self.pos] += 1.0
        return o

    def reset(self):
        self.pos, self.t = 0, 0
        return self._obs()

    def step(self, a):
        self.t += 1
        self.pos = int(np.clip(self.pos + (a - 1), 0, N_STATES - 1))
        done = self.pos == N_STATES - 1
        rew = 1.0 if done else -0.01
        return self._obs(), rew, done or self.t >= 40


class QNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.features_extractor = nn.Sequential(nn.Linear(N_STATES, 64), nn.BatchNorm1d(64), nn.ReLU(),
                                                nn.Dropout(0.2))
        self.q_net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, N_ACTIONS))

    def forward(self, obs):
        return self.q_net(self.features_extractor(obs))


class DQNPolicy(nn.Module):
    def __init__(self, lr):
        super().__init__()
        self.q_net, self.q_net_target = QNetwork(), QNetwork()
        self.q_net_target.load_state_dict(self.q_net.state_dict())
        self.q_net_target.requires_grad_(False)
        self.optimizer = th.optim.Adam(self.q_net.parameters(), lr=lr)

    def set_training_mode(self, mode):
        self.train(mode)

    def predict(self, obs):
        with th.no_grad():
            return int(self.q_net(th.as_tensor(obs)[None]).argmax(1))


class ReplayBuffer:
    def __init__(self, size):
        self.obs = np.zeros((size, N_STATES), np.float32)
        self.next_obs = np.zeros((size, N_STATES), np.float32)
        self.act = np.zeros((size, 1), np.int64)
        self.rew = np.zeros((size, 1), np.float32)
        self.done = np.zeros((size, 1), np.float32)
        self.pos, self.full, self.size = 0, False, size

    def add(self, o, no, a, r, d):
        self.obs[self.pos], self.next_obs[self.pos], self.act[self.pos] = o, no, a
        self.rew[self.pos], self.done[self.pos] = r, d
        self.pos = (self.pos + 1) % self.size
        self.full = self.full or self.pos == 0

    def sample(self, batch_size, rng):
        idx = rng.integers(0, self.size if self.full else self.pos, batch_size)
        return [th.as_tensor(x[idx]) for x in (self.obs, self.act, self.next_obs, self.done, self.rew)]


class DQN:
    def __init__(self, env, eval_env, learning_rate=1e-3, buffer_size=5000, learning_starts=200, batch_size=64,
                 gamma=0.95, train_freq=4, gradient_steps=1, target_update_interval=100, seed=0):
        self.env, self.eval_env, self.gamma = env, eval_env, gamma
        self.batch_size, self.learning_starts, self.train_freq = batch_size, learning_starts, train_freq
        self.gradient_steps, self.target_update_interval = gradient_steps, target_update_interval
        self.rng = np.random.default_rng(seed)
        self.policy = DQNPolicy(learning_rate)
        self.replay_buffer = ReplayBuffer(buffer_size)
        self.num_timesteps, self._n_calls, self._n_updates = 0, 0, 0
        self.losses = []

    def exploration_rate(self, total):
        return max(0.05, 1.0 - self.num_timesteps / (0.5 * total))

    def _on_step(self):
        self._n_calls += 1
        if self._n_calls % self.target_update_interval == 0:
            self.policy.q_net_target.load_state_dict(self.policy.q_net.state_dict())

    def collect_rollouts(self, n_steps, total):
        self.policy.set_training_mode(False)
        for _ in range(n_steps):
            if self.rng.random() < self.exploration_rate(total):
                a = int(self.rng.integers(N_ACTIONS))
            else:
                a = self.policy.predict(self._last_obs)
            nxt, r, done = self.env.step(a)
            self.replay_buffer.add(self._last_obs, nxt, a, r, float(done and self.env.pos == N_STATES - 1))
            self._last_obs = self.env.reset() if done else nxt
            self.num_timesteps += 1
            self._on_step()

    def train(self, gradient_steps, batch_size):
        self.policy.set_training_mode(True)
        for _ in range(gradient_steps):
            obs, act, next_obs, dones, rew = self.replay_buffer.sample(batch_size, self.rng)
            with th.no_grad():
                next_q_values = self.policy.q_net_target(next_obs).max(dim=1, keepdim=True).values
                target_q_values = rew + (1 - dones) * self.gamma * next_q_values
            current_q_values = th.gather(self.policy.q_net(obs), dim=1, index=act)
            loss = F.smooth_l1_loss(current_q_values, target_q_values)
            self.losses.append(loss.item())
            self.policy.optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(self.policy.q_net.parameters(), 10.0)
            self.policy.optimizer.step()
            self._n_updates += 1

    def evaluate(self, n_episodes=5):
        self.policy.set_training_mode(False)
        returns = []
        for _ in range(n_episodes):
            o, done, ret = self.eval_env.reset(), False, 0.0
            while not done:
                o, r, done = self.eval_env.step(self.policy.predict(o))
                ret += r
            returns.append(ret)
        return float(np.mean(returns))

    def learn(self, total_timesteps, log_interval=1000):
        self._last_obs = self.env.reset()
        while self.num_timesteps < total_timesteps:
            self.collect_rollouts(self.train_freq, total_timesteps)
            if self.num_timesteps > self.learning_starts:
                self.train(self.gradient_steps, self.batch_size)
            if self.num_timesteps % log_interval == 0:
                print(f"timesteps {self.num_timesteps} updates {self._n_updates} "
                      f"loss {np.mean(self.losses[-100:]):.4f} eval return {self.evaluate():.3f}")


def main():
    th.manual_seed(0)
    model = DQN(ChainEnv(np.random.default_rng(0)), ChainEnv(np.random.default_rng(1)))
    model.learn(total_timesteps=4000)


if __name__ == "__main__":
    main()
