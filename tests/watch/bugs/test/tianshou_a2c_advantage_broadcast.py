"""An A2C agent in the style of an RL library's policy classes: an A2CPolicy object holds an actor
(MLP -> Categorical logits) and a critic (MLP -> one value per observation, shape (B, 1)) sharing
one Adam optimizer; a Collector runs episodes of a vectorised toy environment and stores
transitions in a Batch; process_fn() computes discounted episodic returns; learn(batch,
batch_size, repeat) splits the batch into minibatches and, for each, zeroes the gradients, builds
the distribution, evaluates the critic, computes actor loss, value loss and entropy bonus, steps
the optimizer and appends the losses to a result dict; an onpolicy_trainer() loop alternates
collection and learning and prints the mean test return per epoch. The bug: the critic returns
(B, 1) while the returns are (B,), and the advantage is written r - v without squeezing, so it
broadcasts to a (B, B) grid; multiplied by the (B,) log-probabilities and averaged, every action is
weighted by its return minus the batch-mean value instead of its own state value, so the critic's
baseline no longer reduces the variance of the policy gradient (the value loss, written with
r[:, None], is correct and looks healthy).

Thread: https://github.com/thu-ml/tianshou/pull/155
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class CueEnv:
    """Vectorised toy task: a cue in the observation says which of 3 arms pays; states differ in
    their base reward, so a state-dependent baseline matters."""

    def __init__(self, n_envs, rng, horizon=5):
        self.n, self.rng, self.horizon = n_envs, rng, horizon

    def reset(self):
        self.t = 0
        self.base = self.rng.normal(0.0, 3.0, self.n).astype(np.float32)
        self.cue = self.rng.integers(0, 3, self.n)
        return self._obs()

    def _obs(self):
        o = np.zeros((self.n, 4), np.float32)
        o[np.arange(self.n), self.cue] = 1.0
        o[:, 3] = self.base / 3.0
        return o

    def step(self, act):
        rew = self.base + (act == self.cue).astype(np.float32) - 0.5
        self.t += 1
        self.base = (self.base + self.rng.normal(0.0, 0.5, self.n)).astype(np.float32)
        self.cue = self.rng.integers(0, 3, self.n)
        return self._obs(), rew.astype(np.float32), np.full(self.n, self.t >= self.horizon)


def mlp(i, o, h=64):
    return nn.Sequential(nn.Linear(i, h), nn.Tanh(), nn.Linear(h, h), nn.Tanh(), nn.Linear(h, o))


class A2CPolicy:
    def __init__(self, actor, critic, optim, gamma=0.9, vf_coef=0.5, ent_coef=0.01, max_grad_norm=0.5):
        self.actor, self.critic, self.optim = actor, critic, optim
        self._gamma, self._w_vf, self._w_ent, self._grad_norm = gamma, vf_coef, ent_coef, max_grad_norm

    def __call__(self, obs):
        return torch.distributions.Categorical(logits=self.actor(obs))

    def process_fn(self, batch):
        rew, done = batch["rew"], batch["done"]
        returns = np.zeros_like(rew)
        running = np.zeros(rew.shape[1], np.float32)
        for t in reversed(range(rew.shape[0])):
            running = rew[t] + self._gamma * running * (1.0 - done[t])
            returns[t] = running
        return {"obs": torch.as_tensor(batch["obs"].reshape(-1, 4)),
                "act": torch.as_tensor(batch["act"].reshape(-1)),
                "returns": torch.as_tensor(returns.reshape(-1))}

    def learn(self, batch, batch_size, repeat):
        result = {"loss/actor": [], "loss/vf": [], "loss/ent": []}
        n = len(batch["act"])
        for _ in range(repeat):
            perm = torch.randperm(n)
            for s in range(0, n, batch_size):
                idx = perm[s:s + batch_size]
                obs, act, r = batch["obs"][idx], batch["act"][idx], batch["returns"][idx]
                self.optim.zero_grad()
                dist = self(obs)
                v = self.critic(obs)
                a_loss = -(dist.log_prob(act) * (r - v).detach()).mean()
                vf_loss = F.mse_loss(r[:, None], v)
                ent_loss = dist.entropy().mean()
                loss = a_loss + self._w_vf * vf_loss - self._w_ent * ent_loss
                loss.backward()
                nn.utils.clip_grad_norm_(list(self.actor.parameters()) + list(self.critic.parameters()), self._grad_norm)
                self.optim.step()
                result["loss/actor"].append(a_loss.item())
                result["loss/vf"].append(vf_loss.item())
                result["loss/ent"].append(ent_loss.item())
        return result


class Collector:
    def __init__(self, policy, env):
        self.policy, self.env = policy, env

    def collect(self, n_episode=1, greedy=False):
        obs_l, act_l, rew_l, done_l = [], [], [], []
        for _ in range(n_episode):
            obs, done = self.env.reset(), np.zeros(self.env.n, bool)
            while not done.all():
                with torch.no_grad():
                    dist = self.policy(torch.as_tensor(obs))
                    act = dist.probs.argmax(-1) if greedy else dist.sample()
                act = act.numpy()
                nxt, rew, done = self.env.step(act)
                obs_l.append(obs); act_l.append(act); rew_l.append(rew); done_l.append(done.astype(np.float32))
                obs = nxt
        return {"obs": np.stack(obs_l), "act": np.stack(act_l), "rew": np.stack(rew_l), "done": np.stack(done_l)}


def onpolicy_trainer(policy, train_collector, test_collector, max_epoch, step_per_epoch, batch_size, repeat):
    for epoch in range(1, max_epoch + 1):
        for _ in range(step_per_epoch):
            batch = policy.process_fn(train_collector.collect(n_episode=1))
            res = policy.learn(batch, batch_size, repeat)
        test = test_collector.collect(n_episode=2, greedy=True)
        print(f"epoch {epoch}: actor {np.mean(res['loss/actor']):.4f} vf {np.mean(res['loss/vf']):.4f} "
              f"ent {np.mean(res['loss/ent']):.4f} test mean step reward {test['rew'].mean():.4f}")


def main():
    torch.manual_seed(0)
    actor, critic = mlp(4, 3), mlp(4, 1)
    optim = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=3e-3)
    policy = A2CPolicy(actor, critic, optim)
    train_c = Collector(policy, CueEnv(16, np.random.default_rng(0)))
    test_c = Collector(policy, CueEnv(64, np.random.default_rng(1)))
    onpolicy_trainer(policy, train_c, test_c, max_epoch=6, step_per_epoch=10, batch_size=40, repeat=1)


if __name__ == "__main__":
    main()
