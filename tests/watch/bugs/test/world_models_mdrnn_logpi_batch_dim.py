"""A world-model MDN-RNN: an LSTM over (latent, action) sequences whose head emits the means,
sigmas and mixture logits of a Gaussian mixture over the next latent, trained through a
gmm_loss() function by a data_pass(epoch, train) routine. The head reshapes the mixture logits to
(seq_len, batch, gaussians) and takes log_softmax over dim=-2, the batch axis, so each "mixture"
is normalised across the samples of the batch instead of across its own components.

Thread: https://github.com/ctallec/world-models/issues/10
"""
import math

import torch
import torch.nn.functional as f
from torch import nn


def gmm_loss(batch, mus, sigmas, logpi, reduce=True):
    batch = batch.unsqueeze(-2)
    normal_dist = torch.distributions.Normal(mus, sigmas)
    g_log_probs = normal_dist.log_prob(batch)
    g_log_probs = logpi + torch.sum(g_log_probs, dim=-1)
    log_prob = torch.logsumexp(g_log_probs, dim=-1)
    if reduce:
        return -torch.mean(log_prob)
    return -log_prob


class MDRNN(nn.Module):
    def __init__(self, latents, actions, hiddens, gaussians):
        super().__init__()
        self.latents, self.gaussians = latents, gaussians
        self.rnn = nn.LSTM(latents + actions, hiddens)
        self.gmm_linear = nn.Linear(hiddens, (2 * latents + 1) * gaussians)

    def forward(self, actions, latents):
        seq_len, bs = actions.size(0), actions.size(1)
        outs, _ = self.rnn(torch.cat([actions, latents], dim=-1))
        gmm_outs = self.gmm_linear(outs)
        stride = self.gaussians * self.latents
        mus = gmm_outs[:, :, :stride].view(seq_len, bs, self.gaussians, self.latents)
        sigmas = torch.exp(gmm_outs[:, :, stride:2 * stride]).view(seq_len, bs, self.gaussians, self.latents)
        pi = gmm_outs[:, :, 2 * stride:2 * stride + self.gaussians].view(seq_len, bs, self.gaussians)
        logpi = f.log_softmax(pi, dim=-2)
        return mus, sigmas, logpi


def rollouts(n, seq_len=16, latents=8, actions=3, seed=0):
    """Latent dynamics with two regimes picked by the action: a two-component mixture per step."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(actions, latents, generator=torch.Generator().manual_seed(4)) * 0.8
    act = torch.randn(seq_len, n, actions, generator=g)
    z = torch.zeros(seq_len + 1, n, latents)
    z[0] = torch.randn(n, latents, generator=g)
    for t in range(seq_len):
        branch = (torch.rand(n, 1, generator=g) < 0.5).float() * 2 - 1
        z[t + 1] = 0.7 * z[t] + branch * (act[t] @ A) + 0.1 * torch.randn(n, latents, generator=g)
    return act, z[:-1], z[1:]


def main():
    torch.manual_seed(0)
    mdrnn = MDRNN(latents=8, actions=3, hiddens=64, gaussians=5)
    optimizer = torch.optim.RMSprop(mdrnn.parameters(), lr=1e-3, alpha=0.9)
    train_data = rollouts(512, seed=0)
    test_data = rollouts(128, seed=1)
    batch_size = 32

    def data_pass(epoch, train):
        mdrnn.train() if train else mdrnn.eval()
        actions, latent_obs, next_latent_obs = train_data if train else test_data
        n = actions.size(1)
        cum_loss, batches = 0.0, 0
        for start in range(0, n, batch_size):
            a = actions[:, start:start + batch_size]
            obs, next_obs = latent_obs[:, start:start + batch_size], next_latent_obs[:, start:start + batch_size]
            if train:
                mus, sigmas, logpi = mdrnn(a, obs)
                loss = gmm_loss(next_obs, mus, sigmas, logpi) / 8
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            else:
                with torch.no_grad():
                    mus, sigmas, logpi = mdrnn(a, obs)
                    loss = gmm_loss(next_obs, mus, sigmas, logpi) / 8
            cum_loss += loss.item()
            batches += 1
        mix_mass = logpi.exp().sum(dim=-1).mean().item()
        print(f"{'Train' if train else 'Test'} epoch {epoch}: gmm loss per latent {cum_loss / batches:.4f} "
              f"(mixture weight mass per sample {mix_mass:.3f}, 1.0 for a proper mixture; "
              f"log(batch)={math.log(batch_size):.2f})")

    for epoch in range(4):
        data_pass(epoch, train=True)
        data_pass(epoch, train=False)


if __name__ == "__main__":
    main()
