"""KBW075: next-token targets two positions ahead of the input ids: labels shifted once by the data
code and again by the loss (a causal-LM or encoder-decoder model shifts the labels it is given), so
position t is scored on the token after the next.

Criterion: on a sampled step, an nn.Embedding of a watched model receives ids [B, T]; a cross_entropy
or nll_loss call of the same step gets integer targets of B * (T - k) elements, k in 0..2, read as
[B, T - k]. On up to ROWS rows, at the positions t that tell the two readings apart (target not
ignore_index, ids[t + 1] != ids[t + 2]), the target equals ids[t + 2] on at least SHARE of at least
MIN_POSITIONS positions and equals ids[t + 1] on at most NEXT_SHARE; on at least MIN_CALLS sampled
calls and on at least SHARE of the calls compared at that site. Targets shifted once match ids[t + 1];
unshifted ones are KBW043's; a model that predicts two tokens ahead on purpose (multi-token
prediction heads) would match too and is named in the message.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, SiteTally, plural, this_step

ROWS = 8             # rows of ids kept per embedding input
MAX_LENGTH = 1024    # positions kept per row
MIN_POSITIONS = 16
SHARE = 0.9
NEXT_SHARE = 0.5
MIN_CALLS = 3
MAX_INPUTS = 4       # embedding inputs kept per step (encoder and decoder, token and position)
MAX_SITES = 16


def shift_shares(ids: list, targets: list, ignore: int):
    """(share of targets equal to ids two ahead, share equal to ids one ahead, positions compared) over
    the positions where those two ids differ and the target is not ignored; rows of ints."""
    two = one = compared = 0
    for row_ids, row_targets in zip(ids, targets):
        for t, y in enumerate(row_targets):
            if t + 2 >= len(row_ids) or y == ignore or row_ids[t + 1] == row_ids[t + 2]:
                continue
            compared += 1
            two += y == row_ids[t + 2]
            one += y == row_ids[t + 1]
    if compared == 0:
        return 0.0, 0.0, 0
    return two / compared, one / compared, compared


def target_rows(targets: torch.Tensor, rows: int, length: int):
    """(n, the first ROWS rows of the targets read as [rows, n]) for the n in length, length - 1,
    length - 2 that the targets' size fits (every position, or all but the last one or two), else None."""
    for n in (length, length - 1, length - 2):
        if n > 0 and targets.numel() == rows * n:
            return n, targets.detach().reshape(rows, n)[:ROWS, :MAX_LENGTH].tolist()
    return None


class TargetsTwoTokensAhead(Check):
    __doc__ = __doc__
    code = "KBW075"
    name = "targets-two-tokens-ahead"
    entry = "labels-shifted-twice"
    title = "next-token targets are the input ids two positions ahead: the labels were shifted twice"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.inputs: list = []   # [(step, B, T, module name, rows of ids as ints)], at most MAX_INPUTS
        self.sites = SiteTally(MAX_SITES)  # details: (share two ahead, share one ahead, positions, embedding)

    def on_module_input(self, module, args):
        if not isinstance(module, torch.nn.Embedding) or not args:
            return
        ids = args[0]
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() != 2 or ids.shape[1] < 4:
            return
        step = self.session.step
        self.inputs = this_step(self.inputs, step, MAX_INPUTS)
        rows = ids.detach()[:ROWS, :MAX_LENGTH].tolist()
        self.inputs.append((step, ids.shape[0], ids.shape[1], self.session.module_name(module), rows))

    def on_loss(self, call):
        if call.kind not in ("cross_entropy", "nll_loss"):
            return
        y = call.target
        if not isinstance(y, torch.Tensor) or y.is_floating_point() or y.is_complex() or y.numel() < MIN_POSITIONS:
            return
        step = self.session.step
        ignore = call.options.get("ignore_index", -100)
        best = None
        for _, b, t, name, rows in (x for x in self.inputs if x[0] == step):
            read = target_rows(y, b, t)
            if read is None:
                continue
            two, one, compared = shift_shares(rows, read[1], ignore)
            if compared >= MIN_POSITIONS and (best is None or two > best[0]):
                best = (two, one, compared, name)
        if best is None:
            return
        self.sites.count(call, step, best[0] >= SHARE and best[1] <= NEXT_SHARE, best)

    def findings(self) -> list:
        out = []
        for kind, where, site, compared, matched, step, (two, one, positions, embedding) in \
                self.sites.confirmed(MIN_CALLS, SHARE):
            message = (f"{kind} ({where}) got targets equal to the ids {embedding} received two positions "
                       f"later on {matched} of {plural(compared, 'sampled call')} from step {step} ({two:.0%} of "
                       f"{positions} positions that tell the readings apart at step {step}; one position later: "
                       f"{one:.0%}): the labels were shifted twice, once by the data code and once by the loss or "
                       f"the model, so each position learns the token after next; pass unshifted labels to a "
                       f"model that shifts them itself, or shift once by hand (unless the head is meant to predict "
                       f"two tokens ahead)")
            out.append(self.finding(message, where=site, step=step, evidence={
                "compared_calls": compared, "matching_calls": matched, "share_two_ahead": two,
                "share_one_ahead": one, "positions": positions, "embedding": embedding}))
        return out
