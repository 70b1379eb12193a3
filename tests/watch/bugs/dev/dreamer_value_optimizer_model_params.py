"""A Dreamer-style agent trained from a replay buffer by an algorithm class: a world model
(observation encoder and decoder, recurrent transition with prior and posterior, reward head), an
action decoder trained by back-propagating imagined returns through the frozen model, and a value
model regressed on lambda returns. optim_initialize() builds three Adam optimizers from module
lists, but the value optimizer is given the world-model modules instead of the value modules, so
the value model's gradients are never applied (it stays at its initial weights) while the world
model gets a second Adam step per iteration at the value learning rate.

Thread: https://github.com/juliusfrost/dreamer-pytorch/pull/79
"""
from contextlib import contextmanager

import torch
from torch import nn
from torch.distributions import Normal


def get_parameters(modules):
    return [p for m in modules for p in m.parameters()]


@contextmanager
def freeze_parameters(modules):
    params = get_parameters(modules)
    old = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, r in zip(params, old):
            p.requires_grad_(r)


def mlp(i, o, h=64):
    return nn.Sequential(nn.Linear(i, h), nn.ELU(), nn.Linear(h, h), nn.ELU(), nn.Linear(h, o))


class AgentModel(nn.Module):
    def __init__(self, obs_dim=10, act_dim=2, embed=32, deter=48, stoch=16):
        super().__init__()
        self.observation_encoder = mlp(obs_dim, embed)
        self.transition = nn.GRUCell(stoch + act_dim, deter)
        self.prior = mlp(deter, stoch)
        self.representation = mlp(deter + embed, stoch)
        feat = deter + stoch
        self.observation_decoder = mlp(feat, obs_dim)
        self.reward_model = mlp(feat, 1)
        self.action_decoder = mlp(feat, act_dim)
        self.value_model = mlp(feat, 1)
        self.deter, self.stoch = deter, stoch

    def img_step(self, h, z, action):
        h = self.transition(torch.cat([z, action], -1), h)
        return h, self.prior(h)


