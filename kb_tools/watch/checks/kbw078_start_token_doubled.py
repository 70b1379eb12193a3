"""KBW078: every sequence opens with the same start token twice: a BOS (or decoder start) token added
by the text or the collator and again by the tokenizer or the model.

Criterion: on a sampled step, an nn.Embedding of a watched model with at least MIN_VOCAB rows
receives ids [B, T] (B >= MIN_ROWS, T >= 3) in which at least SHARE of the rows open with one id b
twice (ids[:, 0] == ids[:, 1] == b, the same b in all of them) and then hold at least 3 distinct
ids; b holds at most ELSEWHERE of the other positions (a start token does not occur inside the
text: a character-level template that opens with "##" is not one); b is not the batch's padding
id (tensors.padding_runs: left padding opens rows with a run of the pad id). On at least MIN_CALLS
sampled calls of that embedding and on at least SHARE of those compared. Segment and position
embeddings have few rows or ids that change from position 0 to 1.
"""
from __future__ import annotations

import torch

from kb_tools.watch.checks import Check, plural
from kb_tools.watch.checks.tensors import padding_runs

MIN_VOCAB = 8
MIN_ROWS = 4
SHARE = 0.9
MIN_CALLS = 3
ROWS = 64          # rows examined per call
ELSEWHERE = 0.01   # largest share of the other positions that may hold the doubled id
MAX_EMBEDDINGS = 8


class StartTokenDoubled(Check):
    __doc__ = __doc__
    code = "KBW078"
    name = "start-token-doubled"
    entry = "bos-token-duplication"
    title = "every sequence opens with the same start token twice"
    confidence = 0.8

    def __init__(self, session):
        super().__init__(session)
        self.embeddings: dict = {}  # module name -> [calls compared, calls doubled, first step, token id, rows]

    def on_module_input(self, module, args):
        if not isinstance(module, torch.nn.Embedding) or module.num_embeddings < MIN_VOCAB or not args:
            return
        ids = args[0]
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.dim() != 2 \
                or ids.shape[0] < MIN_ROWS or ids.shape[1] < 3:
            return
        name = self.session.module_name(module)
        st = self.embeddings.get(name)
        if st is None:
            if len(self.embeddings) >= MAX_EMBEDDINGS:
                return
            st = self.embeddings[name] = [0, 0, None, None, 0]
        head = ids.detach()[:ROWS].cpu()
        first, second = head[:, 0], head[:, 1]
        token = int(first.mode().values)
        doubled = (first == token) & (second == token)
        st[0] += 1
        if float(doubled.float().mean()) < SHARE:
            return   # the common case, decided without reading the rows
        varied = torch.tensor([len(set(row.tolist())) >= 3 for row in head], device=head.device)
        rest = head[:, 2:]
        if float((rest == token).float().mean()) > ELSEWHERE:
            return   # the token occurs inside the text too: a template that opens with "##", not a start token
        padded = padding_runs(ids)
        if padded is not None and padded[0] == token:
            return
        if float((doubled & varied).float().mean()) >= SHARE:
            st[1] += 1
            if st[2] is None:
                st[2], st[3], st[4] = self.session.step, token, head.shape[0]

    def findings(self) -> list:
        out = []
        for name, (compared, doubled, step, token, rows) in self.embeddings.items():
            if doubled < MIN_CALLS or doubled < SHARE * compared:
                continue
            message = (f"the ids {name} received opened with token {token} twice in every row on {doubled} of "
                       f"{plural(compared, 'sampled call')} from step {step} ({rows} rows examined at step {step}): "
                       f"the start token was added twice, once by the text or the collator and once by the "
                       f"tokenizer or the model, so training sees a prefix the model was not pretrained on and "
                       f"inference will likely add only one; add it in one place (add_special_tokens=False on text "
                       f"that already holds it, or drop it from labels that the model shifts right)")
            out.append(self.finding(message, step=step, evidence={
                "embedding": name, "token_id": token, "doubled_calls": doubled, "compared_calls": compared}))
        return out
