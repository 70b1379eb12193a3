"""A SmolVLA-style flow-matching action-chunk policy wrapped in a Lightning-style policy class
(training_step calls model.compute_loss on an Observation batch) and driven by a small Trainer
fit() loop. The datamodule follows LeRobot: near the end of an episode the chunk's query indices
are clamped to the last frame, so the tail repeats the terminal action, and the clamped steps
are flagged in observation.extra["action_is_pad"]. compute_loss looks the mask up with
extra.get("actions_id_pad"), a key nothing emits, so it gets None, the masking branch never
runs, and the repeated terminal actions are trained on as real supervision (and counted in the
mean).

Thread: https://github.com/open-edge-platform/physical-ai-studio/pull/873
"""
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

STATE_DIM, ACT_DIM, CHUNK = 6, 3, 24


@dataclass
class Observation:
    state: torch.Tensor
    action: torch.Tensor
    extra: dict = field(default_factory=dict)


class ChunkedEpisodes(torch.utils.data.Dataset):
    def __init__(self, n_episodes=48, ep_len=30, seed=0):
        g = torch.Generator().manual_seed(seed)
        states, actions = [], []
        for _ in range(n_episodes):
            target = torch.rand(ACT_DIM, generator=g) * 2 - 1
            pos = torch.zeros(ACT_DIM)
            for t in range(ep_len):
                a = 0.25 * (target - pos) + 0.02 * torch.randn(ACT_DIM, generator=g)
                states.append(torch.cat([pos, target]))
                actions.append(a)
                pos = pos + a
        self.state, self.action, self.ep_len = torch.stack(states), torch.stack(actions), ep_len

    def __len__(self):
        return len(self.state)

    def __getitem__(self, idx):
        ep_end = (idx // self.ep_len + 1) * self.ep_len
        query = [min(ep_end - 1, idx + d) for d in range(CHUNK)]
        is_pad = torch.tensor([idx + d >= ep_end for d in range(CHUNK)])
        return self.state[idx], self.action[query], is_pad


def collate(items):
    state, action, is_pad = (torch.stack(x) for x in zip(*items))
    return Observation(state=state, action=action, extra={"action_is_pad": is_pad})


class SmolVLAModel(nn.Module):
    def __init__(self, dim=128):
        super().__init__()
        self.state_proj = nn.Linear(STATE_DIM, dim)
        self.action_in = nn.Linear(ACT_DIM, dim)
        self.time_mlp = nn.Sequential(nn.Linear(1, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.expert = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim), nn.SiLU())
        self.action_out = nn.Linear(dim, ACT_DIM)

    def velocity(self, state, x_t, time):
        h = self.action_in(x_t) + self.state_proj(state)[:, None] + self.time_mlp(time[:, None, None].expand(-1, CHUNK, 1))
        return self.action_out(self.expert(h))

    def compute_loss(self, batch: Observation):
        actions = batch.action
        noise = torch.randn_like(actions)
        time = torch.rand(actions.shape[0]) * 0.999 + 0.001
        x_t = time[:, None, None] * noise + (1 - time[:, None, None]) * actions
        u_t = noise - actions
        v_t = self.velocity(batch.state, x_t, time)
        losses = F.mse_loss(u_t, v_t, reduction="none")

        actions_is_pad = batch.extra.get("actions_id_pad")
        if actions_is_pad is not None:
            in_episode_bound = ~actions_is_pad
            losses = losses * in_episode_bound.unsqueeze(-1)
        return losses.mean()


class SmolVLAPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = SmolVLAModel()

    def training_step(self, batch, batch_idx):
        loss = self.model.compute_loss(batch)
        self.log("train/loss", loss, batch_idx)
        return loss

    def log(self, name, value, batch_idx):
        if batch_idx % 10 == 0:
            print(f"{name} {value.item():.4f}")

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=2.5e-4, weight_decay=1e-10)


class Trainer:
    def __init__(self, max_steps):
        self.max_steps = max_steps

    def fit(self, policy, loader):
        optimizer = policy.configure_optimizers()
        policy.train()
        step = 0
        while step < self.max_steps:
            for batch in loader:
                loss = policy.training_step(batch, step)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
                optimizer.step()
                step += 1
                if step >= self.max_steps:
                    return


def main():
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(ChunkedEpisodes(), batch_size=32, shuffle=True, drop_last=True,
                                         collate_fn=collate, generator=torch.Generator().manual_seed(0))
    Trainer(max_steps=150).fit(SmolVLAPolicy(), loader)


if __name__ == "__main__":
    main()
