"""Consistency-trajectory (CTM) distillation of a diffusion action policy, in the shape of the
consistency-policy student: a policy class holds an observation encoder, the student model
G(x, t, s) (a jump from noise level t to s, parameterised as (s/t) x + (1 - s/t) g(x, t, s)),
an EMA copy model_ema, a frozen pretrained teacher denoiser and a Karras-style noise scheduler.
compute_loss(batch) normalises the batch, encodes the observations into a global condition,
and returns a dict of weighted terms: "ctm" (the student's t -> s jump against the teacher's
ODE solve t -> u followed by the EMA jump u -> s, both then mapped back to time_min by the EMA
model and compared with a Huber loss) and "dsm" (denoising score matching straight to
time_min). The training loop sums the dict, backpropagates, steps AdamW and updates the EMA.

The bug: the CTM block wraps not only the target computation but also the "take both back to
0" step in torch.no_grad(), and that step re-assigns pred = model_ema(pred, s -> time_min). The
student's own jump is thus overwritten by a tensor computed without a graph, so the "ctm"
term has no grad_fn: it is logged and summed into the loss, but only "dsm" trains the student
and the consistency distillation from the teacher never happens.

Thread: https://github.com/Aaditya-Prasad/consistency-policy/issues/4
"""
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

HORIZON, ACT_DIM, OBS_DIM = 8, 2, 6


def huber_loss(pred, target, delta):
    return F.huber_loss(pred, target, delta=delta, reduction="mean")


class KarrasScheduler:
    def __init__(self, time_min=0.002, time_max=20.0, rho=7.0, bins=40, ode_steps_max=2):
        self.time_min, self.time_max, self.rho, self.bins = time_min, time_max, rho, bins
        self.ode_steps_max = ode_steps_max

    def timesteps_to_times(self, t):
        frac = t.float() / (self.bins - 1)
        a, b = self.time_max ** (1 / self.rho), self.time_min ** (1 / self.rho)
        return (a + frac * (b - a)) ** self.rho

    def sample_times(self, x, g):
        n = x.shape[0]
        t = torch.randint(0, self.bins - 2, (n,), generator=g)
        u = torch.minimum(t + 1 + torch.randint(0, self.ode_steps_max, (n,), generator=g), torch.full_like(t, self.bins - 1))
        s = (u + (torch.rand(n, generator=g) * (self.bins - u).float()).long()).clamp(max=self.bins - 1)
        return t, s, u

    def add_noise(self, x, times, g):
        return x + times.view(-1, 1, 1) * torch.randn(x.shape, generator=g)

    def step(self, denoise, x, t_cur, t_next):
        d = (x - denoise(x, t_cur)) / t_cur.view(-1, 1, 1)
        return x + (t_next - t_cur).view(-1, 1, 1) * d


class ObsEncoder(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM, d), nn.Mish(), nn.Linear(d, d))

    def forward(self, obs):
        return self.net(obs)


class TrajectoryNet(nn.Module):
    """g(x, t, s | cond) for a flattened action trajectory."""

    def __init__(self, cond_dim=32, d=128):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(HORIZON * ACT_DIM + 2 + cond_dim, d), nn.Mish(),
                                 nn.Linear(d, d), nn.Mish(), nn.Linear(d, HORIZON * ACT_DIM))

    def forward(self, x, t, s, global_cond):
        h = torch.cat([x.flatten(1), torch.log(t)[:, None] / 4, torch.log(s)[:, None] / 4, global_cond], 1)
        return self.net(h).view_as(x)


class GaussianTeacher(nn.Module):
    """Pretrained EDM denoiser stand-in: exact posterior mean for actions = W obs + sigma_d * eps."""

    def __init__(self, weight, sigma_d):
        super().__init__()
        self.register_buffer("weight", weight)
        self.sigma_d = sigma_d

    def forward(self, x, t, obs):
        mu = (obs @ self.weight).view_as(x)
        c = self.sigma_d ** 2 / (self.sigma_d ** 2 + t.view(-1, 1, 1) ** 2)
        return mu + c * (x - mu)


