"""
Shape: an on-policy A2C agent class builds a CNN actor-critic (shared conv feature extractor
`self.feature` plus separate actor and critic MLP heads) in `_create_model`, then makes two Adam
optimizers, one per head, and steps them in `update_params` over rollout mini-batches.
Bug: the policy optimizer is given only `ac.actor.parameters()` and the value optimizer only
`ac.critic.parameters()`; the shared CNN feature extractor is in neither, so its weights never move.
Thread: https://github.com/SforAiDl/genrl/issues/315
"""
import gym
import torch
import torch.nn as nn
from torch import optim
import torch.nn.functional as F


def conv_stack(in_shape):
    frames, height, width = in_shape
    body = nn.Sequential(
        nn.Conv2d(frames, 16, 8, stride=4), nn.ReLU(),
        nn.Conv2d(16, 32, 4, stride=2), nn.ReLU(),
        nn.Flatten(),
    )
    with torch.no_grad():
        n_out = body(torch.zeros(1, frames, height, width)).shape[1]
    return body, n_out


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class ConvActorCritic(nn.Module):
    def __init__(self, framestack, action_dim, policy_layers=(64,), value_layers=(64,)):
        super().__init__()
        self.feature, feat_dim = conv_stack((framestack, 84, 84))
        self.actor = mlp([feat_dim, *policy_layers, action_dim])
        self.critic = mlp([feat_dim, *value_layers, 1])

    def get_action(self, state, deterministic=False):
        h = self.feature(state)
        h = h.view(h.size(0), -1)
        probs = nn.Softmax(dim=-1)(self.actor(h))
        dist = torch.distributions.Categorical(probs=probs)
        act = probs.argmax(-1) if deterministic else dist.sample()
        return act, dist

    def get_value(self, state):
        h = self.feature(state)
        h = h.view(h.size(0), -1)
        return self.critic(h).squeeze(-1)


class AdvantageActorCritic:
    def __init__(self, env, rollout, batch_size=64, lr_policy=7e-4, lr_value=1e-3,
                 value_coeff=0.5, entropy_coeff=0.01, device="cpu"):
        self.env = env
        self.rollout = rollout
        self.batch_size = batch_size
        self.lr_policy = lr_policy
        self.lr_value = lr_value
        self.vf_coef = value_coeff
        self.ent_coef = entropy_coeff
        self.device = device
        self.logs = {"policy_loss": [], "value_loss": [], "policy_entropy": []}
        self._build_networks()

    def _build_networks(self):
        n_actions = self.env.action_space.n
        self.policy_net = ConvActorCritic(4, n_actions).to(self.device)
        self.pi_optim = optim.Adam(self.policy_net.actor.parameters(), lr=self.lr_policy)
        self.vf_optim = optim.Adam(self.policy_net.critic.parameters(), lr=self.lr_value)

    def evaluate_actions(self, states, actions):
        obs = states.to(self.device)
        acts = actions.to(self.device)
        _, pi = self.policy_net.get_action(obs, deterministic=False)
        v = self.policy_net.get_value(obs)
        return v, pi.log_prob(acts).cpu(), pi.entropy().cpu()

    def update_params(self):
        for chunk in self.rollout.get(self.batch_size):
            actions = chunk.actions
            discrete = isinstance(self.env.action_space, gym.spaces.Discrete)
            if discrete:
                actions = actions.flatten().long()

            values, log_prob, entropy = self.evaluate_actions(chunk.observations, actions)

            pg_loss = -torch.mean(chunk.advantages * log_prob)
            self.logs["policy_loss"].append(pg_loss.item())
            v_loss = self.vf_coef * F.mse_loss(chunk.returns, values.cpu())
            self.logs["value_loss"].append(v_loss.item())
            ent_term = -torch.mean(entropy)
            self.logs["policy_entropy"].append(ent_term.item())

            actor_objective = pg_loss + self.ent_coef * ent_term

            self.pi_optim.zero_grad()
            actor_objective.backward()
            nn.utils.clip_grad_norm_(self.policy_net.actor.parameters(), max_norm=0.5)
            self.pi_optim.step()

            self.vf_optim.zero_grad()
            v_loss.backward()
            nn.utils.clip_grad_norm_(self.policy_net.critic.parameters(), max_norm=0.5)
            self.vf_optim.step()
