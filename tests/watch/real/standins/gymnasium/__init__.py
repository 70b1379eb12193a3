"""A stand-in for gymnasium: CartPole only, with gymnasium's API (reset -> (obs, info),
step -> (obs, reward, terminated, truncated, info))."""
import standin_cartpole


class _Env(standin_cartpole.CartPole):
    def reset(self, seed=None, options=None):
        return self._reset(seed), {}

    def step(self, action):
        obs, reward, terminated, truncated = self._step(action)
        return obs, reward, terminated, truncated, {}


def make(env_id, render_mode=None, **kwargs):
    base = standin_cartpole.make(env_id, render_mode)
    return _Env(base.max_steps, base.spec.reward_threshold, render_mode)
