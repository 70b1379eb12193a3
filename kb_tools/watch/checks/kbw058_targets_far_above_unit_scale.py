"""KBW058: regression targets far above unit scale, never standardised: the untrained output is nowhere near.

Criterion: at one mse_loss site, on every sampled call (at least 5), the targets' root mean square
is at least 100, the first call's loss is at least half the targets' mean square (the model starts
at about 0 while the targets sit far away), and the loss stays above the targets' variance on
every call (R^2 below 0: worse than predicting their mean). A network initialised for outputs of
order 1 needs a very long way to reach targets in the hundreds of thousands; a head whose bias or
output scaling already matches the targets starts near their variance and is not reported.

Criterion, raw targets under an evaluation-only unscale: a module without parameters or submodules
produces a watched model's output, returning its input unchanged in training mode (every sampled
call) and another tensor in eval mode; on its sampled eval-mode calls (at least one, each of at
least 8 rows; up to 6) every output feature is an affine map of the input feature (correlation at least
0.999 in absolute value), T(v) = a v + b, the same map on every call. The targets of a regression loss (mse, l1,
smooth l1, huber) on that model's training outputs (at least 5 sampled calls; per
feature mean m and standard deviation s) are already where T maps to: T's inverse standardizes
them, |m - b| / |a| at most 0.5 and s / |a| between 0.5 and 2, while T moves them far, |T(m) - m|
at least 3 s or |a| at least 3 or at most 1/3. The model was fitted to unscaled targets and its
evaluation output unscales them a second time (predictions off by the targets' own mean and
spread). Standardized targets under the same unscale (the intended use) are not where T maps to
and are not reported; a unit conversion at evaluation does not standardize the targets it inverts.
"""
from __future__ import annotations

import math

import torch

from kb_tools.watch.checks import Check, loss_where, plural
from kb_tools.watch.checks.tensors import feature_moments, mse_target_stats

MIN_CALLS = 5
MIN_RMS = 100.0
FIRST_SHARE = 0.5
MIN_EVAL = 1
MIN_ROWS = 8
MAX_CALLS = 6
MAX_FEATURES = 64
AFFINE = 0.999
_REGRESSION = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")


class _Unscale:
    __slots__ = ("name", "model", "identity", "maps", "targets", "step")

    def __init__(self, name: str, model: str):
        self.name, self.model = name, model
        self.identity = 0    # training-mode calls that returned their input; -1 once one did not
        self.maps: list = []  # [(a per feature, b per feature)] of up to MAX_CALLS eval-mode calls (None: not affine)
        self.targets: list = []  # [(means, stds)] of the regression targets on the model's training outputs
        self.step = None


