"""An ACT-style action-chunking policy (CVAE: a style encoder over the action chunk, a decoder
that predicts the whole chunk from the robot state and the latent) trained with
L1 + kl_weight * KL on a LeRobot-style dataset of short teleoperated episodes. The dataset
clamps each chunk's query indices at the episode end and flags the repeated steps in
action_is_pad. The policy's forward() multiplies the per-element L1 by ~action_is_pad and then
takes a plain .mean(), so the zeroed padded steps still count in the denominator: with chunks
much longer than what remains of an episode, the reported L1 and its gradient are scaled down
by the valid fraction of each batch.

Thread: https://github.com/huggingface/lerobot/issues/3353
"""
import torch
import torch.nn.functional as F
from torch import nn

STATE_DIM, ACT_DIM, CHUNK, LATENT = 8, 4, 48, 8


class EpisodeDataset(torch.utils.data.Dataset):
    """Frames of short episodes; each item carries the next CHUNK actions of its episode."""

    def __init__(self, n_episodes=40, ep_len=40, seed=0):
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(STATE_DIM, ACT_DIM, generator=g) * 0.5
        states, actions, ep_index = [], [], []
        for ep in range(n_episodes):
            s = torch.randn(STATE_DIM, generator=g)
            for _ in range(ep_len):
                a = torch.tanh(s @ w) + 0.05 * torch.randn(ACT_DIM, generator=g)
                states.append(s.clone())
                actions.append(a)
                ep_index.append(ep)
                s = 0.9 * s + 0.3 * torch.cat([a, a]) + 0.05 * torch.randn(STATE_DIM, generator=g)
        self.state, self.action = torch.stack(states), torch.stack(actions)
        self.ep = torch.tensor(ep_index)
        self.ep_len = ep_len

    def __len__(self):
        return len(self.state)

    def __getitem__(self, idx):
        ep = int(self.ep[idx])
        ep_start, ep_end = ep * self.ep_len, (ep + 1) * self.ep_len
        query = [min(ep_end - 1, idx + d) for d in range(CHUNK)]
        is_pad = torch.tensor([idx + d >= ep_end for d in range(CHUNK)])
        return {"observation.state": self.state[idx], "action": self.action[query], "action_is_pad": is_pad}


class ACTPolicy(nn.Module):
    def __init__(self, dim=128, kl_weight=10.0):
        super().__init__()
        self.kl_weight = kl_weight
        self.vae_encoder = nn.Sequential(nn.Linear(STATE_DIM + CHUNK * ACT_DIM, dim), nn.ReLU(),
                                         nn.Linear(dim, 2 * LATENT))
        self.decoder = nn.Sequential(nn.Linear(STATE_DIM + LATENT, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(),
                                     nn.Linear(dim, CHUNK * ACT_DIM))

    def forward(self, batch):
        state, actions = batch["observation.state"], batch["action"]
        stats = self.vae_encoder(torch.cat([state, actions.flatten(1)], -1))
        mu, log_sigma_x2 = stats[:, :LATENT], stats[:, LATENT:]
        latent = mu + (0.5 * log_sigma_x2).exp() * torch.randn_like(mu)
        actions_hat = self.decoder(torch.cat([state, latent], -1)).view(-1, CHUNK, ACT_DIM)

        l1_loss = (F.l1_loss(actions, actions_hat, reduction="none")
                   * ~batch["action_is_pad"].unsqueeze(-1)).mean()
        mean_kld = (-0.5 * (1 + log_sigma_x2 - mu.pow(2) - log_sigma_x2.exp())).sum(-1).mean()
        loss = l1_loss + self.kl_weight * mean_kld
        return loss, {"l1_loss": l1_loss.item(), "kld_loss": mean_kld.item()}


def main():
    torch.manual_seed(0)
    dataset = EpisodeDataset()
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(0))
    policy = ACTPolicy()
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-4, weight_decay=1e-4)
    policy.train()
    step = 0
    while step < 150:
        for batch in loader:
            loss, info = policy.forward(batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % 10 == 0:
                print(f"step {step} loss {loss.item():.4f} l1 {info['l1_loss']:.4f} kld {info['kld_loss']:.4f}")
            if step >= 150:
                break


if __name__ == "__main__":
    main()
