"""A TRPO policy in the style of an RLlib policy template: the model is a BaseMLP with separate
actor and critic paths (p_encoder + p_branch, vf_encoder + vf_branch) exposing actor_parameters() and
critic_parameters(); the loss function builds the surrogate objective and the value loss, stores a
TrustRegionUpdator on the policy and returns the total loss; the policy zeroes its optimizer's
gradients and calls backward on that total loss, and its apply_gradients hook calls the updator
instead of optimizer.step(): a natural-gradient actor step (conjugate gradient + line search under
a KL threshold) and a plain gradient step on the critic, computed with autograd.grad over
critic_parameters(). critic_parameters() returns only vf_branch.parameters(), so the value encoder
is never updated: the critic is a linear read-out of a frozen random encoder.

Thread: https://github.com/Replicable-MARL/MARLlib/pull/161
"""
from functools import reduce

import torch
from torch import nn
from torch.distributions import Categorical
from torch.nn.utils import parameters_to_vector, vector_to_parameters


class BaseMLP(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.p_encoder = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.vf_encoder = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.p_branch = nn.Linear(hidden, n_actions)
        self.vf_branch = nn.Linear(hidden, 1)
        self.actors = [self.p_encoder, self.p_branch]

    def forward(self, obs):
        self.inputs = obs
        return self.p_branch(self.p_encoder(obs))

    def value_function(self):
        return self.vf_branch(self.vf_encoder(self.inputs)).reshape(-1)

    def actor_parameters(self):
        return reduce(lambda x, y: x + y, map(lambda m: list(m.parameters()), self.actors))

    def critic_parameters(self):
        return list(self.vf_branch.parameters())


def flat_grad(grads):
    return torch.cat([g.reshape(-1) for g in grads])


class TrustRegionUpdator:
    kl_threshold, ls_step, accept_ratio, back_ratio, atol, critic_lr = 0.01, 15, 0.1, 0.8, 1e-7, 5e-3

    def __init__(self, model, batch, adv_targ, initialize_policy_loss, initialize_critic_loss):
        self.model, self.batch, self.adv_targ = model, batch, adv_targ
        self.initialize_policy_loss, self.initialize_critic_loss = initialize_policy_loss, initialize_critic_loss

    def dist(self):
        return Categorical(logits=self.model(self.batch["obs"]))

    def surrogate(self):
        ratio = torch.exp(self.dist().log_prob(self.batch["actions"]) - self.batch["logp"])
        return (ratio * self.adv_targ).mean()

    def kl(self):
        return torch.distributions.kl_divergence(Categorical(logits=self.batch["logits"]), self.dist()).mean()

    def fisher_vector_product(self, p):
        params = self.model.actor_parameters()
        kl_grads = flat_grad(torch.autograd.grad(self.kl(), params, create_graph=True))
        return flat_grad(torch.autograd.grad((kl_grads * p).sum(), params)) + 0.1 * p

    def conjugate_gradients(self, b, nsteps=10, residual_tol=1e-10):
        x, r, p = torch.zeros_like(b), b.clone(), b.clone()
        rdotr = r.dot(r)
        for _ in range(nsteps):
            avp = self.fisher_vector_product(p)
            alpha = rdotr / p.dot(avp)
            x += alpha * p
            r -= alpha * avp
            new_rdotr = r.dot(r)
            p = r + new_rdotr / rdotr * p
            rdotr = new_rdotr
            if rdotr < residual_tol:
                break
        return x

    def update(self, update_critic=True):
        self.update_actor(self.initialize_policy_loss)
        if update_critic:
            self.update_critic(self.initialize_critic_loss)

    def update_critic(self, critic_loss):
        params = self.model.critic_parameters()
        grads = torch.autograd.grad(critic_loss, params)
        vector_to_parameters(parameters_to_vector(params) - flat_grad(grads) * self.critic_lr, params)

    def update_actor(self, policy_loss):
        params = self.model.actor_parameters()
        pol_grad = flat_grad(torch.autograd.grad(policy_loss, params, retain_graph=True))
        step_dir = self.conjugate_gradients(pol_grad.detach())
        fisher_norm = pol_grad.dot(step_dir)
        scale = 0 if fisher_norm < 0 else torch.sqrt(2 * self.kl_threshold / (fisher_norm + 1e-8))
        full_step = (scale * step_dir).detach()
        old = parameters_to_vector(params).detach()
        loss = policy_loss.item()
        expected_improve, fraction = pol_grad.dot(full_step).item(), 1.0
        if expected_improve >= self.atol:
            for _ in range(self.ls_step):
                vector_to_parameters(old + fraction * full_step, params)
                with torch.no_grad():
                    improve, kl = self.surrogate().item() - loss, self.kl().item()
                if kl < self.kl_threshold and improve / expected_improve >= self.accept_ratio and improve > 0:
                    return
                expected_improve *= self.back_ratio
                fraction *= self.back_ratio
        vector_to_parameters(old, params)


class TRPOPolicy:
    def __init__(self, model, vf_loss_coeff=1.0, entropy_coeff=0.0):
        self.model, self.vf_loss_coeff, self.entropy_coeff = model, vf_loss_coeff, entropy_coeff
        self.optimizer = torch.optim.Adam(model.parameters(), lr=5e-5)  # built by the template, never stepped

    def loss_fn(self, batch):
        dist = Categorical(logits=self.model(batch["obs"]))
        adv = batch["advantages"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        loss = (torch.exp(dist.log_prob(batch["actions"]) - batch["logp"]) * adv).mean()
        mean_vf_loss = (self.model.value_function() - batch["value_targets"]).pow(2).mean()
        self.trpo_updator = TrustRegionUpdator(self.model, batch, adv, loss, mean_vf_loss)
        return -loss + self.vf_loss_coeff * mean_vf_loss - self.entropy_coeff * dist.entropy().mean(), mean_vf_loss

    def apply_gradients(self):
        self.trpo_updator.update()

    def learn_on_batch(self, batch):
        total_loss, vf_loss = self.loss_fn(batch)
        self.optimizer.zero_grad()
        total_loss.backward(retain_graph=True)
        self.apply_gradients()
        return vf_loss.item()


def rollout(model, g, w, n_envs=16, horizon=16, gamma=0.99):
    obs = torch.randn(n_envs, 6, generator=g)
    buf = {k: [] for k in ["obs", "actions", "logp", "logits", "rewards", "values"]}
    with torch.no_grad():
        for _ in range(horizon):
            logits = model(obs)
            a = Categorical(logits=logits).sample()
            buf["obs"].append(obs), buf["actions"].append(a), buf["logits"].append(logits)
            buf["logp"].append(Categorical(logits=logits).log_prob(a)), buf["values"].append(model.value_function())
            buf["rewards"].append((obs @ w).argmax(1).eq(a).float() + 0.1 * obs[:, 0])
            obs = 0.8 * obs + 0.6 * torch.randn(n_envs, 6, generator=g)
    rewards, values = torch.stack(buf["rewards"]), torch.stack(buf["values"])
    returns, running = torch.zeros_like(rewards), torch.zeros(n_envs)
    for t in reversed(range(horizon)):
        running = rewards[t] + gamma * running
        returns[t] = running
    batch = {k: torch.cat(buf[k]) for k in ["obs", "actions", "logp", "logits"]}
    batch["value_targets"], batch["advantages"] = returns.reshape(-1), (returns - values).reshape(-1)
    return batch, rewards.mean().item()


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 3, generator=g)
    policy = TRPOPolicy(BaseMLP(obs_dim=6, n_actions=3))
    for it in range(70):
        batch, mean_reward = rollout(policy.model, g, w)
        vf_loss = policy.learn_on_batch(batch)
        if it % 10 == 0:
            print(f"iter {it} mean reward {mean_reward:.3f} value loss {vf_loss:.3f}")


if __name__ == "__main__":
    main()
