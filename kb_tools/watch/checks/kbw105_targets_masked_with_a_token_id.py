"""KBW105: the positions a language model should not learn are marked in the targets with a token id,
not with the loss's ignore_index: the model is trained to predict that token there.

Criterion: on a sampled step, an nn.Embedding of a watched model receives ids [B, T]; a cross_entropy
/ nll_loss call of the same step, with reduction mean or sum, gets integer targets that form B rows
of at least T - 1 positions. Aligned with the ids one position earlier (next-token targets) or
position by position, at least LM_SHARE of the targets that are not ignore_index equal the ids
(it is a language model's loss: the target is the next input token), and the targets that differ
from the ids are, for at least MASK_SHARE of them, one value c other than ignore_index, over at
least MIN_POSITIONS positions and at least MIN_FRACTION of all targets: a block written with c where
the text says something else, a prompt or a document marked with the wrong value. On at least
MIN_CALLS sampled calls and on SHARE of the calls compared at that site. A masked language model
(its targets differ from the ids at the masked positions with many values), a tagger or a seq2seq
decoder (its targets are not its input ids) and padding labelled with the pad id (there the
targets equal the ids; KBW065 reads that) stay silent. Only calls that show such a block are
tallied, so the site's share is of those calls: MIN_CALLS is the bar that counts.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, SiteTally, plural, this_step
from kb_tools.watch.checks.tensors import token_targets

LM_SHARE = 0.5        # of the non-ignored targets equal to the aligned ids: a language model's loss
MASK_SHARE = 0.9      # of the differing targets that hold one value
MIN_POSITIONS = 16
MIN_FRACTION = 0.1    # of all targets compared
MIN_CALLS = 3
SHARE = 0.9
MAX_INPUTS = 4        # embedding inputs kept per step
MAX_ROWS = 64
MAX_SITES = 16


class TargetsMaskedWithATokenId(Check):
    __doc__ = __doc__
    code = "KBW105"
    name = "targets-masked-with-a-token-id"
    entry = "ignore-index-mismatch"
    title = "the targets mark the positions not to learn with a token id instead of ignore_index"
    confidence = 0.85

    def __init__(self, session):
        super().__init__(session)
        self.inputs: list = []   # [(step, the first MAX_ROWS rows of ids [B, T] on the host, B, module name)]
        self.sites = SiteTally(MAX_SITES)  # details: (value, positions, share of all targets, embedding, ignore)

    def on_module_input(self, module, args):
        if not isinstance(module, torch.nn.Embedding) or not args:
            return
        ids = args[0]
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point() or ids.shape[1] < 4:
            return
        step = self.session.step
        self.inputs = this_step(self.inputs, step, MAX_INPUTS)
        self.inputs.append((step, ids.detach()[:MAX_ROWS].cpu(), ids.shape[0], self.session.module_name(module)))

    def on_loss_input(self, call):
        y = token_targets(call)
        if y is None or call.reduction not in ("mean", "sum"):
            return
        step = self.session.step
        ignore = call.options.get("ignore_index", -100)
        best = None
        for _, ids, batch, name in (x for x in self.inputs if x[0] == step):
            for shift in (1, 0):
                found = _masked_block(y, ids, batch, shift, ignore)
                if found is not None and (best is None or found[1] > best[1]):
                    best = (*found, name, ignore)
        if best is not None:
            self.sites.count(call, step, True, best)

    def findings(self) -> list:
        out = []
        for kind, where, site, compared, matched, step, details in self.sites.confirmed(MIN_CALLS, SHARE):
            value, positions, fraction, module, ignore = details
            message = (f"{kind} ({where}) is a language model's loss (its targets are the next ids {module} "
                       f"receives), but at step {step} {positions} targets ({fraction:.0%} of them) held the id "
                       f"{value} where the text has other tokens, on {matched} of "
                       f"{plural(compared, 'sampled call')}: those positions were marked with a token id, not "
                       f"ignore_index={ignore}, so the model is trained to predict {value} there; "
                       f"write -100 into the targets of the positions not to learn")
            out.append(self.finding(message, where=site, step=step, evidence={
                "compared_calls": compared, "masked_calls": matched, "value": value,
                "positions": positions, "fraction": fraction, "embedding": module}))
        return out


def _masked_block(y, ids, batch: int, shift: int, ignore: int):
    """(value, positions, fraction) when the targets, `batch` rows aligned with `ids` (their first rows)
    `shift` positions earlier, are mostly the ids and differ from them mostly by one value other than
    `ignore`; None otherwise."""
    rows, width = ids.shape
    length = y.numel() // batch if y.numel() % batch == 0 else 0
    if length < width - 1 or length > width:
        return None
    targets = y.detach().reshape(-1, length)[:rows].cpu()
    limit = min(length, width - shift)
    t, x = targets[:, :limit], ids[:, shift:shift + limit]
    kept = t != ignore
    total = int(kept.sum())
    if total < MIN_POSITIONS:
        return None
    same = (t == x) & kept
    if int(same.sum()) < LM_SHARE * total:
        return None
    differ = kept & ~same
    values = t[differ]
    if values.numel() < MIN_POSITIONS:
        return None
    uniq, counts = values.unique(return_counts=True)
    top = int(counts.argmax())
    positions = int(counts[top])
    if positions < MASK_SHARE * values.numel() or positions < MIN_FRACTION * total:
        return None
    return int(uniq[top]), positions, positions / total
