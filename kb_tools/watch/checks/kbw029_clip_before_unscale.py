"""KBW029: clip_grad_norm_ (or clip_grad_value_) runs on gradients the GradScaler has not unscaled yet.

Criterion: on at least 2 sampled calls of clip_grad_norm_ or clip_grad_value_, its parameters
belong to an optimizer that steps through an enabled GradScaler (seen at an earlier step():
scaler.step() had unscaled it), and scaler.unscale_(optimizer) has not been called since the last
scaler.update(): the gradients it measures and clips are still multiplied by the scale S (65536
at the start). clip_grad_norm_ then returns S times the true norm and the optimizer gets
max_norm / S; clip_grad_value_ cuts every element to +-clip_value in the scaled units, so after
unscaling no element is larger than clip_value / S.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, created_at, plural

MIN_CALLS = 2


def _stage(scaler, opt):
    """The scaler's stage for `opt` now ("READY" when nothing was unscaled since update())."""
    states = getattr(scaler, "_per_optimizer_states", None)
    state = dict.get(states, id(opt)) if isinstance(states, dict) else None
    stage = state.get("stage") if isinstance(state, dict) else None
    return getattr(stage, "name", "READY")


class ClipBeforeUnscale(Check):
    __doc__ = __doc__
    code = "KBW029"
    name = "clip-before-unscale"
    entry = "clip-before-unscale"
    title = "clip_grad_norm_ or clip_grad_value_ on GradScaler-scaled gradients (no scaler.unscale_(optimizer) before it)"
    confidence = 0.93

    def __init__(self, session):
        super().__init__(session)
        self.scaled: dict[int, int] = {}  # id(optimizer) -> index of the scaler that unscaled it in a step()
        self.calls = 0
        self.first: dict | None = None

    def on_step_pre(self, optimizer):
        if len(self.scaled) >= 64 or id(optimizer) in self.scaled:
            return
        for i, scaler in enumerate(self.session.live_scalers()):
            if scaler.is_enabled() and _stage(scaler, optimizer) == "UNSCALED":
                self.scaled[id(optimizer)] = i

    def on_clip(self, call):
        if not self.scaled or not call.parameters:
            return
        first = call.parameters[0]
        s = self.session
        opt = next((o for o in s.live_optimizers() if id(o) in self.scaled
                    and any(p is first for p in s.params_of(o))), None)
        if opt is None:
            return
        scalers = s.live_scalers()
        index = self.scaled[id(opt)]
        if index >= len(scalers):
            return
        scaler = scalers[index]
        if not scaler.is_enabled() or _stage(scaler, opt) != "READY":
            return
        self.calls += 1
        if self.first is None:
            scale = float(scaler.get_scale())
            norm = float(call.norm) if call.norm is not None else float("nan")
            info = s.optimizer_info(opt)
            self.first = {"step": s.step, "clip_site": call.site, "max_norm": float(call.max_norm), "kind": call.kind,
                          "returned_norm": norm, "scale": scale, "true_norm": norm / scale if scale else None,
                          "optimizer": type(opt).__name__, "optimizer_site": info.site if info else None,
                          "scaler_site": s.scalers[index].site if index < len(s.scalers) else None}

    def findings(self) -> list:
        f = self.first
        if f is None or self.calls < MIN_CALLS:
            return []
        head = (f"clip_grad_{f['kind']}_ (called at {f['clip_site']}) ran on gradients still multiplied by the "
                f"GradScaler's scale {f['scale']:g} ({created_at('scaler', f['scaler_site'])}) on "
                f"{plural(self.calls, 'sampled call')}, first at step {f['step']}: ")
        if f["kind"] == "value":
            what = (f"it cut every element to +-{f['max_norm']:g} in scaled units, so {f['optimizer']} receives no "
                    f"element larger than about {f['max_norm'] / f['scale']:.2g}")
        else:
            what = (f"it measured a norm of {f['returned_norm']:.4g} (the true norm is about {f['true_norm']:.3g}) and "
                    f"clipped it to max_norm={f['max_norm']:g}, so {f['optimizer']} receives a gradient of norm about "
                    f"{f['max_norm'] / f['scale']:.2g}")
        message = head + what + "; call scaler.unscale_(optimizer) before clipping"
        return [self.finding(message, where=f["clip_site"], step=f["step"], evidence=dict(f, calls=self.calls))]
