"""A stand-in for the old gym (before 0.26): CartPole only, reset -> obs, step -> (obs, reward,
done, info); `unwrapped` has no step limit, as in gym."""
import standin_cartpole


class _Env(standin_cartpole.CartPole):
    def reset(self):
        return self._reset()

    def step(self, action):
        obs, reward, terminated, truncated = self._step(action)
        return obs, reward, terminated or truncated, {}

    @property
    def unwrapped(self):
        return _Env(10 ** 9, self.spec.reward_threshold, self.render_mode)


def make(env_id, **kwargs):
    base = standin_cartpole.make(env_id)
    return _Env(base.max_steps, base.spec.reward_threshold)
