"""KBW065: the padding of a batch of token ids is scored as targets: at the padded positions the
targets hold the pad id and the loss neither ignores it nor leaves the masking to the caller.

Criterion: on a sampled step, an nn.Embedding of a watched model receives ids [B, T] padded at one
edge (tensors.padding_runs: at least half the rows end, or begin, with a run of at least 2 copies of
one id p); a cross_entropy / nll_loss call of the same step, with reduction mean or sum and
ignore_index other than p, gets integer targets that form B rows of at least T - 1 positions;
aligned with the ids position by position, or one position earlier (next-token targets), at least
SHARE of the targets at the padded positions are p, over at least MIN_POSITIONS positions, while at
most OTHERS_SHARE of the other aligned targets are p (a pad id is reserved: real data that merely
ends in a run of a common value, such as a blank image background, has it elsewhere too); on at
least MIN_CALLS sampled calls and on at least SHARE of the calls compared at that site. Targets set
to ignore_index at the padding, a loss with ignore_index=p, or reduction="none" (the caller may mask
it) stay silent. The finding names ignore-index-mismatch when the same targets do hold ignore_index
elsewhere (a prompt or a document boundary masked to -100): the code has a masking convention and the
padding was given another value; otherwise padded-loss-reduction.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, SiteTally, plural, this_step
from kb_tools.watch.checks.tensors import PAD_ROWS, padding_runs, token_targets

MIN_POSITIONS = 16
SHARE = 0.9
MIN_CALLS = 3
OTHERS_SHARE = 0.05
MAX_INPUTS = 4   # padded embedding inputs kept per step
MAX_SITES = 16


class PaddingScoredAsTargets(Check):
    __doc__ = __doc__
    code = "KBW065"
    name = "padding-scored-as-targets"
    entry = "padded-loss-reduction"
    also = ("ignore-index-mismatch",)
    title = "the pad id of the input ids is the target at the padded positions and the loss does not ignore it"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.inputs: list = []   # [(step, rows, width, pad id, spans, module name)], at most MAX_INPUTS
        self.sites = SiteTally(MAX_SITES)  # details: (share, padded positions, pad id, embedding)
        self.masking_sites: dict = {}        # loss site -> ignore_index, when its scored targets also hold it elsewhere

    def on_module_input(self, module, args):
        if not isinstance(module, torch.nn.Embedding) or not args:
            return
        found = padding_runs(args[0])
        if found is None:
            return
        pad, spans = found
        if sum(end - start for _, start, end in spans) < MIN_POSITIONS:
            return
        step = self.session.step
        self.inputs = this_step(self.inputs, step, MAX_INPUTS)
        rows, width = args[0].shape
        self.inputs.append((step, rows, width, pad, spans, self.session.module_name(module)))

    def on_loss_input(self, call):
        y = token_targets(call)
        if y is None or call.reduction not in ("mean", "sum"):
            return
        step = self.session.step
        ignore = call.options.get("ignore_index", -100)
        best = None
        for _, rows, width, pad, spans, name in (x for x in self.inputs if x[0] == step):
            if pad == ignore or y.numel() % rows or y.numel() // rows < width - 1:
                continue
            targets = y.detach().reshape(rows, -1)[:PAD_ROWS].cpu()
            for shift in (0, 1):
                share, positions = _scored_share(targets, width, pad, spans, shift)
                if positions >= MIN_POSITIONS and (best is None or (share, positions) >= best[:2]):
                    best = (share, positions, pad, name)
        if best is not None:
            self.sites.count(call, step, best[0] >= SHARE, best)
            if best[0] >= SHARE and call.site not in self.masking_sites and len(self.masking_sites) < MAX_SITES \
                    and bool((y == ignore).any()):
                self.masking_sites[call.site] = ignore

    def findings(self) -> list:
        out = []
        for kind, where, site, compared, scored, step, details in self.sites.confirmed(MIN_CALLS, SHARE):
            share, positions, pad, module = details
            ignore = self.masking_sites.get(site)
            convention = ("" if ignore is None else f"; the same targets mark other positions with ignore_index={ignore}, "
                          f"so the padding was given the wrong value")
            message = (f"{kind} ({where}) scored the padding of the ids {module} received as targets: at step "
                       f"{step}, {share:.0%} of {positions} padded positions had the pad id {pad} as their target, "
                       f"not ignored, on {scored} of {plural(compared, 'sampled call')}{convention}; the model learns to "
                       f"predict padding and the mean is taken over padding too, so the loss on real tokens is "
                       f"diluted by the pad share; set the targets at padded positions to -100 (or pass "
                       f"ignore_index={pad})")
            out.append(self.finding(message, where=site, step=step, entry=None if ignore is None else "ignore-index-mismatch",
                                    evidence={"compared_calls": compared, "scored_calls": scored, "pad_id": pad,
                                              "share": share, "padded_positions": positions, "embedding": module,
                                              "ignore_index_elsewhere": ignore}))
        return out


def _scored_share(targets, width: int, pad: int, spans: list, shift: int) -> tuple:
    """(share of the padded positions whose target is `pad`, positions compared), with the targets
    aligned to the ids `shift` positions earlier; (0.0, 0) when `pad` is also the target at more
    than OTHERS_SHARE of the other aligned positions (then it is data, not padding)."""
    rows, length = targets.shape
    limit = min(length, width - shift)
    padded = torch.zeros(rows, limit, dtype=torch.bool, device=targets.device)
    for row, start, end in spans:
        if row < rows:
            padded[row, max(0, start - shift):max(0, min(limit, end - shift))] = True
    aligned = targets[:, :limit] == pad
    positions = int(padded.sum())
    others = int((~padded).sum())
    if positions == 0 or (others and int((aligned & ~padded).sum()) > OTHERS_SHARE * others):
        return 0.0, 0
    return int((aligned & padded).sum()) / positions, positions
