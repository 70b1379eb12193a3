"""A LeRobot-style imitation-learning training script: an ACT-like chunking policy (MLP trunk
with Dropout layers, L1 loss on the action chunk) trained on teleoperated demonstrations of a
reaching task, with an eval_policy() helper that is called from the training loop every
eval_freq steps to run batched rollouts in a simulated environment. eval_policy() switches the
policy to eval() before the rollouts and returns without switching it back, so after the first
periodic evaluation every remaining training step runs with Dropout disabled.

Thread: https://github.com/huggingface/lerobot/issues/3668
"""
import torch
import torch.nn.functional as F
from torch import nn

CHUNK, STATE_DIM, ACT_DIM = 8, 6, 2


class ReachEnv:
    """Batched point-mass reaching: the state holds position, velocity and goal."""

    def __init__(self, num_envs, generator):
        self.n, self.g = num_envs, generator

    def reset(self):
        self.pos = torch.rand(self.n, 2, generator=self.g) * 2 - 1
        self.vel = torch.zeros(self.n, 2)
        self.goal = torch.rand(self.n, 2, generator=self.g) * 2 - 1
        return self.obs()

    def obs(self):
        return torch.cat([self.pos, self.vel, self.goal], -1)

    def step(self, action):
        self.vel = 0.7 * self.vel + 0.3 * action.clamp(-1, 1)
        self.pos = self.pos + 0.2 * self.vel
        dist = (self.pos - self.goal).norm(dim=-1)
        return self.obs(), -dist, dist < 0.1


def expert_chunk(state, noise, g):
    """Scripted teleoperator: a PD controller towards the goal, rolled forward CHUNK steps."""
    pos, vel, goal = state[:, :2].clone(), state[:, 2:4].clone(), state[:, 4:]
    acts = []
    for _ in range(CHUNK):
        a = (2.0 * (goal - pos) - 1.0 * vel + noise * torch.randn(pos.shape, generator=g)).clamp(-1, 1)
        acts.append(a)
        vel = 0.7 * vel + 0.3 * a
        pos = pos + 0.2 * vel
    return torch.stack(acts, 1)


class DemoDataset(torch.utils.data.Dataset):
    def __init__(self, n=256, seed=0):
        g = torch.Generator().manual_seed(seed)
        env = ReachEnv(n, g)
        self.state = env.reset() + 0.05 * torch.randn(n, STATE_DIM, generator=g)
        self.action = expert_chunk(self.state, noise=0.3, g=g)

    def __len__(self):
        return len(self.state)

    def __getitem__(self, i):
        return {"observation.state": self.state[i], "action": self.action[i]}


class ACTLikePolicy(nn.Module):
    def __init__(self, dim=256, dropout=0.1):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(STATE_DIM, dim), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(dim, dim), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(dim, dim), nn.ReLU(), nn.Dropout(dropout),
        )
        self.action_head = nn.Linear(dim, CHUNK * ACT_DIM)

    def predict_chunk(self, state):
        return self.action_head(self.trunk(state)).view(-1, CHUNK, ACT_DIM)

    def forward(self, batch):
        actions_hat = self.predict_chunk(batch["observation.state"])
        l1_loss = F.l1_loss(actions_hat, batch["action"])
        return l1_loss, {"l1_loss": l1_loss.item()}

    @torch.no_grad()
    def select_action(self, state):
        return self.predict_chunk(state)[:, 0]


def rollout(env, policy, max_steps=30):
    obs = env.reset()
    done = torch.zeros(env.n, dtype=torch.bool)
    for _ in range(max_steps):
        with torch.inference_mode():
            action = policy.select_action(obs)
        obs, reward, success = env.step(action)
        done |= success
    return done.float().mean().item()


def eval_policy(env, policy, n_batches=2):
    policy.eval()
    successes = [rollout(env, policy) for _ in range(n_batches)]
    return {"pc_success": 100 * sum(successes) / len(successes)}


def train(steps=150, batch_size=32, eval_freq=20, seed=0):
    torch.manual_seed(seed)
    dataset = DemoDataset(seed=seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(seed))
    eval_env = ReachEnv(16, torch.Generator().manual_seed(seed + 1))
    policy = ACTLikePolicy()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3, weight_decay=1e-4)
    policy.train()
    dl_iter = iter(loader)
    for step in range(1, steps + 1):
        try:
            batch = next(dl_iter)
        except StopIteration:
            dl_iter = iter(loader)
            batch = next(dl_iter)
        loss, output_dict = policy.forward(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
        optimizer.step()
        optimizer.zero_grad()
        if step % 10 == 0:
            print(f"step {step} l1 {output_dict['l1_loss']:.4f}")
        if step % eval_freq == 0:
            info = eval_policy(eval_env, policy)
            print(f"step {step} eval pc_success {info['pc_success']:.1f}")


if __name__ == "__main__":
    train()
