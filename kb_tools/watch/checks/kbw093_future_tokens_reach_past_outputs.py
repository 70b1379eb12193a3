"""KBW093: a model trained on next-token targets lets each position see the tokens after it (no
causal mask on its self-attention, or a bidirectional layer), so it learns to copy the answer from
its input: the training loss falls fast and generation, which has no future to read, is poor.

Criterion: on a sampled training step, an nn.Embedding of a watched model receives ids [B, T]
(T >= MIN_LENGTH) and returns an output with a gradient path; a cross_entropy or nll_loss call of
the same step gets logits laid out (B * (T - k), V) or (B, T - k, V), k in 0..2, and integer
targets that equal the ids one position later (KBW075's reading) on at least SHARE of at least
MIN_POSITIONS positions (every such call of the step: the decoder and an encoder fed the same ids). The
check then takes, once for each, the gradient of a fixed random projection of
the first row's logits at the middle position t0 with respect to that embedding output
(torch.autograd.grad on the step's own graph, no second forward, the parameters' .grad untouched):
for a causal model it is exactly zero at every position after t0. Reported when, in that row, the
largest gradient norm at a position after t0 is at least LEAK of the largest at a position before
t0 and more than OTHER_ROWS times the largest in the batch's other rows, for every such call (an
encoder that reads the whole sequence for a causal decoder is a design), on at least MIN_PROBES of
the probes taken (at most MAX_PROBES, on different steps) and on every probe. Batch statistics
(BatchNorm in training mode) reach later positions too, but every row alike, so the last condition
leaves them out; attention that sees the future stays within its row.
"""
from __future__ import annotations

import weakref

import torch

from kb_tools.watch.checks import Check, loss_where, this_step
from kb_tools.watch.checks.kbw075_targets_two_tokens_ahead import MAX_LENGTH, ROWS, shift_shares, target_rows

MIN_LENGTH = 8
MIN_POSITIONS = 16
SHARE = 0.9
LEAK = 0.05
MIN_PROBES = 2
MAX_PROBES = 3
MAX_INPUTS = 4   # embedding calls kept per step
OTHER_ROWS = 10


