"""KBW043: a next-token loss whose targets are the model's own input ids at the same positions
(labels never shifted), so each position is scored on the token it can already see.

Criterion: at one loss site, cross_entropy or nll_loss gets integer targets with as many elements
as the ids an nn.Embedding of a watched model received earlier in the same sampled step; on up to
SAMPLE evenly spaced positions, at least MIN_POSITIONS of them not ignore_index, the target equals
the input id on at least SHARE of them; on at least MIN_CALLS sampled calls and on at least SHARE
of the calls compared. Shifted labels match their inputs only where a token repeats (a few
percent on text); masked-language-model targets sit where the input holds the mask token; a loss
on `logits[:, :-1]` against `labels[:, 1:]` has one position fewer per row than the inputs and is
never compared.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, SiteTally, plural, this_step

SAMPLE = 256          # positions compared per call, evenly spaced
MIN_POSITIONS = 16    # non-ignored positions a comparison needs
SHARE = 0.95
MIN_CALLS = 3
MAX_INPUTS = 4        # embedding inputs kept per step (token and position embeddings, encoder and decoder)
MAX_SITES = 16


def _positions(n: int) -> list:
    return list(range(0, n, max(1, n // SAMPLE)))[:SAMPLE]


class TargetsEqualInputs(Check):
    __doc__ = __doc__
    code = "KBW043"
    name = "targets-equal-inputs"
    entry = "autoregressive-off-by-one"
    title = "next-token targets equal to the input ids at the same positions: the labels were never shifted"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.inputs: list = []   # [(step, numel, module name, sampled ids as ints)], at most MAX_INPUTS
        self.sites = SiteTally(MAX_SITES)  # details: (share, embedding)

    def on_module_input(self, module, args):
        if not isinstance(module, torch.nn.Embedding) or not args:
            return
        ids = args[0]
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() < 2 or ids.numel() < MIN_POSITIONS:
            return
        step = self.session.step
        self.inputs = this_step(self.inputs, step, MAX_INPUTS)
        flat = ids.detach().reshape(-1)
        picked = flat[_positions(flat.numel())].tolist()
        self.inputs.append((step, flat.numel(), self.session.module_name(module), picked))

    def on_loss(self, call):
        if call.kind not in ("cross_entropy", "nll_loss"):
            return
        y = call.target
        if not isinstance(y, torch.Tensor) or y.is_floating_point() or y.is_complex() or y.numel() < MIN_POSITIONS:
            return
        step = self.session.step
        same = [x for x in self.inputs if x[0] == step and x[1] == y.numel()]
        if not same:
            return
        ignore = call.options.get("ignore_index", -100)
        targets = y.detach().reshape(-1)[_positions(y.numel())].tolist()
        best, best_name = None, None
        for _, _, name, ids in same:
            pairs = [(t, i) for t, i in zip(targets, ids) if t != ignore]
            if len(pairs) < MIN_POSITIONS:
                continue
            share = sum(t == i for t, i in pairs) / len(pairs)
            if best is None or share > best:
                best, best_name = share, name
        if best is None:
            return
        self.sites.count(call, step, best >= SHARE, (best, best_name))

    def findings(self) -> list:
        out = []
        for kind, where, site, compared, equal, step, (share, embedding) in self.sites.confirmed(MIN_CALLS, SHARE):
            message = (f"{kind} ({where}) got targets equal to the ids {embedding} received at the same positions "
                       f"on {equal} of {plural(compared, 'sampled call')} from step {step} ({share:.0%} of the "
                       f"compared positions at step {step}): each position is scored on the token it already "
                       f"sees, so the model learns to copy and the loss falls toward 0; shift them, inputs "
                       f"ids[:, :-1] against targets ids[:, 1:] (or pass unshifted labels only to a model that "
                       f"shifts them itself)")
            out.append(self.finding(message, where=site, step=step, evidence={
                "compared_calls": compared, "equal_calls": equal, "share": share, "embedding": embedding}))
        return out
