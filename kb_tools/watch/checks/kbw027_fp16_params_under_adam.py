"""KBW027: float16 parameters updated by an Adam-family optimizer with a small eps.

Criterion: at a sampled step(), an optimizer whose param groups have `betas` and `eps` (Adam,
AdamW, NAdam, RAdam, Adamax) holds at least 1 trainable parameter of dtype float16 in a group
whose eps is below 1e-4. Its state is then float16 too: eps (1e-8 by default) rounds to 0,
(1 - beta2) * g**2 underflows to 0 for any gradient below about 5e-3, and the update divides by
zero. The share of exp_avg_sq entries that are exactly 0 after the step is measured and reported.
bfloat16 (fp32's exponent range) is not reported here.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, created_at, names, plural

EPS_FLOOR = 1e-4
MAX_PROBED = 8  # parameters whose exp_avg_sq is read after the step


class Fp16ParamsUnderAdam(Check):
    __doc__ = __doc__
    code = "KBW027"
    name = "fp16-params-under-adam"
    entry = "adam-eps-low-precision"
    title = "float16 parameters in an Adam-family optimizer with eps < 1e-4: eps and exp_avg_sq underflow to 0"
    confidence = 0.95

    def __init__(self, session):
        super().__init__(session)
        self.found: dict | None = None
        self.pending = False     # measure the state after the step that found it
        self.zero_share = None   # share of exactly-zero exp_avg_sq entries among the probed parameters

    def on_step_pre(self, optimizer):
        if self.found is not None:
            return
        half, eps, total = [], None, 0
        for group in optimizer.param_groups:
            if "betas" not in group or "eps" not in group:
                return
            params = [p for p in group["params"] if p.requires_grad]
            total += len(params)
            low = [p for p in params if p.dtype == torch.float16]
            if low and float(group["eps"]) < EPS_FLOOR:
                half.extend(low)
                eps = float(group["eps"]) if eps is None else min(eps, float(group["eps"]))
        if not half:
            return
        info = self.session.optimizer_info(optimizer)
        self.found = {"optimizer": type(optimizer).__name__, "site": info.site if info else None, "eps": eps,
                      "eps_in_fp16": float(torch.tensor(eps, dtype=torch.float16, device="cpu")), "fp16_parameters": len(half),
                      "trainable_parameters": total, "step": self.session.step,
                      "names": [self.session.param_name(p) for p in half[:20]]}
        self.pending = True

    def on_step_post(self, optimizer):
        if not self.pending or self.found is None or self.found["optimizer"] != type(optimizer).__name__:
            return
        self.pending = False
        zeros = count = probed = 0
        for p in (q for g in optimizer.param_groups for q in g["params"] if q.dtype == torch.float16):
            v = optimizer.state.get(p, {}).get("exp_avg_sq")
            if isinstance(v, torch.Tensor) and v.numel():
                zeros += int((v == 0).sum())
                count += v.numel()
                probed += 1
                if probed >= MAX_PROBED:
                    break
        if count:
            self.zero_share = zeros / count

    def findings(self) -> list:
        f = self.found
        if f is None:
            return []
        measured = (f"; after that step {self.zero_share:.0%} of their exp_avg_sq entries were exactly 0"
                    if self.zero_share is not None else "")
        message = (f"{plural(f['fp16_parameters'], 'float16 parameter')} of {f['trainable_parameters']} "
                   f"({names(f['names'], 3)}) are updated by {f['optimizer']} ({created_at('optimizer', f['site'])}) "
                   f"with eps={f['eps']:.0e}, which is {f['eps_in_fp16']:.3g} in float16, at step {f['step']}"
                   f"{measured}: Adam's state is float16 too, so its denominator sqrt(v) + eps underflows to 0; keep "
                   f"the parameters in float32 and use autocast")
        evidence = dict(f, exp_avg_sq_zero_share=self.zero_share)
        return [self.finding(message, where=f["site"], step=f["step"], evidence=evidence)]
