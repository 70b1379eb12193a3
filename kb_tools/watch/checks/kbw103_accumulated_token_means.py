"""KBW103: gradient accumulation over micro-batches of token losses, each a mean over its own
non-ignored tokens divided by the number of micro-batches: a mean of means, which weights a token
by one over its micro-batch's token count instead of averaging over every token of the window.

Criterion: on a sampled step, an optimizer's step() follows N >= 2 backward() calls from one line
of the user's code, each after a new batch (KBW102's window: same loader, gradients added, not
cleared), and each handed a cross_entropy / nll_loss mean (reduction "mean") divided by N or
multiplied by 1/N (within 1%) and nothing else; the targets of each such loss call are integer
class ids with at least one not equal to its ignore_index. Such a window counts when its
micro-batches' token counts differ by at least MIN_SPREAD (largest over smallest): with equal
counts the mean of means is the mean over all tokens. Reported when at least MIN_WINDOWS sampled
windows count and they are at least MIN_SHARE of the windows of this shape.
"""
from __future__ import annotations

from kb_tools.watch.checks import created_at, plural
from kb_tools.watch.checks.accumulation import REDUCTION_MEAN, MicroBatchWindows
from kb_tools.watch.checks.tensors import constant_factor

MIN_WINDOWS = 3
MIN_SHARE = 0.5
MIN_SPREAD = 1.25
MIN_TOKENS = 1
LOSS_NODES = ("NllLossBackward0", "NllLoss2DBackward0")


def divided_token_mean(node) -> float | None:
    """N when this backward() root is a mean-reduced nll_loss / cross_entropy divided by the number
    N (or multiplied by 1/N), else None."""
    factor = constant_factor(node, host_only=True) if node is not None else None
    if factor is None:
        return None
    kind, value = factor
    n = value if kind == "div" else (1 / value if value else 0)
    child = next((c for c, _ in node.next_functions if c is not None), None)
    if n < 2 or child is None or child.name() not in LOSS_NODES \
            or getattr(child, "_saved_reduction", None) != REDUCTION_MEAN:
        return None
    return n


class AccumulatedTokenMeans(MicroBatchWindows):
    __doc__ = __doc__
    code = "KBW103"
    name = "accumulated-token-means"
    entry = "grad-accum-token-normalization"
    title = "gradient accumulation averages per-micro-batch token means: tokens weighted by their micro-batch's count"
    confidence = 0.75

    def __init__(self, session):
        super().__init__(session)
        self.tokens = None        # non-ignored targets of the latest sampled cross_entropy / nll_loss call

    def on_loss(self, call):
        y = call.target
        if call.kind not in ("cross_entropy", "nll_loss") or call.reduction != "mean" or y is None \
                or y.is_floating_point() or y.is_complex():
            return
        self.tokens = int((y != call.options.get("ignore_index", -100)).sum())

    def reading(self, root):
        """(N, the loss call's non-ignored targets) for a token mean divided by N, else None."""
        n, tokens, self.tokens = divided_token_mean(root), self.tokens, None
        return (round(n, 2), tokens) if n is not None and tokens is not None and tokens >= MIN_TOKENS else None

    def window_ended(self, optimizer, w):
        if not w.micro_batches or None in w.readings or len({n for n, _ in w.readings}) != 1:
            return
        calls = len(w.readings)
        if abs(w.readings[0][0] - calls) > 0.01 * calls:
            return
        counts = [tokens for _, tokens in w.readings]
        spread = max(counts) / min(counts)
        self.count(optimizer, w, spread >= MIN_SPREAD, spread)

    def findings(self) -> list:
        out = []
        for hits, windows, step, spread, line, site in self.reported(MIN_WINDOWS, MIN_SHARE):
            message = (f"on {hits} of {plural(windows, 'sampled step')} with accumulation, backward() at {line} took "
                       f"each micro-batch's token mean divided by the number of micro-batches while their token "
                       f"counts differed up to {spread:.1f}x ({created_at('optimizer', site)}): a mean of means, so "
                       f"a token in a short micro-batch weighs more than one in a long one; sum each micro-batch's "
                       f"token losses and divide by the window's total token count")
            out.append(self.finding(message, where=line, step=step,
                                    evidence={"windows": hits, "windows_of_shape": windows, "max_spread": spread}))
        return out
