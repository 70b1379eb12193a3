"""A multi-objective RL agent in the style of a MORL baselines library (GPI-LS, the model-free
GPI-PD): a QNet conditioned on the preference weight vector w (state features times weight features,
then an MLP whose hidden layers are Linear -> Dropout -> LayerNorm -> ReLU, DroQ-style) outputs a
vector Q-value per action; the agent keeps an ensemble of two such nets with target copies, a replay
buffer, epsilon-greedy _act() through gpi_action() over the current weight support, and update()
with the min-over-ensemble target of the max scalarised next action; train() runs iterations, each
picking the next weight, calling train_iteration() for a fixed number of env steps and then scoring
every weight of the support with policy_evaluation_mo(agent, eval_env, w, rep), whose episodes call
agent.eval(obs, w) for each action; the resulting value vectors are added to the linear-support set
and a mean utility over evaluation weights is logged. The bug: eval() (and gpi_action under
torch.no_grad()) never puts the Q-nets in eval mode, so the dropout layers stay active while the
policy is being evaluated: the greedy evaluation policy is randomly perturbed, repeated episodes of a
deterministic environment give different returns, and the values fed to the linear support (and the
logged utility) are those of a noisier policy than the one learned.

Thread: https://github.com/LucasAlegre/morl-baselines/pull/90
"""
import random

import numpy as np
import torch as th
import torch.nn as nn

N_POS, START, HORIZON = 11, 5, 20
LEFT, RIGHT, COLLECT = 0, 1, 2


class CorridorTreasure:
    """Deterministic 2-objective corridor: far-left treasure, far-right treasure, or a small shared one."""

    def __init__(self):
        self.reward_dim, self.action_dim = 2, 3
        self.pos, self.t = START, 0

    def _obs(self):
        o = np.zeros(N_POS, dtype=np.float32)
        o[self.pos] = 1.0
        return o

    def reset(self):
        self.pos, self.t = START, 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        r = np.zeros(2, dtype=np.float32)
        terminated = False
        if action == COLLECT:
            if self.pos == START:
                r[:] = 0.45
                terminated = True
        else:
            self.pos = min(max(self.pos + (1 if action == RIGHT else -1), 0), N_POS - 1)
            if self.pos == 0:
                r[:] = (1.0, 0.1)
                terminated = True
            elif self.pos == N_POS - 1:
                r[:] = (0.1, 1.0)
                terminated = True
        return self._obs(), r, terminated, self.t >= HORIZON, {}


def mlp(input_dim, output_dim, net_arch, drop_rate=0.0, layer_norm=False):
    modules, last = [], input_dim
    for units in net_arch:
        modules.append(nn.Linear(last, units))
        if drop_rate > 0.0:
            modules.append(nn.Dropout(p=drop_rate))
        if layer_norm:
            modules.append(nn.LayerNorm(units))
        modules.append(nn.ReLU())
        last = units
    if output_dim > 0:
        modules.append(nn.Linear(last, output_dim))
    return nn.Sequential(*modules)


class QNet(nn.Module):
    def __init__(self, obs_dim, action_dim, rew_dim, net_arch, drop_rate=0.01, layer_norm=True):
        super().__init__()
        self.action_dim, self.phi_dim = action_dim, rew_dim
        self.weights_features = mlp(rew_dim, -1, net_arch[:1])
        self.state_features = mlp(obs_dim, -1, net_arch[:1])
        self.net = mlp(net_arch[0], action_dim * rew_dim, net_arch[1:], drop_rate=drop_rate, layer_norm=layer_norm)

    def forward(self, obs, w):
        q_values = self.net(self.state_features(obs) * self.weights_features(w))
        return q_values.view(-1, self.action_dim, self.phi_dim)


