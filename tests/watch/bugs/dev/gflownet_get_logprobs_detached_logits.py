"""A GFlowNet agent trained with the trajectory-balance loss on a small 2-D hypergrid: the agent
holds a forward policy (an MLP over a one-hot encoding of the state), a fixed uniform backward
policy and a learnable logZ vector; make_opt() builds Adam over the policy parameters and adds logZ
as a second parameter group with a larger learning rate; train() samples a batch of forward
trajectories (env.sample_actions_batch on detached logits), computes the loss from the log
probabilities of the trajectories (env.get_logprobs on the policy outputs and the actions), then
backward, step, scheduler step and zero_grad. The environment's get_logprobs starts from
policy_outputs.clone().detach(), so the forward log probabilities carry no graph back to the policy:
the loss only moves logZ and the policy MLP never receives a gradient.

Thread: https://github.com/alexhernandezgarcia/gflownet/pull/251
"""
import torch
from torch import nn


class Grid:
    def __init__(self, n_dim=2, length=6):
        self.n_dim, self.length = n_dim, length
        self.action_space = [(d,) for d in range(n_dim)] + [(-1,)]  # increment one dimension, or stop
        self.eos = len(self.action_space) - 1
        self.logsoftmax = nn.LogSoftmax(dim=1)

    def state2policy(self, states):
        x = torch.zeros(len(states), self.n_dim * self.length)
        for i, s in enumerate(states):
            for d, v in enumerate(s):
                x[i, d * self.length + v] = 1.0
        return x

    def mask_forward(self, state):
        return torch.tensor([state[d] >= self.length - 1 for d in range(self.n_dim)] + [False])

    def mask_backward(self, state, action_idx):
        if action_idx == self.eos:  # the only parent of a terminal state is the same state before stopping
            return torch.tensor([True] * self.n_dim + [False])
        return torch.tensor([state[d] == 0 for d in range(self.n_dim)] + [True])

    def reward(self, state):
        x = torch.tensor(state, dtype=torch.float32) / (self.length - 1) * 2 - 1
        corner = ((x.abs() > 0.5) & (x.abs() <= 1)).all().float()
        ring = ((x.abs() > 0.6) & (x.abs() < 0.8)).all().float()
        return 1e-3 + 0.5 * corner + 2.0 * ring

    def sample_actions_batch(self, policy_outputs, mask):
        logits = policy_outputs.clone().detach()
        logits[mask] = -torch.inf
        return torch.distributions.Categorical(logits=logits).sample()

    def get_logprobs(self, policy_outputs, actions, mask):
        ns_range = torch.arange(policy_outputs.shape[0])
        logits = policy_outputs.clone().detach()
        if mask is not None:
            logits[mask] = -torch.inf
        return self.logsoftmax(logits)[ns_range, actions]


class GFlowNetAgent(nn.Module):
    def __init__(self, env, optimizer_config, n_hid=128, batch_size=10, n_train_steps=100):
        super().__init__()
        self.env, self.batch_size, self.n_train_steps = env, batch_size, n_train_steps
        in_dim, out_dim = env.n_dim * env.length, len(env.action_space)
        self.forward_policy = nn.Sequential(nn.Linear(in_dim, n_hid), nn.LeakyReLU(), nn.Linear(n_hid, n_hid),
                                            nn.LeakyReLU(), nn.Linear(n_hid, out_dim))
        self.logZ = nn.Parameter(torch.ones(optimizer_config["z_dim"]) * 150.0 / 64)
        self.opt, self.lr_scheduler = make_opt(list(self.forward_policy.parameters()), self.logZ, optimizer_config)

    def backward_policy(self, states_policy):
        return torch.ones(states_policy.shape[0], len(self.env.action_space))

    def sample_batch(self):
        trajectories = []
        for _ in range(self.batch_size):
            state, done, traj = [0] * self.env.n_dim, False, []
            while not done:
                with torch.no_grad():
                    out = self.forward_policy(self.env.state2policy([state]))
                mask = self.env.mask_forward(state).unsqueeze(0)
                a = int(self.env.sample_actions_batch(out, mask)[0])
                parent = list(state)
                if a == self.env.eos:
                    done = True
                else:
                    state = list(state)
                    state[a] += 1
                traj.append((parent, a, state))
            trajectories.append(traj)
        return trajectories

    def compute_logprobs_trajectories(self, batch, backward=False):
        parents, actions, states, traj_idx = [], [], [], []
        for i, traj in enumerate(batch):
            for parent, a, state in traj:
                parents.append(parent), actions.append(a), states.append(state), traj_idx.append(i)
        actions, traj_idx = torch.tensor(actions), torch.tensor(traj_idx)
        if backward:
            masks = torch.stack([self.env.mask_backward(s, int(a)) for s, a in zip(states, actions)])
            out = self.backward_policy(self.env.state2policy(states))
        else:
            masks = torch.stack([self.env.mask_forward(p) for p in parents])
            out = self.forward_policy(self.env.state2policy(parents))
        logprobs_states = self.env.get_logprobs(out, actions, masks)
        return torch.zeros(len(batch)).index_add_(0, traj_idx, logprobs_states)

    def trajectorybalance_loss(self, batch):
        logprobs_f = self.compute_logprobs_trajectories(batch, backward=False)
        logprobs_b = self.compute_logprobs_trajectories(batch, backward=True)
        rewards = torch.stack([self.env.reward(traj[-1][2]) for traj in batch])
        return (self.logZ.sum() + logprobs_f - logprobs_b - torch.log(rewards)).pow(2).mean()

    def fit(self):
        for it in range(1, self.n_train_steps + 1):
            batch = self.sample_batch()
            loss = self.trajectorybalance_loss(batch)
            loss.backward()
            self.opt.step()
            self.lr_scheduler.step()
            self.opt.zero_grad()
            if it % 20 == 0:
                mean_r = torch.stack([self.env.reward(t[-1][2]) for t in batch]).mean()
                print(f"it {it} loss {loss.item():.3f} logZ {self.logZ.sum().item():.3f} mean reward {mean_r:.3f}")


def make_opt(params, logZ, config):
    opt = torch.optim.Adam(params, config["lr"], betas=(config["adam_beta1"], config["adam_beta2"]))
    if logZ is not None:
        opt.add_param_group({"params": logZ, "lr": config["lr"] * config["lr_z_mult"]})
    lr_scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=config["lr_decay_period"],
                                                   gamma=config["lr_decay_gamma"])
    return opt, lr_scheduler


def main():
    torch.manual_seed(0)
    config = {"lr": 1e-4, "lr_z_mult": 10, "z_dim": 16, "adam_beta1": 0.9, "adam_beta2": 0.999,
              "lr_decay_period": 1000000, "lr_decay_gamma": 0.5}
    agent = GFlowNetAgent(Grid(), config, n_train_steps=100)
    agent.fit()


if __name__ == "__main__":
    main()