class Dreamer:
    def __init__(self, model, model_lr=6e-4, actor_lr=8e-5, value_lr=8e-5, horizon=8, discount=0.99,
                 discount_lambda=0.95, grad_clip=100.0):
        self.model, self.horizon, self.discount, self.lam = model, horizon, discount, discount_lambda
        self.model_lr, self.actor_lr, self.value_lr, self.grad_clip = model_lr, actor_lr, value_lr, grad_clip

    def optim_initialize(self):
        m = self.model
        self.model_modules = [m.observation_encoder, m.observation_decoder, m.reward_model, m.representation,
                              m.transition, m.prior]
        self.actor_modules = [m.action_decoder]
        self.value_modules = [m.value_model]
        self.model_optimizer = torch.optim.Adam(get_parameters(self.model_modules), lr=self.model_lr)
        self.actor_optimizer = torch.optim.Adam(get_parameters(self.actor_modules), lr=self.actor_lr)
        self.value_optimizer = torch.optim.Adam(get_parameters(self.model_modules), lr=self.value_lr)

    def compute_return(self, reward, value, bootstrap):
        next_values = torch.cat([value[1:], bootstrap[None]], 0)
        inputs = reward + self.discount * next_values * (1 - self.lam)
        last, outputs = bootstrap, []
        for t in reversed(range(len(reward))):
            last = inputs[t] + self.discount * self.lam * last
            outputs.append(last)
        return torch.stack(outputs[::-1])

    def loss(self, obs, act, rew):
        m = self.model
        T, B, _ = obs.shape
        h, z = torch.zeros(B, m.deter), torch.zeros(B, m.stoch)
        priors, posts, feats = [], [], []
        for t in range(T):
            h, prior_z = m.img_step(h, z, act[t])
            z = m.representation(torch.cat([h, m.observation_encoder(obs[t])], -1))
            priors.append(prior_z)
            posts.append(z)
            feats.append(torch.cat([h, z], -1))
        feat, prior_z, post_z = torch.stack(feats), torch.stack(priors), torch.stack(posts)
        image_loss = -Normal(m.observation_decoder(feat), 1.0).log_prob(obs).mean()
        reward_loss = -Normal(m.reward_model(feat), 1.0).log_prob(rew).mean()
        div = 0.5 * ((post_z - prior_z) ** 2).sum(-1).mean()
        model_loss = image_loss + reward_loss + div

        flat = feat.detach().reshape(T * B, -1)
        h, z = flat[:, :m.deter], flat[:, m.deter:]
        imag = [flat]
        with freeze_parameters(self.model_modules):
            for _ in range(self.horizon):
                h, z = m.img_step(h, z, torch.tanh(m.action_decoder(imag[-1])))
                imag.append(torch.cat([h, z], -1))
        imag_feat = torch.stack(imag)
        with freeze_parameters(self.model_modules + self.value_modules):
            imag_reward = m.reward_model(imag_feat)
            value = m.value_model(imag_feat)
        returns = self.compute_return(imag_reward[:-1], value[:-1], value[-1])
        actor_loss = -returns.mean()

        value_pred = m.value_model(imag_feat[:-1].detach())
        value_loss = -Normal(value_pred, 1.0).log_prob(returns.detach()).mean()
        return model_loss, actor_loss, value_loss

    def optimize_agent(self, itr, replay):
        obs, act, rew = replay.sample_batch()
        model_loss, actor_loss, value_loss = self.loss(obs, act, rew)
        self.model_optimizer.zero_grad()
        self.actor_optimizer.zero_grad()
        self.value_optimizer.zero_grad()
        model_loss.backward()
        actor_loss.backward()
        value_loss.backward()
        torch.nn.utils.clip_grad_norm_(get_parameters(self.model_modules), self.grad_clip)
        torch.nn.utils.clip_grad_norm_(get_parameters(self.actor_modules), self.grad_clip)
        torch.nn.utils.clip_grad_norm_(get_parameters(self.value_modules), self.grad_clip)
        self.model_optimizer.step()
        self.actor_optimizer.step()
        self.value_optimizer.step()
        if itr % 10 == 0:
            print(f"itr {itr}: model {model_loss.item():.3f} actor {actor_loss.item():.3f} value {value_loss.item():.3f}")


class ReplayBuffer:
    """Episodes of a point-mass environment: reward is higher near a goal, actions push the state."""

    def __init__(self, n_episodes=64, length=30, obs_dim=10, act_dim=2, seed=0):
        g = torch.Generator().manual_seed(seed)
        proj = torch.randn(4, obs_dim, generator=g) * 0.5
        pos, vel = torch.randn(n_episodes, 2, generator=g), torch.zeros(n_episodes, 2)
        obs, act, rew = [], [], []
        for _ in range(length):
            a = torch.randn(n_episodes, act_dim, generator=g).clamp(-1, 1)
            obs.append(torch.cat([pos, vel], -1) @ proj)
            act.append(a)
            vel = 0.8 * vel + 0.2 * a
            pos = pos + vel
            rew.append(-(pos ** 2).sum(-1, keepdim=True) * 0.1)
        self.obs, self.act, self.rew = torch.stack(obs), torch.stack(act), torch.stack(rew)
        self.g = g

    def sample_batch(self, batch_size=16, batch_length=12):
        ep = torch.randint(0, self.obs.shape[1], (batch_size,), generator=self.g)
        t0 = int(torch.randint(0, self.obs.shape[0] - batch_length, (1,), generator=self.g))
        sl = slice(t0, t0 + batch_length)
        return self.obs[sl, ep], self.act[sl, ep], self.rew[sl, ep]


def main():
    torch.manual_seed(0)
    algo = Dreamer(AgentModel())
    algo.optim_initialize()
    replay = ReplayBuffer()
    for itr in range(80):
        algo.optimize_agent(itr, replay)


if __name__ == "__main__":
    main()
