"""CartPole as gym and gymnasium define it (the same physics, thresholds and rewards), in numpy,
for the stand-in `gym` and `gymnasium` packages. No rendering."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np


class Discrete:
    def __init__(self, n, rng):
        self.n, self._rng = n, rng

    def sample(self):
        return int(self._rng.integers(self.n))


class Box:
    def __init__(self, high):
        self.high, self.low = high, -high
        self.shape = high.shape


class CartPole:
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, max_steps=500, reward_threshold=475.0, render_mode=None):
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length
        self.np_random = np.random.default_rng(0)
        self.action_space = Discrete(2, self.np_random)
        high = np.array([self.x_threshold * 2, np.finfo(np.float32).max, self.theta_threshold_radians * 2,
                         np.finfo(np.float32).max], dtype=np.float32)
        self.observation_space = Box(high)
        self.spec = SimpleNamespace(id="CartPole", reward_threshold=reward_threshold, max_episode_steps=max_steps)
        self.max_steps, self.render_mode = max_steps, render_mode
        self.state, self.elapsed = None, 0

    @property
    def unwrapped(self):
        return self

    def seed(self, seed=None):
        self.np_random = np.random.default_rng(seed)
        self.action_space._rng = self.np_random
        return [seed]

    def _reset(self, seed=None):
        if seed is not None:
            self.seed(seed)
        self.state = self.np_random.uniform(-0.05, 0.05, size=(4,))
        self.elapsed = 0
        return np.array(self.state, dtype=np.float32)

    def _step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if int(action) == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        self.elapsed += 1
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians or theta > self.theta_threshold_radians)
        truncated = self.elapsed >= self.max_steps
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated

    def render(self, *args, **kwargs):
        return None

    def close(self):
        pass


def make(env_id, render_mode=None, **kwargs):
    if not env_id.startswith("CartPole"):
        raise ValueError(f"stand-in gym: only CartPole, not {env_id}")
    if env_id.endswith("v0"):
        return CartPole(200, 195.0, render_mode)
    return CartPole(500, 475.0, render_mode)
