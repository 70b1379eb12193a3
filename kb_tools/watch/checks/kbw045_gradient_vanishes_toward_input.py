"""KBW045: the weight gradients shrink layer after layer toward the input, by many orders of magnitude.

Criterion: the weights of the nn.Linear and nn.Conv layers a training forward runs (grad enabled),
taken in the order they ran, trainable and with a finite gradient, at least 5 of them; their RMS
gradient (norm / sqrt(numel)) at the first layer is at most 1e-5 of the last layer's, and it does
not grow from one layer to the next toward the input for at least 3 in 4 neighbouring pairs (a
steady decay); on every sampled step watched, at least 3 of them. Measured at initialisation: a
12-layer sigmoid MLP about 1e-11, 5 sigmoid layers about 6e-6, the 10-block sigmoid case 3e-10 to
1e-7 over its first 60 steps; healthy networks 3e-3 or more over 25 steps (a BatchNorm ResNet, a
6-layer transformer encoder, an 8-conv VGG without normalisation, tanh layers before an LSTM); a
12-layer ReLU MLP with torch's default init, itself slow to train, about 4e-5.
"""
from __future__ import annotations

import math
import weakref

import torch

from kb_tools.watch.checks import Check, created_at, plural

RATIO = 1e-5
STEADY = 0.75
MIN_LAYERS = 5
MIN_STEPS = 3
MAX_LAYERS = 512
LAYER_TYPES = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d,
               torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


class GradientVanishesTowardInput(Check):
    __doc__ = __doc__
    code = "KBW045"
    name = "gradient-vanishes-toward-input"
    entry = "vanishing-gradients"
    title = "weight gradients shrinking steadily from the last layer to the first, by 1e5 or more"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.order: list = []     # weakrefs to the layers, in the order a training forward first ran them
        self.seen: set = set()
        self.calls = self.hits = 0
        self.first_step = None
        self.last: tuple | None = None  # (ratio, layer names, their RMS gradients) of the last hit

    def on_module_forward(self, module, output, grad_enabled):
        if grad_enabled and isinstance(module, LAYER_TYPES) and id(module) not in self.seen \
                and len(self.order) < MAX_LAYERS:
            self.seen.add(id(module))
            self.order.append(weakref.ref(module))

    def on_step_pre(self, optimizer):
        s = self.session
        if s.optimizer_info(optimizer) is not s.primary_info():
            return
        held = s.trainable_ids()
        layers = []
        for ref in self.order:
            module = ref()
            weight = getattr(module, "weight", None) if module is not None else None
            if isinstance(weight, torch.Tensor) and weight.requires_grad and id(weight) in held \
                    and weight.grad is not None and weight.numel() > 0:
                layers.append((module, weight))
        if len(layers) < MIN_LAYERS:
            return
        with torch.no_grad():
            norms = torch.stack([torch.linalg.vector_norm(w.grad.detach().float()) / math.sqrt(w.numel())
                                 for _, w in layers]).cpu().tolist()
        if not all(math.isfinite(v) for v in norms) or norms[-1] <= 0:
            return
        self.calls += 1
        ratio = norms[0] / norms[-1]
        steady = sum(1 for a, b in zip(norms, norms[1:]) if a <= b) / (len(norms) - 1)
        if ratio <= RATIO and steady >= STEADY:
            self.hits += 1
            self.first_step = s.step if self.first_step is None else self.first_step
            self.last = (ratio, [s.module_name(m) for m, _ in layers], norms)

    def on_end(self):
        self.order.clear()  # hold no module past the run

    def findings(self) -> list:
        if self.hits < MIN_STEPS or self.hits < self.calls or self.last is None:
            return []
        ratio, layer_names, norms = self.last
        where = self.session.where()
        message = (f"the RMS weight gradient fell steadily from the last layer ({layer_names[-1]}, {norms[-1]:.2g}) "
                   f"to the first ({layer_names[0]}, {norms[0]:.2g}): {ratio:.1e} of it across "
                   f"{plural(len(norms), 'layer')}, on {self.hits} of {self.hits} sampled steps from step "
                   f"{self.first_step} (the {created_at('optimizer', where)} holds them): the early layers barely "
                   f"learn; saturating activations (sigmoid, tanh) or a small-gain init compound with depth, so use "
                   f"ReLU-family activations with a fan-in-aware init, residual connections or normalisation layers")
        shown = list(zip(layer_names, norms))
        if len(shown) > 12:
            shown = shown[:6] + shown[-6:]
        evidence = {"ratio_first_to_last": ratio, "layers": len(norms), "sampled_steps": self.hits,
                    "rms_gradient": {name: float(f"{v:.3g}") for name, v in shown}}
        return [self.finding(message, evidence=evidence, where=where, step=self.first_step)]
