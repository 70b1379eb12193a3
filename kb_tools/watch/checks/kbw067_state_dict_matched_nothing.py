"""KBW067: load_state_dict(strict=False) that matched almost nothing: the checkpoint's names differ from
the model's, so the model keeps its random initialisation while the run goes on as fine-tuning.

Criterion: a call of Module.load_state_dict with strict=False whose report lists as missing at least
SHARE of the module's own state_dict keys (at least MIN_KEYS of them) while also listing at least
one unexpected key: the checkpoint held tensors, but under other names (a "module." or "_orig_mod."
prefix, a renamed submodule). Loading a backbone into a model with a new head misses the head's few
keys only; a checkpoint that covers part of the model misses less than SHARE of it.
"""
from __future__ import annotations

from kb_tools.watch.checks import Check, names, plural

SHARE = 0.9
MIN_KEYS = 2
MAX_CALLS = 16  # calls remembered


def _prefix(keys: list) -> str:
    """The leading dotted component most keys share, with its dot ("module."), or ""."""
    heads = [k.split(".", 1)[0] + "." for k in keys if "." in k]
    if not heads:
        return ""
    best = max(set(heads), key=heads.count)
    return best if heads.count(best) >= SHARE * len(keys) else ""


class StateDictMatchedNothing(Check):
    __doc__ = __doc__
    code = "KBW067"
    name = "state-dict-matched-nothing"
    entry = "load-state-dict-shape-mismatch"
    title = "load_state_dict(strict=False) left most of the model's keys missing while the checkpoint's went unused"
    confidence = 0.9

    def __init__(self, session):
        super().__init__(session)
        self.calls: list = []  # (module class, site, keys, missing, unexpected, examples, hint, step)

    def on_state_dict_loaded(self, module, strict, result, site):
        if strict or len(self.calls) >= MAX_CALLS:
            return
        missing = list(getattr(result, "missing_keys", []) or [])
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        own = len(module.state_dict())
        if not unexpected or own < MIN_KEYS or len(missing) < max(MIN_KEYS, SHARE * own):
            return
        ours, theirs = _prefix(missing), _prefix(unexpected)
        hint = ""
        if theirs and theirs != ours:
            hint = f"the checkpoint's keys start with {theirs!r}" + (f", the model's with {ours!r}" if ours else "")
        elif ours and ours != theirs:
            hint = f"the model's keys start with {ours!r}, the checkpoint's do not"
        self.calls.append((type(module).__name__, site, own, len(missing), len(unexpected),
                           (missing[:2], unexpected[:2]), hint, self.session.step))

    def findings(self) -> list:
        out = []
        for cls, site, own, missing, unexpected, (m_ex, u_ex), hint, step in self.calls:
            where = f" called at {site}" if site else ""
            message = (f"load_state_dict(strict=False) on {cls}{where} matched almost nothing: {missing} of its "
                       f"{plural(own, 'key')} are missing (e.g. {names(m_ex, 2)}) and {unexpected} of the "
                       f"checkpoint's went unused (e.g. {names(u_ex, 2)}){'; ' + hint if hint else ''}: the model "
                       f"keeps its random initialisation; rename the checkpoint's keys to the model's (strip or "
                       f"add the prefix) and check the returned missing_keys")
            out.append(self.finding(message, where=site, step=step, evidence={
                "module": cls, "keys": own, "missing": missing, "unexpected": unexpected,
                "missing_examples": m_ex, "unexpected_examples": u_ex}))
        return out
