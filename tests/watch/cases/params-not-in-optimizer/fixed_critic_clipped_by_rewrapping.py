"""A WGAN trained by a Trainer class with n_critic critic updates per generator update. The
critic's Lipschitz constraint is applied after each critic step by a clip_weights() helper that
clamps every parameter in place under torch.no_grad(): the critic keeps the Parameters its
optimizer holds."""
import torch
from torch import nn

CLIP = 0.05


class Trainer:
    def __init__(self, generator, critic, n_critic=5, lr=5e-4):
        self.generator, self.critic, self.n_critic = generator, critic, n_critic
        self.opt_g = torch.optim.RMSprop(generator.parameters(), lr=lr)
        self.opt_c = torch.optim.RMSprop(critic.parameters(), lr=lr)

    @torch.no_grad()
    def clip_weights(self):
        for p in self.critic.parameters():
            p.clamp_(-CLIP, CLIP)

    def critic_step(self, real):
        fake = self.generator(torch.randn(real.shape[0], 8)).detach()
        loss = self.critic(fake).mean() - self.critic(real).mean()
        self.opt_c.zero_grad()
        loss.backward()
        self.opt_c.step()
        self.clip_weights()
        return loss.item()

    def generator_step(self, batch_size):
        loss = -self.critic(self.generator(torch.randn(batch_size, 8))).mean()
        self.opt_g.zero_grad()
        loss.backward()
        self.opt_g.step()
        return loss.item()

    def fit(self, data, iterations, batch_size=64):
        g = torch.Generator().manual_seed(1)
        for _ in range(iterations):
            for _ in range(self.n_critic):
                idx = torch.randint(0, len(data), (batch_size,), generator=g)
                c_loss = self.critic_step(data[idx])
            g_loss = self.generator_step(batch_size)
        return c_loss, g_loss


def main():
    torch.manual_seed(0)
    data = torch.randn(2048, 2) * torch.tensor([0.5, 2.0]) + torch.tensor([3.0, -1.0])
    generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    critic = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    print(Trainer(generator, critic).fit(data, iterations=20))


if __name__ == "__main__":
    main()