class ReplayBuffer:
    def __init__(self, obs_dim, rew_dim, size):
        self.obs = np.zeros((size, obs_dim), np.float32)
        self.next_obs = np.zeros((size, obs_dim), np.float32)
        self.actions = np.zeros((size, 1), np.int64)
        self.rewards = np.zeros((size, rew_dim), np.float32)
        self.dones = np.zeros((size, 1), np.float32)
        self.ptr, self.size, self.max_size = 0, 0, size

    def add(self, obs, action, reward, next_obs, done):
        i = self.ptr
        self.obs[i], self.actions[i], self.rewards[i], self.next_obs[i], self.dones[i] = obs, action, reward, next_obs, done
        self.ptr, self.size = (i + 1) % self.max_size, min(self.size + 1, self.max_size)

    def sample(self, batch_size, rng):
        idx = rng.integers(0, self.size, batch_size)
        return tuple(th.as_tensor(a[idx]) for a in (self.obs, self.actions, self.rewards, self.next_obs, self.dones))


class GPILS:
    def __init__(self, env, learning_rate=1e-3, epsilon=0.1, net_arch=(64, 64, 64), num_nets=2, batch_size=64,
                 learning_starts=100, gamma=0.9, tau=0.05, drop_rate=0.05, layer_norm=True, seed=0):
        self.env, self.gamma, self.tau, self.epsilon = env, gamma, tau, epsilon
        self.batch_size, self.learning_starts = batch_size, learning_starts
        self.reward_dim, self.action_dim = env.reward_dim, env.action_dim
        self.np_random = np.random.default_rng(seed)
        make = lambda: QNet(N_POS, self.action_dim, self.reward_dim, list(net_arch), drop_rate, layer_norm)
        self.q_nets = [make() for _ in range(num_nets)]
        self.target_q_nets = [make() for _ in range(num_nets)]
        for q, t in zip(self.q_nets, self.target_q_nets):
            t.load_state_dict(q.state_dict())
            t.requires_grad_(False)
        self.q_optim = th.optim.Adam([p for q in self.q_nets for p in q.parameters()], lr=learning_rate)
        self.replay_buffer = ReplayBuffer(N_POS, self.reward_dim, 20000)
        self.weight_support, self.global_step = [], 0

    def set_weight_support(self, weight_list):
        self.weight_support = [th.tensor(w).float() for w in weight_list]

    def update(self, weight):
        s_obs, s_actions, s_rewards, s_next_obs, s_dones = self.replay_buffer.sample(self.batch_size, self.np_random)
        half = self.batch_size // 2  # half the batch with the current weight, half from the support
        w = th.vstack([weight.repeat(half, 1)] + random.choices(self.weight_support, k=self.batch_size - half))
        with th.no_grad():
            next_q = th.stack([t(s_next_obs, w) for t in self.target_q_nets])
            scal = th.einsum("nbar,br->nba", next_q, w)
            min_inds = th.argmin(scal, dim=0)[None, :, :, None].expand(1, *next_q.shape[1:])
            next_q = next_q.gather(0, min_inds).squeeze(0)
            max_acts = th.einsum("br,bar->ba", w, next_q).argmax(1)
            target_q = next_q[th.arange(self.batch_size), max_acts]
            target_q = s_rewards + (1 - s_dones) * self.gamma * target_q
        losses = []
        for q_net in self.q_nets:
            q_value = q_net(s_obs, w).gather(1, s_actions[:, :, None].expand(-1, 1, self.reward_dim)).squeeze(1)
            losses.append(((q_value - target_q) ** 2).mean())
        self.q_optim.zero_grad()
        sum(losses).backward()
        self.q_optim.step()
        with th.no_grad():
            for q, t in zip(self.q_nets, self.target_q_nets):
                for p, tp in zip(q.parameters(), t.parameters()):
                    tp.mul_(1 - self.tau).add_(self.tau * p)
        return sum(loss.item() for loss in losses) / len(losses)

    @th.no_grad()
    def gpi_action(self, obs, w):
        M = th.stack(self.weight_support)
        q_values = self.q_nets[0](obs.repeat(M.size(0), 1), M)
        max_q, a = th.max(th.einsum("r,bar->ba", w, q_values), dim=1)
        return a[th.argmax(max_q)].item()

    @th.no_grad()
    def eval(self, obs, w):
        """Select an action for the given obs and weight vector."""
        return self.gpi_action(th.as_tensor(obs).float(), th.as_tensor(w).float())

    def _act(self, obs, w):
        if self.np_random.random() < self.epsilon:
            return int(self.np_random.integers(self.action_dim))
        return self.gpi_action(obs, w)

    def train_iteration(self, total_timesteps, weight, weight_support):
        self.set_weight_support(weight_support)
        tensor_w = th.tensor(weight).float()
        obs, _ = self.env.reset()
        losses = []
        for _ in range(total_timesteps):
            self.global_step += 1
            if self.global_step < self.learning_starts:
                action = int(self.np_random.integers(self.action_dim))
            else:
                action = self._act(th.as_tensor(obs), tensor_w)
            next_obs, vec_reward, terminated, truncated, _ = self.env.step(action)
            self.replay_buffer.add(obs, action, vec_reward, next_obs, terminated)
            if self.global_step >= self.learning_starts:
                losses.append(self.update(tensor_w))
            if terminated or truncated:
                obs, _ = self.env.reset()
                weight = random.choice(weight_support)  # change w every episode
                tensor_w = th.tensor(weight).float()
            else:
                obs = next_obs
        return float(np.mean(losses)) if losses else float("nan")

    def train(self, eval_env, iterations, timesteps_per_iter, eval_weights, rep=5):
        solutions = []  # linear support: (w, value vector)
        schedule = [np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([0.5, 0.5])]
        for it in range(iterations):
            w = schedule[it % len(schedule)]
            support = [s for s in schedule[:it] if not np.array_equal(s, w)] + [w]
            loss = self.train_iteration(timesteps_per_iter, w, support)
            print(f"iteration {it} weight {w} critic loss {loss:.4f}")
            self.set_weight_support(support)
            for wcw in support:
                value = policy_evaluation_mo(self, eval_env, wcw, rep=rep)
                solutions.append((wcw, value[3]))
                print(f"  w={wcw} scalarized disc. return {value[1]:.4f} (episode std {value[4]:.4f}) vec {value[3]}")
            utility = np.mean([policy_evaluation_mo(self, eval_env, ew, rep=rep)[1] for ew in eval_weights])
            print(f"  eval/Mean Utility - GPI {utility:.4f}")
        return solutions