class CTMPolicy(nn.Module):
    def __init__(self, teacher, losses=(("ctm", "dsm"), (1.0, 1.0)), delta=0.05):
        super().__init__()
        self.obs_encoder = ObsEncoder()
        self.model = TrajectoryNet()
        self.model_ema = copy.deepcopy(self.model).requires_grad_(False)
        self.teacher = teacher
        self.noise_scheduler = KarrasScheduler()
        self.losses = dict(zip(*losses))
        self.delta = delta

    def _forward(self, model, x, t, s, global_cond):
        r = (s / t).view(-1, 1, 1)
        return r * x + (1 - r) * model(x, t, s, global_cond)

    def compute_loss(self, batch, g):
        total_loss = {}
        obs, trajectory = batch["obs"], batch["action"]
        global_cond = self.obs_encoder(obs)
        sched = self.noise_scheduler

        if "ctm" in self.losses:
            t, s, u = sched.sample_times(trajectory, g)
            times, stops, u_times = sched.timesteps_to_times(t), sched.timesteps_to_times(s), sched.timesteps_to_times(u)
            noise_traj = sched.add_noise(trajectory, times, g)
            denoise = lambda x, tt: self.teacher(x, tt, obs)
            u_noise_traj = noise_traj
            for d in range(sched.ode_steps_max):
                ct = torch.minimum(t + d, u)
                nt = torch.minimum(t + d + 1, u)
                cur, nxt = sched.timesteps_to_times(ct), sched.timesteps_to_times(nt)
                u_noise_traj = sched.step(denoise, u_noise_traj, cur, nxt)

            # t -> s with the student
            pred = self._forward(self.model, noise_traj, times, stops, global_cond)

            # u -> s with the EMA model
            with torch.no_grad():
                target = self._forward(self.model_ema, u_noise_traj, u_times, stops, global_cond)

            # now take both back to time_min
            with torch.no_grad():
                start = torch.full_like(times, sched.time_min)
                pred = self._forward(self.model_ema, pred, stops, start, global_cond)
                target = self._forward(self.model_ema, target, stops, start, global_cond)

            total_loss["ctm"] = huber_loss(pred, target, self.delta) * self.losses["ctm"]

        if "dsm" in self.losses:
            t = torch.randint(0, sched.bins - 1, (trajectory.shape[0],), generator=g)
            times = sched.timesteps_to_times(t)
            noisy = sched.add_noise(trajectory, times, g)
            stop = torch.full_like(times, sched.time_min)
            pred = self._forward(self.model, noisy, times, stop, global_cond)
            total_loss["dsm"] = huber_loss(pred, trajectory, self.delta) * self.losses["dsm"]
        return total_loss

    @torch.no_grad()
    def ema_update(self, decay=0.95):
        for p_ema, p in zip(self.model_ema.parameters(), self.model.parameters()):
            p_ema.mul_(decay).add_(p.detach(), alpha=1 - decay)

    @torch.no_grad()
    def predict_action(self, obs, g):
        sched = self.noise_scheduler
        x = sched.time_max * torch.randn(obs.shape[0], HORIZON, ACT_DIM, generator=g)
        t = torch.full((obs.shape[0],), sched.time_max)
        return self._forward(self.model, x, t, torch.full_like(t, sched.time_min), self.obs_encoder(obs))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    sigma_d = 0.5
    weight = torch.randn(OBS_DIM, HORIZON * ACT_DIM, generator=g) / math.sqrt(OBS_DIM)
    obs_all = torch.randn(2048, OBS_DIM, generator=g)
    act_all = (obs_all @ weight).view(-1, HORIZON, ACT_DIM) + sigma_d * torch.randn(2048, HORIZON, ACT_DIM, generator=g)
    policy = CTMPolicy(GaussianTeacher(weight, sigma_d))
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-3, weight_decay=1e-6)
    step = 0
    for epoch in range(4):
        perm = torch.randperm(2048, generator=g)
        for i in range(0, 2048, 64):
            idx = perm[i:i + 64]
            batch = {"obs": obs_all[idx], "action": act_all[idx]}
            loss_dict = policy.compute_loss(batch, g)
            loss = sum(loss_dict.values())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            policy.ema_update()
            step += 1
            if step % 32 == 0:
                print(f"step {step}: " + " ".join(f"{k} {v.item():.4f}" for k, v in loss_dict.items()))
    obs_test = torch.randn(256, OBS_DIM, generator=g)
    act = policy.predict_action(obs_test, g)
    print(f"one-step action MSE to the conditional mean: {F.mse_loss(act, (obs_test @ weight).view_as(act)).item():.4f}")


if __name__ == "__main__":
    main()
