"""KBW066: the id that pads the batch also ends every sequence (pad token = eos token), and the targets
are masked wherever that id appears, so the end of a sequence is never a target.

Criterion: on a sampled step, an nn.Embedding of a watched model receives ids [B, T] padded on the
right with p (tensors.padding_runs) in which every row examined ends with p, and the shortest of
those trailing runs is exactly 1: the longest sequence of the batch also ends in p, which is then
its last real token, not padding (with a pad id of its own, the longest sequence ends in its eos and
carries no pad at all); and no one id precedes the first p in at least SHARE of the rows (a separate
end token would: a batch padded to a fixed length whose longest sequence is one token short also
ends every row in a pad, run 1 included, but its rows then end in that token). A cross_entropy /
nll_loss call of the same step gets integer targets that form B rows of at least T - 1 positions,
aligned with the ids position by position or one earlier, whichever makes more of the non-ignored
targets in the WINDOW positions before each row's first p equal to the ids (at least half: the
targets are the token ids, as in language modelling); so aligned, the target at each row's first p
(its end token) is ignore_index in at least SHARE of the rows. Found on at least MIN_CALLS sampled
calls and on at least SHARE of the calls compared at that site, and the batches of that embedding
look this way in at least SHARE of the sampled steps where they were right-padded: with a pad id of
its own, a batch padded to a fixed length ends every row in a pad and has a run of exactly one only
when a sequence happens to be one token short, a step now and then, not every step.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, SiteTally, plural, this_step
from kb_tools.watch.checks.tensors import PAD_ROWS, edge_runs, padding_runs, token_targets

SHARE = 0.9
MIN_CALLS = 3
MIN_ROWS = 4
WINDOW = 16     # positions before each row's end compared to find the alignment
MAX_INPUTS = 4   # embedding inputs kept per step
MAX_SITES = 16
MAX_MODULES = 16  # embeddings whose padded batches are counted


class EndTokenMaskedAsPadding(Check):
    __doc__ = __doc__
    code = "KBW066"
    name = "end-token-masked-as-padding"
    entry = "pad-token-is-eos"
    title = "the pad id also ends every sequence and its targets are masked, so the end of a sequence is never trained"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.inputs: list = []   # [(step, rows, width, pad id, first pad position per row, ids before it, embedding)]
        self.sites = SiteTally(MAX_SITES)  # details: (pad id, embedding)
        self.padded: dict = {}   # embedding name -> [right-padded batches, of them ending every row in one pad]

    def on_module_input(self, module, args):
        if not isinstance(module, torch.nn.Embedding) or not args:
            return
        found = padding_runs(args[0])
        if found is None:
            return
        pad, spans = found
        ids = args[0].detach()[:PAD_ROWS].cpu()
        rows, width = ids.shape
        if rows < MIN_ROWS or not all(end == width for _, _, end in spans):
            return
        name = self.session.module_name(module)
        if name not in self.padded and len(self.padded) >= MAX_MODULES:
            return
        counts = self.padded.setdefault(name, [0, 0])
        counts[0] += 1
        runs = edge_runs(ids.flip(1))
        if not bool((ids[:, -1] == pad).all()) or int(runs.min()) != 1:
            return
        ends = (width - runs).tolist()
        before = [int(ids[r, e - 1]) for r, e in enumerate(ends) if e >= 1]
        if before and max(before.count(v) for v in set(before)) >= SHARE * len(before):
            return  # a separate end token closes the rows
        counts[1] += 1
        step = self.session.step
        self.inputs = this_step(self.inputs, step, MAX_INPUTS)
        windows = [ids[r, max(0, e - WINDOW):e].tolist() for r, e in enumerate(ends)]
        self.inputs.append((step, args[0].shape[0], width, pad, ends, windows, name))

    def on_loss_input(self, call):
        y = token_targets(call)
        if y is None:
            return
        step = self.session.step
        ignore = call.options.get("ignore_index", -100)
        best = None
        for _, rows, width, pad, ends, windows, name in (x for x in self.inputs if x[0] == step):
            if y.numel() % rows or y.numel() // rows < width - 1:
                continue
            targets = y.detach().reshape(rows, -1)[:PAD_ROWS].cpu().tolist()
            shift = _alignment(targets, ends, windows, ignore)
            if shift is None:
                continue
            at_end = [row[e - shift] for row, e in zip(targets, ends) if 0 <= e - shift < len(row)]
            if len(at_end) >= MIN_ROWS:
                share = sum(t == ignore for t in at_end) / len(at_end)
                if best is None or share > best[0]:
                    best = (share, pad, name)
        if best is not None:
            self.sites.count(call, step, best[0] >= SHARE, best[1:])

    def findings(self) -> list:
        out = []
        for kind, where, site, compared, masked, step, (pad, module) in self.sites.confirmed(MIN_CALLS, SHARE):
            padded, ending = self.padded.get(module, (0, 0))
            if ending < SHARE * padded:
                continue
            message = (f"every sequence {module} received ends with id {pad}, the id that also pads the batch (the "
                       f"longest sequence ends in exactly one {pad}), and {kind} ({where}) got its target there "
                       f"masked to ignore_index on {masked} of {plural(compared, 'sampled call')} from step {step}: "
                       f"the pad token is the eos token and the labels are masked by id, so the model is never "
                       f"trained to end a sequence; mask padding by position (labels[attention_mask == 0] = -100) "
                       f"or give the tokenizer a pad token of its own")
            out.append(self.finding(message, where=site, step=step, evidence={
                "compared_calls": compared, "masked_calls": masked, "pad_id": pad, "embedding": module,
                "padded_batches": padded, "batches_ending_in_one_pad": ending}))
        return out


def _alignment(targets: list, ends: list, windows: list, ignore: int):
    """0 when the targets are the ids at the same positions, 1 when they are the next ids, judged on
    the WINDOW positions before each row's end; None when neither holds for at least half of the
    non-ignored targets there (the targets are not token ids of this input)."""
    best, best_share = None, 0.5
    for shift in (0, 1):
        same = total = 0
        for row, e, window in zip(targets, ends, windows):
            start = e - len(window)
            for k, token in enumerate(window):
                j = start + k - shift
                if 0 <= j < len(row) and row[j] != ignore:
                    total += 1
                    same += row[j] == token
        if total and same / total >= best_share:
            best, best_share = shift, same / total
    return best
