"""An RLlib-style PPO run with a custom TorchModelV2 policy, as in a Grid2Op "senior" agent: the
model class subclasses a TorchModelV2 stand-in and nn.Module, builds four hidden Linear layers, an
action head and a separate value branch, stores the value for value_function(), and returns
(action_logits, state) from forward(); the trainer wraps those logits in a TorchCategorical action
distribution (which applies its own log-softmax) and runs clipped PPO updates over rollouts
collected from the environment. The model's forward() passes the action head through
nn.Softmax(dim=1) before returning it as the logits, so the distribution applies a softmax to
probabilities in (0, 1): every action gets nearly the same probability, the policy stays almost
uniform and its gradients are tiny, and the agent never improves on random action selection.

Thread: https://github.com/FraunhoferIEE/curriculumagent/issues/9
"""
import numpy as np
import torch
import torch.nn as nn

N_OBS, N_ACTIONS = 24, 20


class TorchModelV2:
    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        self.obs_space, self.action_space = obs_space, action_space
        self.num_outputs, self.model_config, self.name = num_outputs, model_config, name


class TorchCategorical:
    """Action distribution built from the model output, which it treats as unnormalised logits."""

    def __init__(self, inputs, model=None):
        self.logits = inputs - inputs.logsumexp(-1, keepdim=True)

    def sample(self, generator=None):
        return torch.multinomial(self.logits.exp(), 1, generator=generator).squeeze(-1)

    def logp(self, actions):
        return self.logits.gather(-1, actions.unsqueeze(-1)).squeeze(-1)

    def entropy(self):
        return -(self.logits.exp() * self.logits).sum(-1)


class Grid2OpCustomModelTorch(TorchModelV2, nn.Module):
    def __init__(self, obs_space, action_space, num_outputs, model_config, name, **customized_model_kwargs):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        layer_size = customized_model_kwargs.get("layer_size", [64, 64, 64, 64])
        self.layer1 = nn.Linear(obs_space, layer_size[0])
        self.layer2 = nn.Linear(layer_size[0], layer_size[1])
        self.layer3 = nn.Linear(layer_size[1], layer_size[2])
        self.layer4 = nn.Linear(layer_size[2], layer_size[3])
        self.act_layer = nn.Linear(layer_size[3], num_outputs)
        self.val_hidden_layer = nn.Linear(layer_size[3], action_space)
        self.val_layer = nn.Linear(action_space, 1)
        self.activation = nn.ReLU()
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.orthogonal_(m.weight)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, input_dict, state=None, seq_lens=None):
        x = input_dict["obs"]
        x = self.activation(self.layer1(x))
        x = self.activation(self.layer2(x))
        x = self.activation(self.layer3(x))
        x = self.activation(self.layer4(x))
        action = self.act_layer(x)
        value = self.val_layer(self.activation(self.val_hidden_layer(x)))
        self._value_out = value.squeeze(-1)
        action = self.softmax(action)
        return action, state

    def value_function(self):
        return self._value_out


class GridEnv:
    """Stand-in power-grid env: the observation encodes which remedial action relieves the overload.
    The right action earns 1, others a small penalty; an episode is 10 steps."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.proj = self.rng.normal(size=(N_ACTIONS, N_OBS)).astype(np.float32)

    def _obs(self):
        self.target = self.rng.integers(N_ACTIONS)
        return (self.proj[self.target] + 0.3 * self.rng.normal(size=N_OBS)).astype(np.float32)

    def reset(self):
        self.t = 0
        return self._obs()

    def step(self, action):
        reward = 1.0 if action == self.target else -0.05
        self.t += 1
        return self._obs(), reward, self.t >= 10


def collect(env, model, n_steps, gen):
    obs_l, act_l, logp_l, rew_l, val_l, done_l = [], [], [], [], [], []
    obs = env.reset()
    for _ in range(n_steps):
        with torch.no_grad():
            logits, _ = model({"obs": torch.from_numpy(obs)[None]})
            dist = TorchCategorical(logits, model)
            a = dist.sample(gen)
            obs_l.append(obs); act_l.append(a.item()); logp_l.append(dist.logp(a).item())
            val_l.append(model.value_function().item())
        obs, r, done = env.step(a.item())
        rew_l.append(r); done_l.append(done)
        if done:
            obs = env.reset()
    return obs_l, act_l, logp_l, rew_l, val_l, done_l


def compute_gae(rew, val, done, gamma=0.99, lam=0.95):
    adv, last = np.zeros(len(rew), np.float32), 0.0
    for t in reversed(range(len(rew))):
        next_v = 0.0 if (done[t] or t == len(rew) - 1) else val[t + 1]
        delta = rew[t] + gamma * next_v - val[t]
        last = delta + gamma * lam * (0.0 if done[t] else last)
        adv[t] = last
    return adv, adv + np.array(val, np.float32)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    env = GridEnv()
    model = Grid2OpCustomModelTorch(N_OBS, N_ACTIONS, N_ACTIONS, {}, "senior")
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    clip, vf_coeff, ent_coeff = 0.2, 0.5, 0.01
    for it in range(15):
        obs, act, old_logp, rew, val, done = collect(env, model, 400, gen)
        adv, ret = compute_gae(rew, val, done)
        obs, act = torch.tensor(np.array(obs)), torch.tensor(act)
        old_logp, adv, ret = torch.tensor(old_logp), torch.tensor(adv), torch.tensor(ret)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        for epoch in range(4):
            perm = torch.randperm(len(act), generator=gen)
            for mb in perm.split(100):
                logits, _ = model({"obs": obs[mb]})
                dist = TorchCategorical(logits, model)
                ratio = (dist.logp(act[mb]) - old_logp[mb]).exp()
                surr = torch.min(ratio * adv[mb], ratio.clamp(1 - clip, 1 + clip) * adv[mb])
                vf_loss = (model.value_function() - ret[mb]).pow(2)
                loss = (-surr + vf_coeff * vf_loss - ent_coeff * dist.entropy()).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        if it % 2 == 0 or it == 14:
            ep_reward = sum(rew) / max(1, sum(done))
            print(f"iter {it:2d}  episode_reward_mean {ep_reward:6.2f} (max 10.0, random ~0.03)  "
                  f"entropy {dist.entropy().mean().item():.3f} (uniform {np.log(N_ACTIONS):.3f})  vf_loss {vf_loss.mean().item():.3f}")


if __name__ == "__main__":
    main()
