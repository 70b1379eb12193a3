"""A Lightning-style REINFORCE module for a small routing problem (random 2-D tours): an attention
policy decodes a tour node by node and returns the reward (minus tour length) and the trajectory's
log-likelihood; the base module's configure_optimizers(parameters=None) builds Adam from
self.policy.parameters(); the REINFORCE subclass takes a baseline object, and the A2C subclass
passes a CriticBaseline wrapping a critic network, whose eval() returns the detached value as the
baseline and the critic's MSE as an extra loss term added to the REINFORCE loss. The critic lives in
the baseline, not in the policy, so its parameters are never handed to the optimizer: the critic
gets gradients from the MSE term on every step and stays at its initial weights, and the advantage
is computed against an untrained value estimate.

Thread: https://github.com/ai4co/rl4co/pull/186
"""
import torch
import torch.nn.functional as F
from torch import nn


def tour_length(locs, tour):
    ordered = locs.gather(1, tour.unsqueeze(-1).expand(-1, -1, 2))
    return (ordered - ordered.roll(-1, dims=1)).norm(dim=-1).sum(1)


class AttentionPolicy(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.init_embedding = nn.Linear(2, dim)
        self.encoder = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True)
        self.query = nn.Linear(2 * dim, dim)

    def forward(self, locs, decode_type="sampling"):
        h = self.encoder(self.init_embedding(locs))
        B, N, _ = h.shape
        graph = h.mean(1)
        visited = torch.zeros(B, N, dtype=torch.bool)
        current = torch.zeros(B, dtype=torch.long)
        visited[torch.arange(B), current] = True
        tour, logps = [current], []
        for _ in range(N - 1):
            q = self.query(torch.cat([graph, h[torch.arange(B), current]], -1))
            logits = 10 * torch.tanh((h @ q.unsqueeze(-1)).squeeze(-1) / h.shape[-1] ** 0.5)
            logp = F.log_softmax(logits.masked_fill(visited, float("-inf")), -1)
            current = logp.exp().multinomial(1).squeeze(1) if decode_type == "sampling" else logp.argmax(-1)
            logps.append(logp.gather(1, current.unsqueeze(1)).squeeze(1))
            visited = visited.clone()
            visited[torch.arange(B), current] = True
            tour.append(current)
        tour = torch.stack(tour, 1)
        return {"reward": -tour_length(locs, tour), "log_likelihood": torch.stack(logps, 1).sum(1)}


class CriticNetwork(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Linear(2, dim)
        self.value_head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 1))

    def forward(self, locs):
        return self.value_head(torch.relu(self.embed(locs)).mean(1))


class CriticBaseline(nn.Module):
    def __init__(self, critic):
        super().__init__()
        self.critic = critic

    def eval(self, x, c):
        v = self.critic(x).squeeze(-1)
        return v.detach(), F.mse_loss(v, c.detach())


class RL4COLitModule(nn.Module):
    def __init__(self, policy, lr=1e-3):
        super().__init__()
        self.policy, self.lr = policy, lr

    def configure_optimizers(self, parameters=None):
        if parameters is None:
            parameters = self.policy.parameters()
        return torch.optim.Adam(parameters, lr=self.lr)

    def training_step(self, batch, batch_idx):
        return self.shared_step(batch, batch_idx, phase="train")


class REINFORCE(RL4COLitModule):
    def __init__(self, policy, baseline, **kwargs):
        super().__init__(policy, **kwargs)
        self.baseline = baseline

    def shared_step(self, batch, batch_idx, phase):
        out = self.policy(batch, decode_type="sampling" if phase == "train" else "greedy")
        if phase == "train":
            out = self.calculate_loss(batch, out)
        return out

    def calculate_loss(self, td, policy_out):
        reward, log_likelihood = policy_out["reward"], policy_out["log_likelihood"]
        bl_val, bl_loss = self.baseline.eval(td, reward)
        advantage = reward - bl_val
        reinforce_loss = -(advantage * log_likelihood).mean()
        policy_out.update({"loss": reinforce_loss + bl_loss, "reinforce_loss": reinforce_loss, "bl_loss": bl_loss})
        return policy_out


class A2C(REINFORCE):
    def __init__(self, policy, critic, **kwargs):
        super().__init__(policy, baseline=CriticBaseline(critic), **kwargs)


class MiniTrainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, train_batches, val_batch):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            module.train()
            for i, batch in enumerate(train_batches):
                out = module.training_step(batch, i)
                optimizer.zero_grad()
                out["loss"].backward()
                optimizer.step()
                if i % 20 == 0:
                    print(f"epoch {epoch} step {i} reward {out['reward'].mean():.3f} "
                          f"reinforce {out['reinforce_loss']:.3f} critic mse {out['bl_loss']:.3f}")
            with torch.no_grad():
                val = module.shared_step(val_batch, 0, phase="val")
            print(f"epoch {epoch} val greedy reward {val['reward'].mean():.3f}")


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    train_batches = [torch.rand(64, 10, 2, generator=g) for _ in range(40)]
    val_batch = torch.rand(256, 10, 2, generator=g)
    model = A2C(AttentionPolicy(), CriticNetwork(), lr=1e-3)
    MiniTrainer(max_epochs=2).fit(model, train_batches, val_batch)


if __name__ == "__main__":
    main()