def eval_mo(agent, env, w):
    obs, _ = env.reset()
    done = False
    vec_return, disc_vec_return, gamma = np.zeros_like(w), np.zeros_like(w), 1.0
    while not done:
        obs, r, terminated, truncated, _ = env.step(agent.eval(obs, w))
        done = terminated or truncated
        vec_return += r
        disc_vec_return += gamma * r
        gamma *= agent.gamma
    return float(np.dot(w, vec_return)), float(np.dot(w, disc_vec_return)), vec_return, disc_vec_return


def policy_evaluation_mo(agent, env, w, rep=5):
    evals = [eval_mo(agent, env, w) for _ in range(rep)]
    disc = [e[1] for e in evals]
    return (float(np.mean([e[0] for e in evals])), float(np.mean(disc)), np.mean([e[2] for e in evals], 0),
            np.mean([e[3] for e in evals], 0), float(np.std(disc)))


def main():
    th.manual_seed(0)
    random.seed(0)
    env, eval_env = CorridorTreasure(), CorridorTreasure()
    agent = GPILS(env, seed=0)
    eval_weights = [np.array([a, 1.0 - a]) for a in np.linspace(0, 1, 11)]
    agent.train(eval_env, iterations=3, timesteps_per_iter=700, eval_weights=eval_weights, rep=5)


if __name__ == "__main__":
    main()