class TargetsFarAboveUnitScale(Check):
    __doc__ = __doc__
    code = "KBW058"
    name = "targets-far-above-unit-scale"
    entry = "targets-not-standardized"
    title = ("regression targets in the hundreds or more, unstandardised: the MSE starts near their mean square; or raw "
             "targets under an evaluation-only unscale")
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.sites: dict = {}  # (where, site) -> [calls, hits, first step, first share, last ratio, rms, std]
        self.last_in: tuple = (None, None)   # (id, input) of the leaf module without parameters now running
        self.last_leaf: tuple | None = None  # (module, input, output) of the last such module that returned
        self.unscales: dict[int, _Unscale] = {}
        self.train_output: tuple | None = None  # (id of a model's latest training output, its _Unscale)

    def on_module_input(self, module, args):
        if not module._parameters and not module._modules:
            self.last_in = (id(module), args[0] if args else None)

    def on_module_forward(self, module, output, grad_enabled):
        if not module._parameters and not module._modules:
            last, self.last_in = self.last_in, (None, None)
            if last[0] == id(module) and isinstance(last[1], torch.Tensor) and isinstance(output, torch.Tensor):
                self.last_leaf = (module, last[1], output)

    def on_root_output(self, model, output, grad_enabled):
        leaf, self.last_leaf = self.last_leaf, None
        if leaf is None or leaf[2] is not output or not self.session.sampled:
            return
        module, x, y = leaf
        u = self.unscales.get(id(module))
        if u is None:
            if len(self.unscales) >= 4 or not output.is_floating_point() or output.dim() < 1 \
                    or output.shape[-1] > MAX_FEATURES:
                return
            u = self.unscales[id(module)] = _Unscale(f"{self.session.module_name(module)} ({type(module).__name__})",
                                                     model.cls)
        if u.identity < 0:
            return
        if module.training:
            if y is x:
                u.identity += 1
                self.train_output = (id(output), u)
            else:
                u.identity = -1
        elif y is not x and y.shape == x.shape and y.dim() >= 1 and y.shape[:-1].numel() >= MIN_ROWS and len(u.maps) < MAX_CALLS:
            u.maps.append(_affine(x, y))
            if u.step is None:
                u.step = self.session.step

    def on_loss(self, call):
        if call.kind in _REGRESSION and self.train_output is not None and id(call.input) == self.train_output[0]:
            u, self.train_output = self.train_output[1], None
            y = call.target
            if isinstance(y, torch.Tensor) and y.is_floating_point() and len(u.targets) < MAX_CALLS \
                    and y.shape == call.input.shape and y.shape[:-1].numel() >= 2:
                u.targets.append(feature_moments(y))
        stats = mse_target_stats(call)
        if stats is None:
            return
        loss, square, var = stats
        st = self.sites.setdefault((loss_where(call), call.site), [0, 0, self.session.step, None, None, 0.0, 0.0])
        st[0] += 1
        if math.sqrt(square) < MIN_RMS or var <= 0 or not math.isfinite(loss):
            return
        if st[3] is None and st[1] == 0:
            st[3] = loss / square
        if loss > var:
            st[1] += 1
            st[4] = loss / var
            st[5], st[6] = max(st[5], math.sqrt(square)), max(st[6], math.sqrt(var))

    def findings(self) -> list:
        out = self._unscale_findings()
        for (where, site), (calls, hits, step, first, last, rms, std) in self.sites.items():
            if hits < MIN_CALLS or hits < calls or first is None or first < FIRST_SHARE:
                continue
            message = (f"mse_loss got targets with a root mean square of {rms:.3g} (spread {std:.3g}) on {hits} of {hits} "
                       f"sampled calls from step {step} ({where}); the first loss was {first:.0%} of their mean square "
                       f"and the loss is still {last:.3g}x their variance (R^2 below 0 throughout): a network that "
                       f"starts near 0 has to travel orders of magnitude before it learns anything; standardise the "
                       f"targets with the training mean and std (and map the predictions back)")
            out.append(self.finding(message, where=site, step=step, evidence={
                "calls": hits, "target_rms": rms, "target_std": std, "first_loss_to_mean_square": first,
                "last_loss_to_variance": last}))
        return out

    def _unscale_findings(self) -> list:
        out = []
        for u in self.unscales.values():
            if u.identity < 1 or len(u.maps) < MIN_EVAL or any(m is None for m in u.maps) or len(u.targets) < MIN_CALLS:
                continue
            a, b = (_vector(v) for v in u.maps[0])
            tol = 1e-3 * float(a.abs().max())
            if any(not (torch.allclose(_vector(ma), a, rtol=1e-3, atol=1e-6)
                        and torch.allclose(_vector(mb), b, rtol=1e-3, atol=tol)) for ma, mb in u.maps[1:]):
                continue   # not one fixed map
            m, sd = (_vector(v).mean(0) for v in zip(*u.targets))
            if m.shape != a.shape or not bool((sd > 0).all()) or not bool((a != 0).all()):
                continue
            inverse_mean, inverse_std = (m - b) / a.abs(), sd / a.abs()
            standardizes = bool(((inverse_mean.abs() <= 0.5) & (inverse_std >= 0.5) & (inverse_std <= 2)).all())
            moves = bool((((a * m + b - m).abs() >= 3 * sd) | (a.abs() >= 3) | (a.abs() <= 1 / 3)).all())
            if not (standardizes and moves):
                continue
            k = 0
            message = (f"{u.name} produces the output of {u.model}: it returns its input unchanged in training mode and "
                       f"maps it to {float(a[k]):.3g} * v + {float(b[k]):.3g} in eval mode (from step {u.step}, "
                       f"{plural(len(u.maps), 'call')}), an unscale for standardized predictions; but the model was trained on "
                       f"targets with mean {float(m[k]):.3g} and standard deviation {float(sd[k]):.3g}, already in the "
                       f"units that unscale produces ({plural(len(u.targets), 'sampled loss call')}). The targets were never "
                       f"standardized, so evaluation predictions are unscaled a second time: standardize the training "
                       f"targets with the statistics the unscale uses (or drop the unscale)")
            out.append(self.finding(message, step=u.step, confidence=0.75, evidence={
                "transform": u.name, "model": u.model, "scale": a.tolist(), "shift": b.tolist(),
                "target_mean": m.tolist(), "target_std": sd.tolist(), "eval_calls": len(u.maps),
                "loss_calls": len(u.targets)}))
        return out


def _affine(x: torch.Tensor, y: torch.Tensor) -> tuple | None:
    """Per feature (the last axis), (a, b) of y = a x + b when every feature's correlation is at least
    AFFINE (features constant in x are left out); None when some feature is not such a map."""
    fx = x.detach().double().reshape(-1, x.shape[-1])
    fy = y.detach().double().reshape(-1, y.shape[-1])
    mx, my = fx.mean(0), fy.mean(0)
    dx, dy = fx - mx, fy - my
    vx, vy, cov = (dx * dx).mean(0), (dy * dy).mean(0), (dx * dy).mean(0)
    if not bool((vx > 0).all()) or not bool((vy > 0).all()):
        return None
    if not bool(((cov / (vx * vy).sqrt()).abs() >= AFFINE).all()):
        return None
    a = cov / vx
    return a.tolist(), (my - a * mx).tolist()


def _vector(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64, device="cpu")