class FutureTokensReachPastOutputs(Check):
    __doc__ = __doc__
    code = "KBW093"
    name = "future-tokens-reach-past-outputs"
    entry = "causal-mask-missing"
    title = "next-token logits depend on the tokens after their position: the model can read the answer"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.pending: dict = {}   # id(embedding) -> (step, ids rows, B, T) between its input and its output
        self.outputs: list = []   # [(step, B, T, module name, ids rows, weakref to the output)], this step only
        self.probes: list = []    # [(step, leak ratio, t0, T, loss where, embedding name)], at most MAX_PROBES
        self.last_probe_step = None

    def _done(self) -> bool:
        return len(self.probes) >= MAX_PROBES

    def on_module_input(self, module, args):
        if self._done() or not isinstance(module, torch.nn.Embedding) or not args or not torch.is_grad_enabled():
            return
        ids = args[0]
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() != 2 or ids.shape[1] < MIN_LENGTH:
            return
        if len(self.pending) < MAX_INPUTS:
            self.pending[id(module)] = (self.session.step, ids.detach()[:ROWS, :MAX_LENGTH].tolist(),
                                        ids.shape[0], ids.shape[1])

    def on_module_forward(self, module, output, grad_enabled):
        if not isinstance(module, torch.nn.Embedding):
            return
        got = self.pending.pop(id(module), None)
        if got is None or not grad_enabled or not isinstance(output, torch.Tensor) or output.grad_fn is None:
            return
        step, rows, b, t = got
        if step != self.session.step or output.dim() != 3 or tuple(output.shape[:2]) != (b, t):
            return
        self.outputs = this_step(self.outputs, step, MAX_INPUTS)
        self.outputs.append((step, b, t, self.session.module_name(module), rows, weakref.ref(output)))

    def on_loss_input(self, call):
        step = self.session.step
        if self._done() or self.last_probe_step == step or call.kind not in ("cross_entropy", "nll_loss") \
                or not call.grad_enabled:
            return
        x, y = call.input, call.target
        if not isinstance(x, torch.Tensor) or x.grad_fn is None or not isinstance(y, torch.Tensor) \
                or y.is_floating_point() or y.is_complex() or y.numel() < MIN_POSITIONS:
            return
        ignore = call.options.get("ignore_index", -100)
        aligned = []   # (embedding output, logits as (B, n, V), T, module name) of every call the targets follow
        for _, b, t, name, rows, ref in (o for o in self.outputs if o[0] == step):
            read = target_rows(y, b, t)
            if read is None:
                continue
            n, targets = read
            if x.dim() == 2 and x.shape[0] == b * n:
                logits = x.reshape(b, n, x.shape[1])
            elif x.dim() == 3 and tuple(x.shape[:2]) == (b, n):
                logits = x
            else:
                continue
            _, one, compared = shift_shares(rows, targets, ignore)
            embedded = ref()
            if compared >= MIN_POSITIONS and one >= SHARE and embedded is not None:
                aligned.append((embedded, logits, t, name))
        if not aligned:
            return
        self.last_probe_step = step
        self.outputs = []
        # an encoder may read the whole sequence on purpose (a sentence autoencoder embeds the same ids twice):
        # the model leaks only if every embedding call the targets follow reaches the earlier logits from later ids
        leaks = [(_leak(logits, embedded), t, name) for embedded, logits, t, name in aligned]
        leaks = [(leak, t0, t, name) for (leak, t0), t, name in leaks if leak is not None]
        if leaks:
            leak, t0, t, name = min(leaks)
            self.probes.append((step, leak, t0, t, loss_where(call), name))

    def findings(self) -> list:
        leaking = [p for p in self.probes if p[1] >= LEAK]
        if len(leaking) < MIN_PROBES or len(leaking) < len(self.probes):
            return []
        step, leak, t0, t, where, name = leaking[0]
        message = (f"the logits at position {t0} of {t} depend on the ids {name} received at later positions "
                   f"(largest gradient at a later position {leak:.2g} times the largest at an earlier one, on {len(leaking)} of "
                   f"{len(self.probes)} probes from step {step}; a causal model gives exactly 0) while the loss "
                   f"({where}) scores each position on the next id: the model sees the token it must predict. "
                   f"Give the self-attention a causal mask (is_causal=True, or a triangular attn_mask), and keep "
                   f"bidirectional layers out of a next-token model")
        return [self.finding(message, step=step, evidence={
            "leak_ratio": leak, "position": t0, "length": t, "probes": len(self.probes), "leaking": len(leaking),
            "embedding": name})]


def _leak(logits: torch.Tensor, embedded: torch.Tensor):
    """(largest gradient norm at a position after t0 / the largest at a position before t0, t0), for a
    random projection of the first row's logits at the middle position t0, taken with respect to the
    embedding output; 0.0 when the later positions get no more than OTHER_ROWS times what the batch's
    other rows get (a dependence through batch statistics reaches every row alike; one through
    attention stays in its row); None when no gradient reaches the earlier positions."""
    t0 = (logits.shape[1] - 1) // 2
    if t0 < 1:
        return None, t0
    at = logits[0, t0, :].float()
    g = torch.Generator(device="cpu").manual_seed(0)
    projected = (at * torch.randn(at.shape[-1], generator=g, device="cpu").to(at.device)).sum()
    with torch.no_grad():   # the graph is only read: no graph is built for the gradient, kb watch's wrapper stays out
        grad, = torch.autograd.grad(projected, embedded, retain_graph=True, allow_unused=True)
    if grad is None:
        return None, t0
    own = grad[0].float().norm(dim=-1)
    before, after = float(own[:t0].max()), float(own[t0 + 1:].max())
    others = float(grad[1:].float().norm(dim=-1).max()) if grad.shape[0] > 1 else 0.0
    if before == 0 or after <= OTHER_ROWS * others:
        return None if before == 0 else 0.0, t0
    return after / before, t0
