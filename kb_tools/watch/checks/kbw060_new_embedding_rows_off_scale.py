"""KBW060: the last rows of an embedding table, rows added for new tokens, start far larger than the rest.

Criterion: at each optimizer's first sampled step, an `nn.Embedding` of a watched model whose
weight that optimizer trains, with at least MIN_ROWS rows (its padding row left out) ends in a run of rows, at most a
quarter of the table, each of whose norm is at least RATIO times the 95th percentile of the
other rows' norms, and the row before that run is not. A table resized for added tokens keeps
its trained rows and gives the new ones torch's N(0, 1) default, whose norm is about sqrt(dim):
their logits, in a tied or resized head, take probability from every position. A table trained
or initialised as a whole (every row from one distribution, or word vectors of varied norm) has
no such tail, and new rows set near the trained ones (their mean) are not reported.
"""
from __future__ import annotations

import weakref

from kb_tools.watch.checks import Check, names, plural

MIN_ROWS = 16
RATIO = 4.0
MAX_TAIL_SHARE = 0.25
MAX_TABLES = 16


def off_scale_tail(norms, padding_idx=None):
    """(rows in the tail, the tail's median norm, the other rows' median and 95th percentile) of a
    list of row norms, or None when the table does not end in rows far above the others."""
    import torch
    keep = torch.ones(len(norms), dtype=torch.bool, device=norms.device)
    if padding_idx is not None:
        keep[padding_idx] = False
    rows = torch.arange(len(norms), device=norms.device)[keep]
    values = norms[keep]
    n = len(values)
    if n < MIN_ROWS:
        return None
    head = values[: n - max(1, int(n * MAX_TAIL_SHARE))]  # a reference no possible tail overlaps
    bound = RATIO * float(torch.quantile(head, 0.95))
    if bound <= 0:
        return None
    tail = 0
    while tail < n and float(values[n - 1 - tail]) >= bound:
        tail += 1
    if tail == 0 or tail > n * MAX_TAIL_SHARE:
        return None
    others = values[: n - tail]
    return ([int(r) for r in rows[n - tail:]], float(values[n - tail:].median()), float(others.median()),
            float(torch.quantile(others, 0.95)))


class NewEmbeddingRowsOffScale(Check):
    __doc__ = __doc__
    code = "KBW060"
    name = "new-embedding-rows-off-scale"
    entry = "new-token-embedding-init"
    title = "the last rows of an embedding table (added tokens) start far larger than the trained rows"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        # the optimizers whose tables were read: weak, for a dropped optimizer's id can come back as a new one's
        self.looked: weakref.WeakSet = weakref.WeakSet()
        self.found: dict[str, dict] = {}  # parameter name -> evidence

    def on_step_pre(self, optimizer):
        s = self.session
        if optimizer in self.looked or len(self.looked) >= MAX_TABLES:
            return
        self.looked.add(optimizer)  # a table resized between two phases is read by the second's optimizer
        import torch
        held, seen = {id(p) for p in s.params_of(optimizer)}, set()
        for model in s.models:
            module = model.module
            if module is None:
                continue
            for path, sub in module.named_modules():
                if len(seen) >= MAX_TABLES:
                    return
                if not isinstance(sub, torch.nn.Embedding):
                    continue
                weight = sub.weight
                if id(weight) in seen or id(weight) not in held or not weight.requires_grad or weight.dim() != 2:
                    continue
                seen.add(id(weight))
                with torch.no_grad():
                    norms = weight.detach().float().norm(dim=1).cpu()
                if not bool(torch.isfinite(norms).all()):
                    continue  # non-finite weights are KBW006's
                tail = off_scale_tail(norms, sub.padding_idx)
                name = s.param_names.get(id(weight)) or f"{path}.weight"  # a table made after watching began
                if tail is not None and name not in self.found:
                    rows, tail_median, others_median, others_p95 = tail
                    self.found[name] = {
                        "rows": len(norms), "new_rows": [rows[0], rows[-1]], "new_row_count": len(rows),
                        "new_rows_median_norm": round(tail_median, 4), "other_rows_median_norm": round(others_median, 4),
                        "other_rows_p95_norm": round(others_p95, 4),
                        "ratio": round(tail_median / others_median, 1) if others_median > 0 else None,
                        "step": s.step}

    def findings(self) -> list:
        if not self.found:
            return []
        listed = sorted(self.found)
        first = self.found[listed[0]]
        ratio = f"{first['ratio']}x" if first["ratio"] is not None else "far above"
        message = (f"{plural(len(listed), 'embedding')} ({names(listed)}) "
                   f"{'ends' if len(listed) == 1 else 'end'} in rows far larger than the others: in {listed[0]}, rows "
                   f"{first['new_rows'][0]}-{first['new_rows'][1]} ({first['new_row_count']} of {first['rows']}) have "
                   f"a median norm of {first['new_rows_median_norm']:#.3g}, {ratio} the other rows' "
                   f"{first['other_rows_median_norm']:#.3g}, at step {first['step']}: rows added for new tokens at "
                   f"the default N(0, 1) take probability from every position; initialise them at the mean of "
                   f"the trained rows (Hugging Face's resize_token_embeddings does)")
        return [self.finding(message, evidence={"tables": {n: self.found[n] for n in listed}},
                             where=self.session.where(), step=first["step"])]
