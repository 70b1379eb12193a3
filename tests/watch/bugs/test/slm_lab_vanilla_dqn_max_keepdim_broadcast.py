"""A lab-style VanillaDQN agent on a cart-pole task: the algorithm class reads its settings from a
spec dict (epsilon-greedy with linear decay, gamma, training_frequency / training_iter /
training_batch_iter / training_start_step), builds an MLP Q-net with an Adam optimizer, a StepLR
scheduler and an MSELoss from the net spec, samples batches from a replay memory, and train() runs
training_iter x training_batch_iter calls of net.train_step(loss, optim, lr_scheduler). Vanilla DQN
has no target network: calc_q_loss evaluates the next states with the same net under no_grad. The
bootstrap takes next_q_preds.max(dim=-1, keepdim=True), a [B, 1] tensor, and adds it to the [B]
rewards, so max_q_targets is [B, B] and the MSELoss between the [B] action values and it broadcasts:
every Q prediction is regressed onto the targets of the whole batch.

Thread: https://github.com/kengz/SLM-Lab/pull/372
"""
import math

import numpy as np
import torch
from torch import nn


class CartPole:
    """Pole on a cart, push left or right; reward 1 per step until the pole falls or 200 steps."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.s.astype(np.float32)

    def step(self, action):
        x, x_dot, th, th_dot = self.s
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(th), math.sin(th)
        temp = (force + 0.05 * th_dot ** 2 * sin) / 1.1
        th_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * th_acc * cos / 1.1
        self.s = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, th + 0.02 * th_dot, th_dot + 0.02 * th_acc])
        self.t += 1
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.21 or self.t >= 200
        return self.s.astype(np.float32), 1.0, done


class Replay:
    def __init__(self, batch_size, max_size, seed):
        self.batch_size, self.max_size = batch_size, max_size
        self.rng = np.random.default_rng(seed)
        self.data = []

    def add(self, *transition):
        if len(self.data) >= self.max_size:
            self.data.pop(0)
        self.data.append(transition)

    def sample(self):
        idx = self.rng.integers(0, len(self.data), self.batch_size)
        cols = list(zip(*[self.data[i] for i in idx]))
        keys = ["states", "actions", "rewards", "next_states", "dones"]
        return {k: torch.tensor(np.array(c), dtype=torch.float32) for k, c in zip(keys, cols)}


class MLPNet(nn.Module):
    def __init__(self, net_spec, in_dim, out_dim):
        super().__init__()
        hid = net_spec["hid_layers"][0]
        self.model = nn.Sequential(nn.Linear(in_dim, hid), nn.ReLU(), nn.Linear(hid, out_dim))
        self.loss_fn = getattr(nn, net_spec["loss_spec"]["name"])()
        self.optim_spec, self.lr_scheduler_spec = net_spec["optim_spec"], net_spec["lr_scheduler_spec"]

    def forward(self, x):
        return self.model(x)

    def train_step(self, loss, optim, lr_scheduler, step_lr_sched):
        optim.zero_grad()
        loss.backward()
        optim.step()
        if step_lr_sched:
            lr_scheduler.step()
        return loss


class VanillaDQN:
    def __init__(self, agent_spec, state_dim, action_dim, seed):
        self.algorithm_spec, self.net_spec = agent_spec["algorithm"], agent_spec["net"]
        self.memory = Replay(**agent_spec["memory"], seed=seed)
        self.action_dim = action_dim
        self.rng = np.random.default_rng(seed + 1)
        self.init_algorithm_params()
        self.init_nets(state_dim, action_dim)
        self.to_train = 0

    def init_algorithm_params(self):
        for k in ["explore_var_spec", "gamma", "training_batch_iter", "training_iter", "training_frequency",
                  "training_start_step"]:
            setattr(self, k, self.algorithm_spec[k])
        self.explore_var = self.explore_var_spec["start_val"]

    def init_nets(self, in_dim, out_dim):
        self.net = MLPNet(self.net_spec, in_dim, out_dim)
        self.optim = getattr(torch.optim, self.net.optim_spec["name"])(self.net.parameters(), lr=self.net.optim_spec["lr"])
        spec = self.net.lr_scheduler_spec
        self.lr_scheduler = torch.optim.lr_scheduler.StepLR(self.optim, step_size=spec["step_size"], gamma=spec["gamma"])

    def act(self, state):
        if self.rng.random() < self.explore_var:
            return int(self.rng.integers(self.action_dim))
        with torch.no_grad():
            return int(self.net(torch.from_numpy(state)).argmax())

    def update_explore_var(self, frame):
        spec = self.explore_var_spec
        frac = min(1.0, max(0.0, (frame - spec["start_step"]) / (spec["end_step"] - spec["start_step"])))
        self.explore_var = spec["start_val"] + frac * (spec["end_val"] - spec["start_val"])

    def calc_q_loss(self, batch):
        q_preds = self.net(batch["states"])
        with torch.no_grad():
            next_q_preds = self.net(batch["next_states"])
        act_q_preds = q_preds.gather(-1, batch["actions"].long().unsqueeze(-1)).squeeze(-1)
        max_next_q_preds, _ = next_q_preds.max(dim=-1, keepdim=True)
        max_q_targets = batch["rewards"] + self.gamma * (1 - batch["dones"]) * max_next_q_preds
        return self.net.loss_fn(act_q_preds, max_q_targets)

    def train(self):
        if self.to_train != 1:
            return np.nan
        total_loss = torch.tensor(0.0)
        for i in range(self.training_iter):
            batch = self.memory.sample()
            for j in range(self.training_batch_iter):
                loss = self.calc_q_loss(batch)
                self.net.train_step(loss, self.optim, self.lr_scheduler, step_lr_sched=(i == 0 and j == 0))
                total_loss += loss.detach()
        self.to_train = 0
        return (total_loss / (self.training_iter * self.training_batch_iter)).item()


SPEC = {
    "algorithm": {"explore_var_spec": {"start_val": 1.0, "end_val": 0.1, "start_step": 0, "end_step": 2000},
                  "gamma": 0.99, "training_batch_iter": 3, "training_iter": 4, "training_frequency": 8,
                  "training_start_step": 32},
    "memory": {"batch_size": 32, "max_size": 10000},
    "net": {"hid_layers": [32], "loss_spec": {"name": "MSELoss"}, "optim_spec": {"name": "Adam", "lr": 0.02},
            "lr_scheduler_spec": {"step_size": 60, "gamma": 0.9}},
}


def main():
    torch.manual_seed(0)
    env = CartPole(seed=0)
    agent = VanillaDQN(SPEC, state_dim=4, action_dim=2, seed=0)
    state, ep_ret, returns = env.reset(), 0.0, []
    for frame in range(1, 641):
        action = agent.act(state)
        next_state, reward, done = env.step(action)
        agent.memory.add(state, action, reward, next_state, float(done))
        ep_ret += reward
        state = next_state
        if done:
            returns.append(ep_ret)
            state, ep_ret = env.reset(), 0.0
        agent.update_explore_var(frame)
        if frame >= agent.training_start_step and frame % agent.training_frequency == 0:
            agent.to_train = 1
        loss = agent.train()
        if frame % 160 == 0:
            print(f"frame {frame} epsilon {agent.explore_var:.2f} loss {loss:.4f} "
                  f"mean return (last 10) {np.mean(returns[-10:]):.1f}")


if __name__ == "__main__":
    main()
